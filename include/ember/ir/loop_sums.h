#pragma once
/// Accumulations in loop IR, as the CPU code generator emits them and the FuseOps cost model
/// prices them: one definition for both, so the estimate follows the code.
#include <cstdint>
#include <set>

#include "ember/ir/loop.h"

namespace ember::ir {

/// How a store updates its own element: `b[i] = b[i] + x` (Add), `fma(p, q, b[i])` (Fma),
/// `max(b[i], x)` or `min(b[i], x)` (Max, Min: exact in any order), or none: a float
/// reduction's update, which may be reassociated.
enum class Accumulation { None, Add, Fma, Max, Min };
Accumulation accumulation_of(const StoreNode* st);

/// A loop whose whole body accumulates into one element that does not move with the loop (a
/// row sum, a layer norm's variance, a row max) over a constant trip count of at least 8. LLVM
/// would unroll it fully before its loop vectorizer runs and then leave the chain scalar (a 16-wide
/// layer norm summed in 16 dependent adds); the code generator keeps it rolled, so the
/// vectorizer widens it, a long one into rolled_sum_interleave's accumulators.
bool is_rolled_scalar_sum(const ForNode* loop);

/// The most vector accumulators a rolled sum gets (its llvm.loop.interleave.count).
constexpr int kMaxSumAccumulators = 4;

/// Independent vector accumulators of such a loop of `extent` over vectors of `lanes`: four
/// (kMaxSumAccumulators) where each runs at least two vectors, else two, else one. (unroll.disable
/// also stops the vectorizer's interleaving, which left a layer norm's statistics of 768 values as
/// one chain of 48 dependent vector adds per row; the code generator names this count instead.)
int rolled_sum_interleave(int64_t extent, int64_t lanes);

/// The local buffers of `body` that never hold NaN: every value stored into one is never
/// NaN, given the others (a row max that starts at -inf and takes the max with values whose
/// NaNs were replaced). A max or min of two never-NaN values needs no NaN propagation: the
/// code generator emits it as one vmaxps, its horizontal steps too.
std::set<const BufferNode*> nan_free_buffers(const Stmt& body);

/// Is `e` never NaN, where loads of `nan_free` buffers are never NaN? Constants other than
/// NaN, integers, casts from integers, max and min of such, and select(isnan(x), c, x) with
/// c never NaN.
bool never_nan(const PrimExpr& e, const std::set<const BufferNode*>& nan_free);

}  // namespace ember::ir
