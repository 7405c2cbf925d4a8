#pragma once
#include "ember/ir/graph.h"

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
ir::Function bf16_products(const ir::Function& f, bool bf16_dot);

}  // namespace ember::passes
