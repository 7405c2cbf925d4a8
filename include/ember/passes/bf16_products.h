#pragma once
#include "ember/ir/graph.h"
#include "ember/passes/machine_model.h"

namespace ember::passes {

/// BF16Products (opt level 3, CPU targets whose machine model has bf16_dot): a dense of
/// bfloat16 activations by constant bfloat16 weights, as LegalizeBF16 leaves it,
///
///   nn.dense(cast(X, float32), cast(W, float32))      X bfloat16 [..., K], W constant [N, K]
///
/// (and nn.matmul by a constant [K, N] matrix, whose transpose is W) becomes
///
///   nn.dense_bf16(nn.pack_bf16_pairs(X), nn.pack_bf16_pairs(W))
///
/// float32 sums of vdpbf16ps steps (two products per float32 lane per instruction, twice
/// the float32 FMA's), the weight packed once at build time and the activations' words
/// written by their producer's kernel (bfloat16 bytes, not widened floats). The sums are
/// float32 as the float32 dense's, in pairs (vdpbf16ps adds the two products of a word one
/// after the other, like two FMAs, but flushes subnormals to zero). `bf16_dot`: the
/// target's MachineModel::bf16_dot or the config's override (PassEnv).
///
/// Likewise nn.conv2d(cast(X, float32), cast(W, float32)) (groups 1, X bfloat16 [N, C, H, W],
/// W constant [O, C, KH, KW]) becomes
///
///   nn.conv2d_bf16(nn.pack_bf16_pairs(X, axis=1), nn.pack_bf16_pairs(W, axis=1))
///
/// over words of two channels (padding reads zeros; an odd channel count's last word holds
/// a zero), where AlterOpLayout runs it blocked (blocks_word_conv: it then reads X's
/// bfloat16 channel block a word at a time, no packing kernel) or the output rows hold at
/// least one float32 vector (the NCHW form's vectors run along them). Grouped and depthwise
/// convs keep the float32 conv of the widened values. `machine`: the target's model.
ir::Function bf16_products(const ir::Function& f, bool bf16_dot, const MachineModel& machine);

}  // namespace ember::passes
