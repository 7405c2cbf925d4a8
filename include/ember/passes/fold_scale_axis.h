#pragma once
#include "ember/ir/graph.h"

namespace ember::passes {

/// FoldScaleAxis (opt level 3): a per-output-channel multiply by a constant after nn.conv2d
/// (axis 1, NCHW) or nn.dense (last axis) folds into the weights — conv(x, w) * s becomes
/// conv(x, w * s[:, None, None, None]) — when the conv/dense result has no other user; a
/// following per-channel add becomes a bias add (it is kept as an add of a constant; FuseOps
/// puts it in the conv's epilogue). A per-channel add or bias_add between the conv/dense and
/// the multiply is scaled with it: (conv(x, w) + b) * s becomes conv(x, w * s) + b * s.
/// Works with grouped and depthwise convs. A scale that is not per-channel (varies along
/// another axis, or is not a constant) is left alone. The new weight is an expression
/// (multiply of two constants) that FoldConstant evaluates; the conv node's name becomes
/// "<conv> + <scale's name>".
ir::Function fold_scale_axis(const ir::Function& f);

}  // namespace ember::passes
