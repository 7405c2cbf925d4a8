#pragma once
#include "ember/ir/graph.h"
#include "ember/passes/machine_model.h"

namespace ember::passes {

/// Int8Products (opt level 3, CPU targets whose machine model has int8_dot): a dense or conv
/// whose operands are dequantized 8-bit tensors, as a PT2E model imports a quantized layer,
///
///   nn.dense((cast(Q) - zx) * sx, (cast(W) - zw) * sw)   Q uint8 [..., K], zx and sx numbers;
///                                                        W a constant int8 [N, K], zw all 0,
///                                                        sw [N, 1] (per output channel)
///
/// becomes the exact int8 product and its float scale:
///
///   cast(nn.dense_u8s8(pack_bytes4(Q), pack_bytes4(W)) - zx * sum_k W[n, k]) * (sx * sw[n])
///
/// and likewise nn.conv2d (groups 1, Q [N, C, H, W], W [O, C, KH, KW], sw [O, 1, 1, 1]) becomes
/// nn.conv2d_u8s8 over words of four channels, its padding the zero point (so that the
/// correction is one constant per channel), where AlterOpLayout runs it blocked
/// (blocks_int8_conv) or the output rows hold at least one int32 vector (the NCHW form's
/// vectors run along them). A depthwise conv (groups = channels, W [C, 1, KH, KW]) becomes
/// nn.conv2d_u8s8's depthwise form over Q's bytes themselves (exact float32 sums, the
/// correction in float32) where AlterOpLayout blocks it (blocks_int8_conv, depthwise) and
/// its window has at most kU8S8DepthwiseMaxTaps taps. The int32 difference is exact
/// (|sum| < 2^31 for K up to 16384), so the result is rounded once, where the float product
/// rounded each term. Everything but the product and the activations' packing is constant and
/// FoldConstant evaluates it; the scale (and what follows: bias, activation, the next
/// quantize) is the kernel's epilogue. Elsewhere (no VNNI at the target's width, where the
/// int8 kernel would be slower than float32) and for any other form the op is left as it is.
/// `int8_dot`: the target's MachineModel::int8_dot (or the config's override, PassEnv);
/// `machine`: the target's model (its vector width and channel blocks).
ir::Function int8_products(const ir::Function& f, bool int8_dot, const MachineModel& machine);

}  // namespace ember::passes
