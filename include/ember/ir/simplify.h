#pragma once
/// Integer index arithmetic: canonical simplification and bounds of affine expressions,
/// used by lowering (bound inference for compute_at, guard elimination) and vectorization
/// (stride of an index in the vector lane).
#include <map>
#include <optional>

#include "ember/ir/loop.h"

namespace ember::ir {

/// Simplifies integer index expressions: collects linear terms (a*x + b*x + c), folds
/// constants, and cancels (x*8 + 7) - (x*8). Float expressions are left as they are.
PrimExpr simplify(const PrimExpr& e);
Stmt simplify(const Stmt& s);

/// An affine form sum(coeff[v] * v) + constant over int64 variables.
struct LinearForm {
  std::map<const PrimVarNode*, int64_t> coeff;
  int64_t constant = 0;
};
/// The affine form of `e`, or nullopt when `e` is not affine in its variables.
std::optional<LinearForm> linear_form(const PrimExpr& e);

/// Inclusive integer interval.
struct Interval {
  int64_t min, max;
};
/// Range of each variable; variables not in the map are treated as symbolic constants.
using VarRanges = std::map<const PrimVarNode*, Interval>;
/// Bounds of `e` when the variables in `ranges` take any value in their range:
/// returns (min_expr, extent) where min_expr depends only on variables not in `ranges`
/// and extent is a constant, or nullopt when `e` is not affine in the ranged variables.
std::optional<std::pair<PrimExpr, int64_t>> bound(const PrimExpr& e, const VarRanges& ranges);
/// Constant bounds of `e` when every variable in it is in `ranges` (nullopt otherwise).
std::optional<Interval> const_bound(const PrimExpr& e, const VarRanges& ranges);
/// `index` without the clamps to constants around it (max(y, 0), min(y, h - 1)), as a padded
/// read inlined into a pooling has them. Bound inference on the result gives the rows a
/// window needs: a pooling window always overlaps its input (its type relation keeps the
/// padding below the window), so every clamped value lies among the window's other indices.
PrimExpr unclamped(const PrimExpr& index);

}  // namespace ember::ir
