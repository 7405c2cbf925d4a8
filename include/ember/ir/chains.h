#pragma once
/// Dependency chains in an expression: how many operations a value waits for, one after
/// another. The schedule widens long chains' vectors (chain_lanes), the lowering takes them
/// out of row loops (vectorize_row_invariants) and register tiles (roll_long_epilogues), and
/// the code generator calls their loops in kernels that accumulate; one definition for all.
#include <cstdint>

#include "ember/ir/loop.h"

namespace ember::ir {

/// The operations on the longest dependency path of `e`, index (int64) arithmetic aside (a
/// let's uses wait for its value): 1 for x + y, about 20 for an exp (its range reduction,
/// polynomial and exponent bits). Loads and tensor-expression reads count 0.
int64_t chain_length(const PrimExpr& e);

/// A chain this long (an exp, a tanh, a log) is a long chain.
constexpr int64_t kLongChain = 16;

/// A serial loop directly around a vector loop whose one store is a long chain (an
/// activation over a few rows). In a kernel that accumulates, the code generator runs it
/// rolled in a function of its own (LLVMCodeGen::emit_rolled_call).
bool is_long_chain_loop(const ForNode* loop);

}  // namespace ember::ir
