// Trigonometric, inverse trigonometric and hyperbolic functions as loop-IR expressions, in
// the style of prim_math.cc (no libm calls: they vectorize and lower to NVPTX unchanged).
//
// float32 arguments are computed in float64 and rounded once (in_f64), so their results
// are within about half an ulp without float32-specific fits. sin, cos and tan reduce the
// argument by pi/2 exactly: x * 2/pi is summed from exact products of x with 24-bit chunks
// of 2/pi (216 bits in all), so 1e30 reduces as correctly as 1.0 (the Payne-Hanek idea,
// without a table lookup). The inverse functions reduce to atan, whose Taylor series runs
// on |t| <= tan(pi/12); the hyperbolic ones use exp, expm1, log and log1p.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ember/ir/prim_math.h"
#include "ember/support/error.h"
#include "prim_math_internal.h"

namespace ember::ir {
namespace {

using namespace prim_math_detail;

constexpr double kPi = 3.141592653589793;
constexpr double kHalfPi = 1.5707963267948966;

// 2/pi in 24-bit chunks: 2/pi = sum_i kTwoOverPi[i] * 2^(-24 (i + 1)). Computed with exact
// integer arithmetic (pi by Machin's formula to 420 bits).
const std::vector<double> kTwoOverPi = {0xa2f983, 0x6e4e44, 0x1529fc, 0x2757d1, 0xf534dd,
                                        0xc0db62, 0x95993c, 0x439041, 0xfe5163};

// The reduction of a float64 holding a float32 value: x * 2/pi = quadrant + fraction, the
// fraction in [-1/2, 1/2] (in quarter turns). Each product x * chunk has at most 48
// significant bits, so it is exact, and so is its remainder modulo 4 (in [-2, 2]). The
// remainders are summed with the rounding errors kept (Knuth's two-sum), taking the nearest
// integer out after each, so the fraction keeps ~100 bits wherever it cancels.
struct Reduced {
  PrimExpr quadrant;  // an integer-valued float64; only its value modulo 4 matters
  PrimExpr fraction;
};

using ReducedFn = std::function<PrimExpr(const Reduced&)>;

// Step i of the reduction, with the running sum hi + lo (|hi| <= 1/2) and quadrant.
PrimExpr reduce_step(const PrimExpr& x, size_t i, const PrimExpr& hi, const PrimExpr& lo,
                     const PrimExpr& quadrant, const ReducedFn& body) {
  if (i == kTwoOverPi.size()) return body(Reduced{quadrant, hi + lo});
  PrimExpr chunk = cst(x, std::ldexp(kTwoOverPi[i], -24 * static_cast<int>(i + 1)));
  std::string n = std::to_string(i);
  return prim_math_detail::bind("trig_p" + n, x * chunk, [&](const PrimExpr& p) {
    PrimExpr q = p - round(p * cst(p, 0.25)) * cst(p, 4.0);
    return prim_math_detail::bind("trig_q" + n, q, [&](const PrimExpr& qv) {
      return prim_math_detail::bind("trig_s" + n, hi + qv, [&](const PrimExpr& s) {
        return prim_math_detail::bind("trig_b" + n, s - hi, [&](const PrimExpr& b) {
          PrimExpr err = (hi - (s - b)) + (qv - b);
          return prim_math_detail::bind("trig_k" + n, round(s), [&](const PrimExpr& k) {
            return prim_math_detail::bind("trig_hi" + n, s - k, [&](const PrimExpr& hi2) {
              return prim_math_detail::bind("trig_lo" + n, lo + err, [&](const PrimExpr& lo2) {
                return reduce_step(x, i + 1, hi2, lo2, quadrant + k, body);
              });
            });
          });
        });
      });
    });
  });
}

PrimExpr reduce_quarter_turns(const PrimExpr& x, const ReducedFn& body) {
  return reduce_step(x, 0, cst(x, 0.0), cst(x, 0.0), cst(x, 0.0), body);
}

// Taylor series of sin and cos on |t| <= pi/4 + a little: terms to t^13 and t^14 leave
// < 3e-14 relative.
std::vector<double> sin_coeffs() {  // sin t = t * S(t^2)
  std::vector<double> c{1.0};
  for (int k = 1; k <= 6; ++k) c.push_back(-c.back() / ((2 * k) * (2 * k + 1)));
  return c;
}
std::vector<double> cos_coeffs() {  // cos t = C(t^2)
  std::vector<double> c{1.0};
  for (int k = 1; k <= 7; ++k) c.push_back(-c.back() / ((2 * k - 1) * (2 * k)));
  return c;
}

// What to return from the reduced angle: sin and cos of t = fraction * pi/2 and the
// quadrant modulo 4 (an int64 in 0..3).
using QuadrantFn =
    std::function<PrimExpr(const PrimExpr& s, const PrimExpr& c, const PrimExpr& quadrant)>;

PrimExpr trig(const PrimExpr& x, const char* name, const QuadrantFn& pick) {
  EMBER_CHECK(x.dtype() == DType::Float32, name, " is implemented for float32 only, got ",
              dtype_name(x.dtype()));
  return prim_math_detail::bind("trig_x", cast(DType::Float64, x), [&](const PrimExpr& xd) {
    PrimExpr out = reduce_quarter_turns(xd, [&](const Reduced& r) {
      return prim_math_detail::bind(
          "trig_t", r.fraction * cst(xd, kHalfPi), [&](const PrimExpr& t) {
            return prim_math_detail::bind("trig_t2", t * t, [&](const PrimExpr& t2) {
              return prim_math_detail::bind(
                  "trig_sin", t * horner(sin_coeffs(), t2), [&](const PrimExpr& s) {
                    return prim_math_detail::bind(
                        "trig_cos", horner(cos_coeffs(), t2), [&](const PrimExpr& c) {
                          // NaN and inf reduce to NaN; the int cast of a NaN quadrant saturates to
                          // 0.
                          PrimExpr quadrant =
                              binary(BinaryOp::BitAnd, cast(DType::Int64, r.quadrant),
                                     make_const(DType::Int64, 3));
                          return prim_math_detail::bind(
                              "trig_quadrant", quadrant,
                              [&](const PrimExpr& qd) { return pick(s, c, qd); });
                        });
                  });
            });
          });
    });
    return cast(DType::Float32, out);
  });
}

PrimExpr quadrant_is(const PrimExpr& q, int value) { return q == make_const(DType::Int64, value); }

// atan on float64 (any argument): |x| > 1 uses pi/2 - atan(1/|x|); above tan(pi/12),
// atan(z) = pi/6 + atan((z sqrt3 - 1) / (z + sqrt3)); then t - t^3/3 + t^5/5 - ... to t^33
// (|t| <= 0.268: the next term is < 1e-19 relative). The sign is copied from x, so -0 stays.
PrimExpr atan_f64(const PrimExpr& x) {
  std::vector<double> series;
  for (int k = 0; k <= 16; ++k) series.push_back((k % 2 ? -1.0 : 1.0) / (2 * k + 1));
  return prim_math_detail::bind("atan_x", x, [&](const PrimExpr& xv) {
    return prim_math_detail::bind("atan_a", abs(xv), [&](const PrimExpr& a) {
      PrimExpr inv = a > cst(a, 1.0);
      return prim_math_detail::bind(
          "atan_z", select(inv, cst(a, 1.0) / a, a), [&](const PrimExpr& z) {
            PrimExpr shift = z > cst(z, 0.2679491924311227);
            PrimExpr sqrt3 = cst(z, 1.7320508075688772);
            PrimExpr moved = (z * sqrt3 - cst(z, 1.0)) / (z + sqrt3);
            return prim_math_detail::bind(
                "atan_t", select(shift, moved, z), [&](const PrimExpr& t) {
                  PrimExpr base = select(shift, cst(t, kPi / 6), cst(t, 0.0));
                  PrimExpr r = base + t * horner(series, t * t);
                  PrimExpr full = select(inv, cst(t, kHalfPi) - r, r);
                  return copy_sign(full, xv);
                });
          });
    });
  });
}

// atan2 on float64: atan(min/max) of |y| and |x| in [0, pi/4], moved to its octant, then
// the C library's special cases: both zero gives 0 or pi by x's sign bit, both infinite
// gives pi/4 or 3pi/4; y's sign is copied last.
PrimExpr atan2_f64(const PrimExpr& y, const PrimExpr& x) {
  return prim_math_detail::bind("atan2_ay", abs(y), [&](const PrimExpr& ay) {
    return prim_math_detail::bind("atan2_ax", abs(x), [&](const PrimExpr& ax) {
      PrimExpr steep = ay > ax;
      PrimExpr lo = select(steep, ax, ay), hi = select(steep, ay, ax);
      PrimExpr both_zero = hi == cst(hi, 0.0);
      PrimExpr both_inf = logical_and(ax == inf_like(ax), ay == inf_like(ay));
      PrimExpr ratio = select(both_inf, cst(ax, 1.0), select(both_zero, cst(ax, 0.0), lo / hi));
      return prim_math_detail::bind("atan2_q", atan_f64(ratio), [&](const PrimExpr& q) {
        PrimExpr angle = select(steep, cst(q, kHalfPi) - q, q);
        angle = select(sign_bit(x), cst(q, kPi) - angle, angle);
        PrimExpr res = copy_sign(angle, y);
        return select(logical_or(is_nan(x), is_nan(y)), x + y, res);
      });
    });
  });
}

// sinh |x| = (E + E / (E + 1)) / 2 with E = expm1|x| (no cancellation for small x) below
// 20, and e^|x| / 2 = (e^(|x|/2) / 2) e^(|x|/2) above, which stays finite up to the
// largest float64 result.
PrimExpr sinh_f64(const PrimExpr& x) {
  return prim_math_detail::bind("sinh_a", abs(x), [&](const PrimExpr& a) {
    PrimExpr small = prim_math_detail::bind(
        "sinh_e", expm1(min(a, cst(a, 20.0))),
        [](const PrimExpr& e) { return cst(e, 0.5) * (e + e / (e + cst(e, 1.0))); });
    PrimExpr big = prim_math_detail::bind("sinh_h", exp(a * cst(a, 0.5)),
                                          [](const PrimExpr& h) { return (cst(h, 0.5) * h) * h; });
    PrimExpr res = select(a < cst(a, 20.0), small, big);
    return select(is_nan(x), x, copy_sign(res, x));
  });
}

PrimExpr cosh_f64(const PrimExpr& x) {
  return prim_math_detail::bind("cosh_a", abs(x), [&](const PrimExpr& a) {
    PrimExpr small = prim_math_detail::bind(
        "cosh_e", exp(min(a, cst(a, 20.0))),
        [](const PrimExpr& e) { return cst(e, 0.5) * (e + cst(e, 1.0) / e); });
    PrimExpr big = prim_math_detail::bind("cosh_h", exp(a * cst(a, 0.5)),
                                          [](const PrimExpr& h) { return (cst(h, 0.5) * h) * h; });
    return select(a < cst(a, 20.0), small, big);  // NaN passes through either branch
  });
}

// asinh |x| = log1p(a + a^2 / (1 + sqrt(1 + a^2))); above 2^28, log(a) + ln 2 (a^2 would
// overflow, and the dropped 1/(4a^2) is below float64's precision).
PrimExpr asinh_f64(const PrimExpr& x) {
  return prim_math_detail::bind("asinh_a", abs(x), [&](const PrimExpr& a) {
    PrimExpr big = log(a) + cst(a, 0.6931471805599453);
    PrimExpr a2 = a * a;
    PrimExpr small = log1p(a + a2 / (cst(a, 1.0) + sqrt(cst(a, 1.0) + a2)));
    PrimExpr res = select(a > cst(a, 268435456.0), big, small);
    return select(is_nan(x), x, copy_sign(res, x));
  });
}

// acosh x = log1p(t + sqrt(2t + t^2)), t = x - 1 (exact near 1); above 2^28 log(x) + ln 2.
// x < 1 gives NaN (the sqrt alone would miss very negative x, where t^2 dominates).
PrimExpr acosh_f64(const PrimExpr& x) {
  return prim_math_detail::bind("acosh_t", x - cst(x, 1.0), [&](const PrimExpr& t) {
    PrimExpr small = log1p(t + sqrt(t * cst(t, 2.0) + t * t));
    PrimExpr big = log(x) + cst(x, 0.6931471805599453);
    PrimExpr res = select(x > cst(x, 268435456.0), big, small);
    return select(x < cst(x, 1.0), nan_like(x), res);
  });
}

// atanh x = log1p(2a / (1 - a)) / 2 with x's sign: 1 gives inf, |x| > 1 NaN.
PrimExpr atanh_f64(const PrimExpr& x) {
  return prim_math_detail::bind("atanh_a", abs(x), [&](const PrimExpr& a) {
    PrimExpr res = cst(a, 0.5) * log1p(cst(a, 2.0) * a / (cst(a, 1.0) - a));
    return select(is_nan(x), x, copy_sign(res, x));
  });
}

}  // namespace

PrimExpr sin(const PrimExpr& x) {
  return prim_math_detail::bind("sin_x", x, [](const PrimExpr& xv) {
    PrimExpr r = trig(xv, "sin", [](const PrimExpr& s, const PrimExpr& c, const PrimExpr& q) {
      return select(quadrant_is(q, 0), s,
                    select(quadrant_is(q, 1), c, select(quadrant_is(q, 2), -s, -c)));
    });
    return select(xv == cst(xv, 0.0), xv, r);  // the reduction loses -0
  });
}

PrimExpr cos(const PrimExpr& x) {
  return trig(x, "cos", [](const PrimExpr& s, const PrimExpr& c, const PrimExpr& q) {
    return select(quadrant_is(q, 0), c,
                  select(quadrant_is(q, 1), -s, select(quadrant_is(q, 2), -c, s)));
  });
}

PrimExpr tan(const PrimExpr& x) {
  return prim_math_detail::bind("tan_x", x, [](const PrimExpr& xv) {
    PrimExpr r = trig(xv, "tan", [](const PrimExpr& s, const PrimExpr& c, const PrimExpr& q) {
      PrimExpr odd =
          binary(BinaryOp::BitAnd, q, make_const(DType::Int64, 1)) == make_const(DType::Int64, 1);
      return select(odd, -c / s, s / c);
    });
    return select(xv == cst(xv, 0.0), xv, r);
  });
}

PrimExpr atan(const PrimExpr& x) { return in_f64(x, atan_f64); }

// asin x = atan(x / sqrt((1 - x)(1 + x))): +-1 gives +-pi/2 through atan(+-inf), |x| > 1
// NaN through the sqrt; the factored form keeps accuracy near +-1.
PrimExpr asin(const PrimExpr& x) {
  return in_f64(x, [](const PrimExpr& v) {
    return atan_f64(v / sqrt((cst(v, 1.0) - v) * (cst(v, 1.0) + v)));
  });
}

// acos x = 2 atan(sqrt((1 - x) / (1 + x))): 1 gives 0, -1 gives pi (atan of inf).
PrimExpr acos(const PrimExpr& x) {
  return in_f64(x, [](const PrimExpr& v) {
    return cst(v, 2.0) * atan_f64(sqrt((cst(v, 1.0) - v) / (cst(v, 1.0) + v)));
  });
}

PrimExpr atan2(const PrimExpr& y, const PrimExpr& x) {
  EMBER_CHECK(y.dtype() == x.dtype(), "atan2 operands differ: ", dtype_name(y.dtype()), " vs ",
              dtype_name(x.dtype()));
  if (is_f64(x)) return atan2_f64(y, x);
  return cast(x.dtype(), atan2_f64(cast(DType::Float64, y), cast(DType::Float64, x)));
}

PrimExpr sinh(const PrimExpr& x) { return in_f64(x, sinh_f64); }
PrimExpr cosh(const PrimExpr& x) { return in_f64(x, cosh_f64); }
PrimExpr asinh(const PrimExpr& x) { return in_f64(x, asinh_f64); }
PrimExpr acosh(const PrimExpr& x) { return in_f64(x, acosh_f64); }
PrimExpr atanh(const PrimExpr& x) { return in_f64(x, atanh_f64); }

}  // namespace ember::ir
