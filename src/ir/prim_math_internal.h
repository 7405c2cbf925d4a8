#pragma once
// Helpers shared by the prim_math*.cc files (not a public header): constants in an
// expression's dtype, let-binding, polynomials, and the bit layout of IEEE floats.
#include <limits>
#include <string>
#include <vector>

#include "ember/ir/loop.h"
#include "ember/support/error.h"

namespace ember::ir::prim_math_detail {

// Bit layout of an IEEE binary float type.
struct FloatBits {
  DType int_type;
  int mantissa_bits;
  int bias;
};

inline FloatBits float_bits(DType t) {
  EMBER_CHECK(is_float(t), "prim_math needs a float argument, got ", dtype_name(t));
  if (t == DType::Float32) return {DType::Int32, 23, 127};
  return {DType::Int64, 52, 1023};
}

inline bool is_f64(const PrimExpr& x) { return x.dtype() == DType::Float64; }

inline PrimExpr cst(const PrimExpr& like, double v) { return make_const(like.dtype(), v); }

inline PrimExpr nan_like(const PrimExpr& x) {
  return cst(x, std::numeric_limits<double>::quiet_NaN());
}
inline PrimExpr inf_like(const PrimExpr& x) {
  return cst(x, std::numeric_limits<double>::infinity());
}

// Binds `value` to a fresh variable so that `body` may use it many times while it is
// computed once.
template <class F>
PrimExpr bind(const std::string& name, const PrimExpr& value, F body) {
  if (value.as<PrimVarNode>() || value.as<FloatImmNode>() || value.as<IntImmNode>())
    return body(value);
  PrimVar v(name, value.dtype());
  return let(v, value, body(v));
}

// c[0] + z * (c[1] + z * (c[2] + ...)), in z's dtype.
inline PrimExpr horner(const std::vector<double>& c, const PrimExpr& z) {
  PrimExpr acc = cst(z, c.back());
  for (size_t i = c.size() - 1; i-- > 0;) acc = acc * z + cst(z, c[i]);
  return acc;
}

// horner with each step one FMA (for functions whose accuracy budget allows the rounding
// differences; `horner` keeps separate multiplies and adds).
inline PrimExpr horner_fma(const std::vector<double>& c, const PrimExpr& z) {
  PrimExpr acc = cst(z, c.back());
  for (size_t i = c.size() - 1; i-- > 0;) acc = fma(acc, z, cst(z, c[i]));
  return acc;
}

// 2^k for an integer-typed k whose biased exponent k + bias is a normal exponent.
inline PrimExpr exp2_int(const PrimExpr& k, DType float_type) {
  FloatBits fb = float_bits(float_type);
  PrimExpr biased = k + make_const(fb.int_type, fb.bias);
  return reinterpret(float_type,
                     binary(BinaryOp::Shl, biased, make_const(fb.int_type, fb.mantissa_bits)));
}

// True where x's sign bit is set (so for -0 and negative NaNs too).
inline PrimExpr sign_bit(const PrimExpr& x) {
  DType it = float_bits(x.dtype()).int_type;
  return reinterpret(it, x) < make_const(it, 0);
}

// |mag| with the sign of `sign` (mag >= 0 or NaN).
inline PrimExpr copy_sign(const PrimExpr& mag, const PrimExpr& sign) {
  return select(sign_bit(sign), -mag, mag);
}

// fn evaluated in float64 and rounded once to x's dtype: a float32 function computed this
// way is within about half an ulp, and needs no float32-specific polynomial.
template <class F>
PrimExpr in_f64(const PrimExpr& x, F fn) {
  if (is_f64(x)) return fn(x);
  return cast(x.dtype(), fn(cast(DType::Float64, x)));
}

}  // namespace ember::ir::prim_math_detail
