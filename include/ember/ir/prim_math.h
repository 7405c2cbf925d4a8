#pragma once
/// Transcendental functions expanded into Ember's own loop IR (range reduction plus
/// polynomials) so that they vectorize on the CPU and need no libcalls on NVPTX. Each
/// propagates NaN and handles infinities and overflow like the C library; accuracy is a
/// few ulp in float32. Work in the argument's dtype (float32 or float64).
#include "ember/ir/loop.h"

namespace ember::ir {

/// a * b + c rounded once (an FMA instruction; the code generator never contracts itself).
PrimExpr fma(PrimExpr a, PrimExpr b, PrimExpr c);
PrimExpr exp(const PrimExpr& x);
PrimExpr log(const PrimExpr& x);
/// log(1 + x) and exp(x) - 1, accurate for small |x| (where the naive forms cancel).
PrimExpr log1p(const PrimExpr& x);
PrimExpr expm1(const PrimExpr& x);
PrimExpr tanh(const PrimExpr& x);
PrimExpr sigmoid(const PrimExpr& x);
/// sigmoid through exp_nonpositive: results under 2^-126 (x < -87.3) flush to 0, where
/// sigmoid keeps them as denormals; float32 in about a third of sigmoid's instructions.
PrimExpr sigmoid_flush(const PrimExpr& x);
PrimExpr erf(const PrimExpr& x);
/// exp(x) for x <= 0 (or NaN, which it keeps) in about 15 vector instructions where exp
/// takes 45: results below 2^-126 flush to 0 and exp(-inf) is exactly 0; x > 0 only slightly
/// (the exponent of a row's maximum). Float32; other types take exp. A softmax's e^(s - max).
PrimExpr exp_nonpositive(const PrimExpr& x);
/// 2^x for x <= 0 (or NaN) the same way, in three fewer FMAs (the caller's scores already
/// in base 2 save exp's multiply by log2 e); relative error about 1e-7.
PrimExpr exp2_nonpositive(const PrimExpr& x);
/// The standard normal CDF, P(N(0, 1) <= x) = erfc(-x / sqrt 2) / 2, float32 only: one
/// branch and one exp_nonpositive, with relative accuracy ~2e-7 for negative x too (where
/// 1 + erf(x / sqrt 2) cancels). GELU's factor; values below 2^-126 flush to 0.
PrimExpr normal_cdf(const PrimExpr& x);
PrimExpr sqrt(const PrimExpr& x);   // the Sqrt intrinsic
PrimExpr rsqrt(const PrimExpr& x);  // 1 / sqrt(x), exact division (no approximation)
PrimExpr abs(const PrimExpr& x);
PrimExpr floor(const PrimExpr& x);
PrimExpr ceil(const PrimExpr& x);
/// Rounds half to even, as torch.round does.
PrimExpr round(const PrimExpr& x);
PrimExpr is_nan(const PrimExpr& x);
/// +-inf (is_inf) and neither inf nor NaN (is_finite): bool results.
PrimExpr is_inf(const PrimExpr& x);
PrimExpr is_finite(const PrimExpr& x);
/// Rounds toward zero, keeping -0 (trunc(-0.5) is -0).
PrimExpr trunc(const PrimExpr& x);
/// As torch.sign: (x > 0) - (x < 0), so +-0 and NaN give +0.
PrimExpr sign(const PrimExpr& x);
/// 2^x, log2(x), log10(x): float32 arguments are computed in float64 and rounded once;
/// log2 of an exact power of two is exact.
PrimExpr exp2(const PrimExpr& x);
PrimExpr log2(const PrimExpr& x);
PrimExpr log10(const PrimExpr& x);
/// 1 - erf(x) with full relative accuracy where it is tiny (x up to 27, where it underflows
/// in float64); float32 computed in float64; float64 ~3e-13 relative.
PrimExpr erfc(const PrimExpr& x);
/// C's fmod (exact; the result has x's sign) and torch.remainder (the result has y's
/// sign). float32 only: the exact reduction runs in float64.
PrimExpr fmod(const PrimExpr& x, const PrimExpr& y);
PrimExpr remainder(const PrimExpr& x, const PrimExpr& y);
/// Trigonometric functions. sin, cos and tan take float32 only: the argument is reduced
/// exactly in float64 by 2/pi to 216 bits, so huge arguments (1e30) are right too. The
/// others take float32 (computed in float64, rounded once) and float64 (a few ulp).
PrimExpr sin(const PrimExpr& x);
PrimExpr cos(const PrimExpr& x);
PrimExpr tan(const PrimExpr& x);
PrimExpr asin(const PrimExpr& x);
PrimExpr acos(const PrimExpr& x);
PrimExpr atan(const PrimExpr& x);
/// atan2(y, x) with the C library's special cases for zeros and infinities.
PrimExpr atan2(const PrimExpr& y, const PrimExpr& x);
PrimExpr sinh(const PrimExpr& x);
PrimExpr cosh(const PrimExpr& x);
PrimExpr asinh(const PrimExpr& x);
PrimExpr acosh(const PrimExpr& x);
PrimExpr atanh(const PrimExpr& x);
/// pow(x, y) for float x, y: exp(y * log(x)) with the C-library special cases for x <= 0
/// when y is an integer.
PrimExpr pow(const PrimExpr& x, const PrimExpr& y);

}  // namespace ember::ir
