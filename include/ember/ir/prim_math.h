#pragma once
/// Transcendental functions expanded into Ember's own loop IR (range reduction plus
/// polynomials) so that they vectorize on the CPU and need no libcalls on NVPTX. Each
/// propagates NaN and handles infinities and overflow like the C library; accuracy is a
/// few ulp in float32. Work in the argument's dtype (float32 or float64).
#include "ember/ir/loop.h"

namespace ember::ir {

PrimExpr exp(const PrimExpr& x);
PrimExpr log(const PrimExpr& x);
/// log(1 + x) and exp(x) - 1, accurate for small |x| (where the naive forms cancel).
PrimExpr log1p(const PrimExpr& x);
PrimExpr expm1(const PrimExpr& x);
PrimExpr tanh(const PrimExpr& x);
PrimExpr sigmoid(const PrimExpr& x);
PrimExpr erf(const PrimExpr& x);
PrimExpr sqrt(const PrimExpr& x);   // the Sqrt intrinsic
PrimExpr rsqrt(const PrimExpr& x);  // 1 / sqrt(x), exact division (no approximation)
PrimExpr abs(const PrimExpr& x);
PrimExpr floor(const PrimExpr& x);
PrimExpr ceil(const PrimExpr& x);
/// Rounds half to even, as torch.round does.
PrimExpr round(const PrimExpr& x);
PrimExpr is_nan(const PrimExpr& x);
/// pow(x, y) for float x, y: exp(y * log(x)) with the C-library special cases for x <= 0
/// when y is an integer.
PrimExpr pow(const PrimExpr& x, const PrimExpr& y);

}  // namespace ember::ir
