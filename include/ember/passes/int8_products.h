#pragma once
#include "ember/ir/graph.h"
#include "ember/passes/machine_model.h"

namespace ember::passes {

/// Int8Products (opt level 3, CPU targets whose machine model has int8_dot or, for 7-bit
/// activations, int8_dot_7bit): a dense or conv
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
/// (blocks_word_conv) or the output rows hold at least one int32 vector (the NCHW form's
/// vectors run along them). A depthwise conv (groups = channels, W [C, 1, KH, KW]) becomes
/// nn.conv2d_u8s8's depthwise form over Q's bytes themselves (exact float32 sums, the
/// correction in float32) where AlterOpLayout blocks it (blocks_word_conv, depthwise) and
/// its window has at most kU8S8DepthwiseMaxTaps taps. The int32 difference is exact
/// (|sum| < 2^31 for K up to 16384), so the result is rounded once, where the float product
/// rounded each term. Everything but the product and the activations' packing is constant and
/// FoldConstant evaluates it; the scale (and what follows: bias, activation, the next
/// quantize) is the kernel's epilogue.
///
/// A weight-only batch-1 dense, nn.dense(x, W) with x float32 [1, K] and W a constant int8
/// [N, K] (RecognizePatterns' form of torchao's Int8WeightOnlyConfig), becomes the same
/// int8 product over x taken to 16-bit integers q = round(x / s), s = max|x| / 32767, split
/// in two bytes q = 256 hi + lo:
///
///   s * sum_r c_r (nn.dense_u8s8(pack_bytes4([lo; hi + 128]), pack_bytes4(W))[r] - z_r)
///
/// with c = (1, 256) and z = (0, 128 sum_k W[n, k]): each weight word is read once for both
/// rows and nothing is converted, where the float kernel converts every weight (three
/// instructions a vector). x's rounding adds at most s / 2 an element, 2^-16 of its largest
/// magnitude (far below the weights' quantization error); a row holding a NaN or an
/// infinity gives NaN outputs (its scale is NaN). More rows keep the float dense
/// (the GEMM is compute-bound, and the rows of bytes would re-read the weights). Without
/// VNNI, where int8_dot_7bit, the row takes 14 bits in two 7-bit bytes instead (u = q + 8192
/// = 128 hi + lo, s = max|x| / 8191; c = (1, 128), z = (0, 64 sum_k W[n, k]),
/// activation_bits 7): 2^-14 of the largest magnitude, a few percent of the weights'
/// quantization error.
///
/// torchao's 4-bit weights with a scale per group (IntxWeightOnlyConfig(weight_dtype=int4,
/// granularity=PerGroup(g)), symmetric: Q int8 of values in [-8, 7], zero points 0) at batch
/// 1 become nn.dense_int4 of the same two byte rows (the high one signed), each group's sum of
/// q, the weights as words of eight nibbles q + 8 and the scales [G, N]: an eighth of float32's
/// weight bytes, the groups' exact sums scaled in float32 (g a multiple of 8, at most 512).
///
/// Activations provably below 128 (a quantize to [0, 127]: PT2E's reduce_range, which
/// torchao recommends for CPUs without VNNI) make the dense and conv products
/// activation_bits 7, whose steps run without VNNI as vpmaddubsw and vpmaddwd, exact for
/// such bytes. Without VNNI (int8_dot off) only those are rewritten, where the target's
/// int8_dot_7bit says they beat float32; the others would be no faster, and the 16-bit rows
/// take all 8 bits. For any other form the op is left as it is.
/// `int8_dot`, `int8_dot_7bit`: the target's MachineModel flags (or the config's override,
/// PassEnv); `machine`: the target's model (its vector width and channel blocks).
ir::Function int8_products(const ir::Function& f, bool int8_dot, bool int8_dot_7bit,
                           const MachineModel& machine);

}  // namespace ember::passes
