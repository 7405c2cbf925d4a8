#pragma once
#include "ember/ir/graph.h"

namespace ember::passes {

/// LegalizeBF16 (opt level 0, first): bfloat16 is a storage type. Every op that computes
/// on a bfloat16 input (arithmetic, activations, reductions, norms, dense, conv, ...) gets
/// its bfloat16 inputs cast to float32, computes in float32 (sums accumulate in float32),
/// and its float32 results that were bfloat16 cast back, rounded to nearest even:
///
///   %y = gelu(%x : bfloat16[...])   becomes   cast(gelu(cast(%x, float32)), bfloat16)
///
/// which is how PyTorch computes a bfloat16 op on the CPU (one rounding per op). FuseOps
/// then puts the casts into the kernels around them: tensors between kernels stay
/// bfloat16. Ops that only move elements (reshape, transpose, concatenate, slices, take,
/// gather, ...), cast and nn.pack_bf16_pairs keep their bfloat16 operands.
ir::Function legalize_bf16(const ir::Function& f);

}  // namespace ember::passes
