#pragma once
#include "ember/ir/graph.h"

namespace ember::passes {

/// SimplifyInference (opt level 0): rewrites inference-only ops into simpler ones.
/// nn.batch_norm(x, gamma, beta, mean, var) becomes x * scale + shift with per-channel
/// scale = gamma / sqrt(var + eps) and shift = beta - mean * scale, as expressions over the
/// BatchNorm's inputs (FoldConstant evaluates them when those are constants), broadcast along
/// the BatchNorm's axis. Dropout-like identities are removed. New nodes carry the BatchNorm's
/// source name.
ir::Function simplify_inference(const ir::Function& f);

}  // namespace ember::passes
