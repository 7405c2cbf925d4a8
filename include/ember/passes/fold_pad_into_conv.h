#pragma once
#include "ember/ir/graph.h"

namespace ember::passes {

/// FoldPadIntoConv (opt level 2): TensorRT's "Padding + Convolution" fusion. An nn.pad of a
/// 4-D (NCHW) tensor in constant mode that pads only H and W, by non-negative amounts, folds
/// into the padding of the nn.conv2d that reads it when the pad value is 0, of an
/// nn.avg_pool2d when the value is 0 and the pool counts padding (count_include_pad=1), and
/// of an nn.max_pool2d when the value is -inf; pools also need ceil_mode=0 and the summed
/// padding to stay smaller than the window. Anything else — cropping (negative pads), pads
/// on N or C, another value or mode — is left alone. The folded call is named
/// "<pad> + <conv>" and gets attrs["fusion_pattern"] "Padding + Convolution" (or
/// "Padding + Pooling"). The pad itself stays for any other reader.
ir::Function fold_pad_into_conv(const ir::Function& f);

}  // namespace ember::passes
