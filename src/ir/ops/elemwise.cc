// Elementwise ops: broadcasting binary arithmetic (integer floor and trunc division, bit
// ops and shifts included), comparisons and logic, where, unary math, activations (relu,
// leaky_relu, gelu, silu, log_sigmoid, hardswish, hardsigmoid) and cast. Numerics follow PyTorch;
// float Max/Min propagate NaN (loop.h), so relu, clip, maximum and the hard activations pass NaN
// through like torch.
#include <cmath>
#include <string>
#include <vector>

#include "ember/ir/prim_math.h"
#include "ember/support/error.h"
#include "op_util.h"

namespace ember::ir {
namespace {

using namespace ops;

// Which input dtypes an op accepts, and what to tell the user otherwise.
// Float32: ops whose exact algorithm is float32's (sin, cos, tan); Float32OrInt: float32's
// or integers' (fmod, remainder); Int: integer division and shifts; IntOrBool: bit ops.
enum class Accept { Any, NotBool, Float, Float32, Float32OrInt, Int, IntOrBool };

void check_accept(Accept accept, const TensorType& t, const std::string& what,
                  const TypeContext& ctx) {
  if (accept == Accept::Float) check_float(t, what, ctx);
  // bfloat16 passes: LegalizeBF16 computes it in float32.
  const bool f32 = t.dtype == DType::Float32 || t.dtype == DType::BFloat16;
  if (accept == Accept::Float32 && !f32)
    ctx.fail(what + " is " + to_string(t) + " but the op is implemented for float32 only; " +
             "cast it to float32");
  if (accept == Accept::Float32OrInt && !f32 && !is_int(t.dtype))
    ctx.fail(what + " is " + to_string(t) + " but the op is implemented for float32 and " +
             "integer tensors only; cast it to float32");
  if (accept == Accept::Int && !is_int(t.dtype))
    ctx.fail(what + " is " + to_string(t) + " but the op is implemented for integer tensors " +
             "only (int8, uint8, int32, int64); cast it to int64" +
             (is_float(t.dtype) ? " or use the float form of the op" : ""));
  if (accept == Accept::IntOrBool && !is_int(t.dtype) && t.dtype != DType::Bool)
    ctx.fail(what + " is " + to_string(t) + " but the op takes integer and bool tensors " +
             "only; cast it to int64");
  if (accept == Accept::NotBool && t.dtype == DType::Bool)
    ctx.fail(what + " is " + to_string(t) + "; the op does not take bool tensors, cast it to " +
             "float32 or int32");
}

// ---------------------------------------------------------------- binary (Broadcast)

// The result dtype of a binary op: the inputs' or bool (comparisons).
enum class Result { Same, Bool };

Type binary_rel(const std::vector<Type>& args, Accept accept, Result result,
                const TypeContext& ctx) {
  check_arity(args, 2, ctx);
  const TensorType& a = tensor_arg(args, 0, "the first input", ctx);
  const TensorType& b = tensor_arg(args, 1, "the second input", ctx);
  if (a.dtype != b.dtype)
    ctx.fail("input dtypes differ: " + to_string(a) + " vs " + to_string(b) +
             "; cast one input so that both have the same dtype");
  check_accept(accept, a, "the first input", ctx);
  return TensorType{broadcast_shapes(a.shape, b.shape, ctx),
                    result == Result::Bool ? DType::Bool : a.dtype};
}

using BinaryFn = std::function<PrimExpr(const PrimExpr& a, const PrimExpr& b)>;

const Op* register_binary(const std::string& name, Accept accept, Result result, BinaryFn fn,
                          ConstantCheck check = nullptr) {
  TypeRelation rel = [accept, result](const std::vector<Type>& args, Attrs&,
                                      const TypeContext& ctx) {
    return binary_rel(args, accept, result, ctx);
  };
  ComputeRule rule = [fn, name](const std::vector<Tensor>& in, const Attrs&,
                                const TensorType& out) {
    const Tensor &a = in[0], &b = in[1];
    return compute(name, out.shape, [&](const std::vector<PrimVar>& i) {
      return fn(a(broadcast_index(a, i)), b(broadcast_index(b, i)));
    });
  };
  return register_op({name, 2, OpPattern::Broadcast, rel, rule, false, std::move(check)});
}

BinaryFn binary_fn(BinaryOp op) {
  return [op](const PrimExpr& a, const PrimExpr& b) { return binary(op, a, b); };
}

[[maybe_unused]] const Op* kAdd =
    register_binary("add", Accept::NotBool, Result::Same, binary_fn(BinaryOp::Add));
[[maybe_unused]] const Op* kSubtract =
    register_binary("subtract", Accept::NotBool, Result::Same, binary_fn(BinaryOp::Sub));
[[maybe_unused]] const Op* kMultiply =
    register_binary("multiply", Accept::NotBool, Result::Same, binary_fn(BinaryOp::Mul));
// On integers `divide` would have to choose between torch's true and floor division: the
// integer quotients are floor_divide and trunc_divide below.
[[maybe_unused]] const Op* kDivide =
    register_binary("divide", Accept::Float, Result::Same, binary_fn(BinaryOp::Div));
[[maybe_unused]] const Op* kPower =
    register_binary("power", Accept::Float, Result::Same,
                    [](const PrimExpr& a, const PrimExpr& b) { return pow(a, b); });
[[maybe_unused]] const Op* kMaximum =
    register_binary("maximum", Accept::Any, Result::Same, binary_fn(BinaryOp::Max));
[[maybe_unused]] const Op* kMinimum =
    register_binary("minimum", Accept::Any, Result::Same, binary_fn(BinaryOp::Min));
[[maybe_unused]] const Op* kAtan2 =
    register_binary("atan2", Accept::Float, Result::Same,
                    [](const PrimExpr& y, const PrimExpr& x) { return atan2(y, x); });

// ---------------------------------------------------------------- integer division

// Integer division and remainder (index arithmetic: Swin's window indices, x // n). An
// integer division by zero has no value (torch raises): a constant divisor is checked when
// the node is made, and the frontend takes no other; in the kernel (a hand-built graph's
// input) a zero divisor gives 0. x86's idiv traps on a zero divisor and on INT_MIN / -1, so
// the kernel never divides by either: -1 is computed as negation (INT_MIN / -1 wraps to
// INT_MIN, as two's complement arithmetic does; the remainder is 0).
void integer_divisor_has_no_zero(const std::vector<Expr>& args, const Attrs&,
                                 const TypeContext& ctx) {
  auto* c = as<ConstantNode>(args[1]);
  if (!is_int(args[0]->type.tensor().dtype) || !c ||
      c->value.device().type != runtime::DeviceType::CPU)
    return;
  const runtime::NDArray& v = c->value;
  for (int64_t i = 0; i < v.numel(); ++i)
    if (v.element(i) == 0)
      ctx.fail("the constant divisor is 0 at element " + std::to_string(i) +
               ": an integer division, fmod or remainder by zero has no value (torch raises "
               "too)");
}

// Floor: the floor quotient (Python's //); Trunc: rounded toward zero (C's /); FloorMod:
// torch.remainder (the sign of b); TruncMod: fmod (the sign of a).
enum class IntDiv { Floor, Trunc, FloorMod, TruncMod };

PrimExpr integer_divide(const PrimExpr& a, const PrimExpr& b, IntDiv kind) {
  PrimExpr zero = make_const(a.dtype(), 0), one = make_const(a.dtype(), 1);
  if (is_unsigned(a.dtype())) {  // no signs: floor and trunc agree, and no INT_MIN / -1
    PrimExpr safe = select(b == zero, one, b);
    const bool quotient = kind == IntDiv::Floor || kind == IntDiv::Trunc;
    return select(b == zero, zero, quotient ? a / safe : a % safe);
  }
  PrimExpr minus_one = make_const(a.dtype(), -1);
  PrimExpr safe = select(logical_or(b == zero, b == minus_one), one, b);
  // Loop-IR Div and Mod on integers are floor division and floor modulo.
  PrimExpr m = a % safe;
  PrimExpr signs_differ = logical_and(m != zero, (a < zero) != (safe < zero));
  const bool quotient = kind == IntDiv::Floor || kind == IntDiv::Trunc;
  PrimExpr value;
  switch (kind) {
    case IntDiv::Floor:
      value = a / safe;
      break;
    case IntDiv::Trunc:
      value = select(signs_differ, a / safe + one, a / safe);
      break;
    case IntDiv::FloorMod:
      value = m;
      break;
    case IntDiv::TruncMod:
      value = select(signs_differ, m - safe, m);
      break;
  }
  return select(b == zero, zero, select(b == minus_one, quotient ? -a : zero, value));
}

BinaryFn integer_fn(IntDiv kind) {
  return [kind](const PrimExpr& a, const PrimExpr& b) { return integer_divide(a, b, kind); };
}

[[maybe_unused]] const Op* kFloorDivide =
    register_binary("floor_divide", Accept::Int, Result::Same, integer_fn(IntDiv::Floor),
                    integer_divisor_has_no_zero);
[[maybe_unused]] const Op* kTruncDivide =
    register_binary("trunc_divide", Accept::Int, Result::Same, integer_fn(IntDiv::Trunc),
                    integer_divisor_has_no_zero);
// C's fmod (the sign of x) and torch.remainder (the sign of y), both exact.
[[maybe_unused]] const Op* kFmod = register_binary(
    "fmod", Accept::Float32OrInt, Result::Same,
    [](const PrimExpr& a, const PrimExpr& b) {
      return is_int(a.dtype()) ? integer_divide(a, b, IntDiv::TruncMod) : fmod(a, b);
    },
    integer_divisor_has_no_zero);
[[maybe_unused]] const Op* kRemainder = register_binary(
    "remainder", Accept::Float32OrInt, Result::Same,
    [](const PrimExpr& a, const PrimExpr& b) {
      return is_int(a.dtype()) ? integer_divide(a, b, IntDiv::FloorMod) : remainder(a, b);
    },
    integer_divisor_has_no_zero);

// ---------------------------------------------------------------- bit ops and shifts

// On bool tensors and/or/xor are the logical ops (BitAnd/BitOr/BitXor of i1 values).
[[maybe_unused]] const Op* kBitwiseAnd =
    register_binary("bitwise_and", Accept::IntOrBool, Result::Same, binary_fn(BinaryOp::BitAnd));
[[maybe_unused]] const Op* kBitwiseOr =
    register_binary("bitwise_or", Accept::IntOrBool, Result::Same, binary_fn(BinaryOp::BitOr));
[[maybe_unused]] const Op* kBitwiseXor =
    register_binary("bitwise_xor", Accept::IntOrBool, Result::Same, binary_fn(BinaryOp::BitXor));

// torch's shifts define every amount (LLVM's are poison from the bit width on): an amount
// outside [0, bits) shifts every bit out, so a left shift gives 0 and an (arithmetic) right
// shift the sign, a >> (bits - 1): 0 or -1 (uint8's logical right shift: 0).
PrimExpr shift(const PrimExpr& a, const PrimExpr& b, bool left) {
  PrimExpr last = make_const(b.dtype(), 8 * dtype_bytes(a.dtype()) - 1);
  PrimExpr in_range = logical_and(b >= make_const(b.dtype(), 0), b <= last);
  if (!left && !is_unsigned(a.dtype())) return binary(BinaryOp::Shr, a, select(in_range, b, last));
  PrimExpr amount = select(in_range, b, make_const(b.dtype(), 0));
  PrimExpr shifted = binary(left ? BinaryOp::Shl : BinaryOp::Shr, a, amount);
  return select(in_range, shifted, make_const(a.dtype(), 0));
}

[[maybe_unused]] const Op* kLeftShift =
    register_binary("left_shift", Accept::Int, Result::Same,
                    [](const PrimExpr& a, const PrimExpr& b) { return shift(a, b, true); });
[[maybe_unused]] const Op* kRightShift =
    register_binary("right_shift", Accept::Int, Result::Same,
                    [](const PrimExpr& a, const PrimExpr& b) { return shift(a, b, false); });

// Float comparisons with NaN are false, except not_equal, which is true (as in torch).
[[maybe_unused]] const Op* kEqual =
    register_binary("equal", Accept::Any, Result::Bool,
                    [](const PrimExpr& a, const PrimExpr& b) { return a == b; });
[[maybe_unused]] const Op* kNotEqual =
    register_binary("not_equal", Accept::Any, Result::Bool,
                    [](const PrimExpr& a, const PrimExpr& b) { return a != b; });
[[maybe_unused]] const Op* kLess = register_binary(
    "less", Accept::Any, Result::Bool, [](const PrimExpr& a, const PrimExpr& b) { return a < b; });
[[maybe_unused]] const Op* kLessEqual =
    register_binary("less_equal", Accept::Any, Result::Bool,
                    [](const PrimExpr& a, const PrimExpr& b) { return a <= b; });
[[maybe_unused]] const Op* kGreater =
    register_binary("greater", Accept::Any, Result::Bool,
                    [](const PrimExpr& a, const PrimExpr& b) { return a > b; });
[[maybe_unused]] const Op* kGreaterEqual =
    register_binary("greater_equal", Accept::Any, Result::Bool,
                    [](const PrimExpr& a, const PrimExpr& b) { return a >= b; });

// ---------------------------------------------------------------- logical (bool out)

// As torch.logical_*: any dtype, nonzero (and NaN) is true, the inputs' dtypes may differ.
PrimExpr truth(const PrimExpr& x) { return cast(DType::Bool, x); }

Type logical_rel(const std::vector<Type>& args, Attrs&, const TypeContext& ctx) {
  if (args.size() == 1) return TensorType{tensor_arg(args, 0, "the input", ctx).shape, DType::Bool};
  check_arity(args, 2, ctx);
  const TensorType& a = tensor_arg(args, 0, "the first input", ctx);
  const TensorType& b = tensor_arg(args, 1, "the second input", ctx);
  return TensorType{broadcast_shapes(a.shape, b.shape, ctx), DType::Bool};
}

enum class Logic { And, Or, Xor };

ComputeRule logical_compute(std::string name, Logic logic) {
  return [name, logic](const std::vector<Tensor>& in, const Attrs&, const TensorType& out) {
    const Tensor &a = in[0], &b = in[1];
    return compute(name, out.shape, [&](const std::vector<PrimVar>& i) {
      PrimExpr x = truth(a(broadcast_index(a, i))), y = truth(b(broadcast_index(b, i)));
      if (logic == Logic::Xor) return x != y;
      return logic == Logic::And ? logical_and(x, y) : logical_or(x, y);
    });
  };
}

Tensor logical_not_compute(const std::vector<Tensor>& in, const Attrs&, const TensorType& out) {
  return compute("logical_not", out.shape, [&](const std::vector<PrimVar>& i) {
    return logical_not(truth(in[0](as_exprs(i))));
  });
}

[[maybe_unused]] const Op* kLogicalAnd =
    register_op({"logical_and", 2, OpPattern::Broadcast, logical_rel,
                 logical_compute("logical_and", Logic::And)});
[[maybe_unused]] const Op* kLogicalOr = register_op(
    {"logical_or", 2, OpPattern::Broadcast, logical_rel, logical_compute("logical_or", Logic::Or)});
[[maybe_unused]] const Op* kLogicalXor =
    register_op({"logical_xor", 2, OpPattern::Broadcast, logical_rel,
                 logical_compute("logical_xor", Logic::Xor)});
[[maybe_unused]] const Op* kLogicalNot =
    register_op({"logical_not", 1, OpPattern::ElemWise, logical_rel, logical_not_compute});

// ---------------------------------------------------------------- where

Type where_rel(const std::vector<Type>& args, Attrs&, const TypeContext& ctx) {
  check_arity(args, 3, ctx);
  const TensorType& cond = tensor_arg(args, 0, "the condition", ctx);
  const TensorType& a = tensor_arg(args, 1, "the second input", ctx);
  const TensorType& b = tensor_arg(args, 2, "the third input", ctx);
  if (cond.dtype != DType::Bool)
    ctx.fail("the condition is " + to_string(cond) +
             " but must be bool; compare it (e.g. not_equal with 0) to get a bool tensor");
  check_same_dtype(a, "the second input", b, "the third input", ctx);
  return TensorType{broadcast_shapes(broadcast_shapes(cond.shape, a.shape, ctx), b.shape, ctx),
                    a.dtype};
}

// Select evaluates both sides; both loads are in range (broadcast indices).
Tensor where_compute(const std::vector<Tensor>& in, const Attrs&, const TensorType& out) {
  const Tensor &c = in[0], &a = in[1], &b = in[2];
  return compute("where", out.shape, [&](const std::vector<PrimVar>& i) {
    return select(c(broadcast_index(c, i)), a(broadcast_index(a, i)), b(broadcast_index(b, i)));
  });
}

[[maybe_unused]] const Op* kWhere =
    register_op({"where", 3, OpPattern::Broadcast, where_rel, where_compute});

// ---------------------------------------------------------------- unary (ElemWise)

using UnaryFn = std::function<PrimExpr(const PrimExpr& x, const Attrs& attrs)>;
// Checks and normalises an op's attributes (fills defaults, stores one representation).
using AttrNorm = std::function<void(Attrs& attrs, const TypeContext& ctx)>;

const Op* register_unary(const std::string& name, UnaryFn fn, Accept accept = Accept::Float,
                         AttrNorm norm = nullptr, std::vector<AttrSpec> attrs = {}) {
  TypeRelation rel = [accept, norm](const std::vector<Type>& args, Attrs& attrs,
                                    const TypeContext& ctx) {
    check_arity(args, 1, ctx);
    const TensorType& x = tensor_arg(args, 0, "the input", ctx);
    check_accept(accept, x, "the input", ctx);
    if (norm) norm(attrs, ctx);
    return Type(x);
  };
  std::string stage = bare_op_name(name);
  ComputeRule rule = [fn, stage](const std::vector<Tensor>& in, const Attrs& attrs,
                                 const TensorType& out) {
    const Tensor& x = in[0];
    return compute(stage, out.shape,
                   [&](const std::vector<PrimVar>& i) { return fn(x(as_exprs(i)), attrs); });
  };
  return register_op(with_attrs({name, 1, OpPattern::ElemWise, rel, rule}, std::move(attrs)));
}

// A unary op that is a prim_math function of x alone.
const Op* register_math(const std::string& name, PrimExpr (*fn)(const PrimExpr&),
                        Accept accept = Accept::Float) {
  return register_unary(name, [fn](const PrimExpr& x, const Attrs&) { return fn(x); }, accept);
}

PrimExpr cst(const PrimExpr& like, double v) { return make_const(like.dtype(), v); }

[[maybe_unused]] const Op* kSigmoid = register_math("sigmoid", sigmoid);
[[maybe_unused]] const Op* kTanh = register_math("tanh", tanh);
[[maybe_unused]] const Op* kExp = register_math("exp", exp);
[[maybe_unused]] const Op* kLog = register_math("log", log);
[[maybe_unused]] const Op* kErf = register_math("erf", erf);
[[maybe_unused]] const Op* kSqrt = register_math("sqrt", sqrt);
[[maybe_unused]] const Op* kRsqrt = register_math("rsqrt", rsqrt);
[[maybe_unused]] const Op* kFloor = register_math("floor", floor);
[[maybe_unused]] const Op* kCeil = register_math("ceil", ceil);
[[maybe_unused]] const Op* kRound = register_math("round", round);  // half to even, as torch
[[maybe_unused]] const Op* kAbs = register_math("abs", abs, Accept::NotBool);
[[maybe_unused]] const Op* kLog1p = register_math("log1p", log1p);
[[maybe_unused]] const Op* kExpm1 = register_math("expm1", expm1);
[[maybe_unused]] const Op* kExp2 = register_math("exp2", exp2);
[[maybe_unused]] const Op* kLog2 = register_math("log2", log2);
[[maybe_unused]] const Op* kLog10 = register_math("log10", log10);
[[maybe_unused]] const Op* kErfc = register_math("erfc", erfc);
[[maybe_unused]] const Op* kTrunc = register_math("trunc", trunc);
[[maybe_unused]] const Op* kSign = register_math("sign", sign, Accept::NotBool);
[[maybe_unused]] const Op* kSin = register_math("sin", sin, Accept::Float32);
[[maybe_unused]] const Op* kCos = register_math("cos", cos, Accept::Float32);
[[maybe_unused]] const Op* kTan = register_math("tan", tan, Accept::Float32);
[[maybe_unused]] const Op* kAsin = register_math("asin", asin);
[[maybe_unused]] const Op* kAcos = register_math("acos", acos);
[[maybe_unused]] const Op* kAtan = register_math("atan", atan);
[[maybe_unused]] const Op* kSinh = register_math("sinh", sinh);
[[maybe_unused]] const Op* kCosh = register_math("cosh", cosh);
[[maybe_unused]] const Op* kAsinh = register_math("asinh", asinh);
[[maybe_unused]] const Op* kAcosh = register_math("acosh", acosh);
[[maybe_unused]] const Op* kAtanh = register_math("atanh", atanh);
[[maybe_unused]] const Op* kNegative =
    register_unary("negative", [](const PrimExpr& x, const Attrs&) { return -x; }, Accept::NotBool);
[[maybe_unused]] const Op* kBitwiseNot = register_unary(
    "bitwise_not",
    [](const PrimExpr& x, const Attrs&) {
      return x.dtype() == DType::Bool ? logical_not(x) : binary(BinaryOp::BitXor, x, cst(x, -1.0));
    },
    Accept::IntOrBool);

[[maybe_unused]] const Op* kClip = register_unary(
    "clip",
    [](const PrimExpr& x, const Attrs& attrs) {
      double a_min = attr_float(attrs, "a_min"), a_max = attr_float(attrs, "a_max");
      // On integers the bounds round inward and saturate at the dtype's range (exact to
      // 2^53; the frontend clamps by larger int64 bounds with maximum and minimum).
      if (is_int(x.dtype())) {
        const double lo = static_cast<double>(int_min(x.dtype()));
        const double hi = static_cast<double>(int_max(x.dtype()));
        a_min = std::clamp(std::ceil(a_min), lo, hi), a_max = std::clamp(std::floor(a_max), lo, hi);
      }
      PrimExpr lo = cst(x, a_min), hi = cst(x, a_max);
      return min(max(x, lo), hi);  // torch.clamp: a_min > a_max gives a_max everywhere
    },
    Accept::NotBool, nullptr,
    {required_attr("a_min", AttrKind::Float, "the lower bound"),
     required_attr("a_max", AttrKind::Float, "the upper bound")});

// Float tests with a bool result: isnan, isinf, isfinite.
const Op* register_predicate(const std::string& name, PrimExpr (*fn)(const PrimExpr&)) {
  TypeRelation rel = [](const std::vector<Type>& args, Attrs&, const TypeContext& ctx) {
    check_arity(args, 1, ctx);
    const TensorType& x = tensor_arg(args, 0, "the input", ctx);
    check_float(x, "the input", ctx);
    return Type(TensorType{x.shape, DType::Bool});
  };
  std::string stage = bare_op_name(name);
  ComputeRule rule = [fn, stage](const std::vector<Tensor>& in, const Attrs&,
                                 const TensorType& out) {
    const Tensor& x = in[0];
    return compute(stage, out.shape,
                   [&](const std::vector<PrimVar>& i) { return fn(x(as_exprs(i))); });
  };
  return register_op({name, 1, OpPattern::ElemWise, rel, rule});
}

[[maybe_unused]] const Op* kIsNan = register_predicate("isnan", is_nan);
[[maybe_unused]] const Op* kIsInf = register_predicate("isinf", is_inf);
[[maybe_unused]] const Op* kIsFinite = register_predicate("isfinite", is_finite);

// ---------------------------------------------------------------- activations

// relu6(x + 3) / 6, the common part of torch's hardsigmoid and hardswish.
PrimExpr relu6_shifted(const PrimExpr& x) {
  return min(max(x + cst(x, 3.0), cst(x, 0.0)), cst(x, 6.0));
}

[[maybe_unused]] const Op* kRelu =
    register_unary("nn.relu", [](const PrimExpr& x, const Attrs&) { return max(x, cst(x, 0.0)); });

[[maybe_unused]] const Op* kLeakyRelu =
    register_unary("nn.leaky_relu",
                   [](const PrimExpr& x, const Attrs& attrs) {
                     return select(x > cst(x, 0.0), x, x * cst(x, attr_float(attrs, "alpha")));
                   },
                   Accept::Float, nullptr, {float_attr("alpha", 0.01, "the slope for x < 0")});

// torch's formulas: erf form 0.5 x (1 + erf(x / sqrt 2)), in float32 the equal x * cdf(x)
// (normal_cdf: one branch, a third of erf's instructions, so a GEMM's GELU epilogue costs
// little; and no cancellation for negative x); tanh form 0.5 x (1 + tanh(u)),
// u = sqrt(2 / pi) (x + 0.044715 x^3), computed as the equal x * sigmoid(2u), which does
// not cancel for negative x; its sigmoid takes the short exp (sigmoid_flush), whose flush to
// 0 below 2^-126 gives 0 where torch's 1 + tanh(u) is 0 already (u < -9).
// 0.70710678... = 1 / sqrt 2 and 0.79788456... = sqrt(2 / pi).
[[maybe_unused]] const Op* kGelu = register_unary(
    "nn.gelu",
    [](const PrimExpr& x, const Attrs& attrs) {
      if (attr_str(attrs, "approximate") == "tanh") {
        PrimExpr inner = cst(x, 2 * 0.7978845608028654) * (x + cst(x, 0.044715) * (x * x * x));
        return x * sigmoid_flush(inner);
      }
      if (x.dtype() == DType::Float32) return x * normal_cdf(x);
      return x * cst(x, 0.5) * (cst(x, 1.0) + erf(x * cst(x, 0.7071067811865476)));
    },
    Accept::Float,
    [](Attrs& attrs, const TypeContext& ctx) {
      std::string mode = attr_str(attrs, "approximate");
      if (mode != "none" && mode != "tanh")
        ctx.fail("approximate = '" + mode + "' is not supported; use 'none' or 'tanh'");
    },
    {str_attr("approximate", "none", "'none' (erf) or 'tanh'")});

// torch's x / (1 + e^-x): for x < -89 e^-x is inf and the result -0, as in torch.
[[maybe_unused]] const Op* kSilu = register_unary(
    "nn.silu", [](const PrimExpr& x, const Attrs&) { return x / (cst(x, 1.0) + exp(-x)); });
// torch.nn.functional.logsigmoid, log(1 / (1 + e^-x)), as torch's CPU kernel computes it:
// min(x, 0) - log1p(e^-|x|), which never overflows and keeps full accuracy for large |x|
// (about -e^-x for large x, x for very negative x); NaN propagates, -inf gives -inf.
[[maybe_unused]] const Op* kLogSigmoid = register_unary(
    "nn.log_sigmoid",
    [](const PrimExpr& x, const Attrs&) { return min(x, cst(x, 0.0)) - log1p(exp(-abs(x))); });
[[maybe_unused]] const Op* kHardswish = register_unary(
    "nn.hardswish",
    [](const PrimExpr& x, const Attrs&) { return x * relu6_shifted(x) / cst(x, 6.0); });
[[maybe_unused]] const Op* kHardsigmoid =
    register_unary("nn.hardsigmoid",
                   [](const PrimExpr& x, const Attrs&) { return relu6_shifted(x) / cst(x, 6.0); });

// ---------------------------------------------------------------- cast

Type cast_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 1, ctx);
  const TensorType& x = tensor_arg(args, 0, "the input", ctx);
  std::string name = attr_str(attrs, "dtype");
  DType to;
  try {
    to = dtype_from_name(name);
  } catch (const Error&) {
    ctx.fail(
        "dtype '" + name +
        "' is not supported; use float32, float64, int32, int64, bool, int8, uint8 or bfloat16");
  }
  return TensorType{x.shape, to};
}

// Float to int truncates toward zero and saturates: NaN gives 0, out-of-range floats the
// int's min or max (torch's is platform dependent). To bool is x != 0, NaN included.
Tensor cast_compute(const std::vector<Tensor>& in, const Attrs&, const TensorType& out) {
  return compute("cast", out.shape, [&](const std::vector<PrimVar>& i) {
    return cast(out.dtype, in[0](as_exprs(i)));
  });
}

[[maybe_unused]] const Op* kCast =
    register_op(with_attrs({"cast", 1, OpPattern::ElemWise, cast_rel, cast_compute},
                           {str_attr("dtype", "float32", "the result's dtype")}));

}  // namespace
}  // namespace ember::ir
