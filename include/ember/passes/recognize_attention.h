#pragma once
/// Attention as one kernel: the RecognizeAttention pass (nn.attention and its kernel live in
/// src/ir/ops/attention.cc).
#include <string>

#include "ember/ir/graph.h"
#include "ember/ir/loop.h"

namespace ember::passes {

/// RecognizeAttention (opt level 1): rewrites scaled dot-product attention written as ops,
///   batch_matmul(q, transpose(k)) -> multiply or divide by a scalar constant
///   -> [where(keep, ., -inf) for a bool or causal mask] -> [add a float mask]
///   -> softmax(last axis) -> batch_matmul(., v)
/// (with the reshapes that flatten batch dimensions for batch_matmul, as the PyTorch
/// frontend emits them) into one nn.attention call carrying
/// attrs["fusion_pattern"] = "attention (online softmax)" and the source names of the ops it
/// replaces. A tril constant mask becomes causal=1. It leaves the graph alone when an
/// intermediate (scores, probabilities) has another use, the mask fill is not -inf, or the
/// shapes do not line up.
ir::Function recognize_attention(const ir::Function& f);

}  // namespace ember::passes
