// DirectML's fused activations that PyTorch also has (elu, selu, celu, softplus, softsign,
// threshold, hardshrink, softshrink, mish) and the ones only DirectML has (parametric
// softplus, scaled tanh, linear). All are ElemWise, so FuseOps puts them into the epilogue
// of a conv, dense, matmul or normalisation, or into a chain after an add.
//
// Numerics follow PyTorch's CPU kernels, including which side of a threshold a value equal
// to it falls on, signed zeros and NaN propagation, but the formulas are chosen not to
// overflow: softplus and mish never form e^x for large x, and elu-like ops use expm1 and
// softplus log1p, so small |x| keeps its relative accuracy.
#include <cmath>
#include <string>
#include <vector>

#include "ember/ir/prim_math.h"
#include "ember/support/error.h"
#include "op_util.h"

namespace ember::ir {

namespace {

using namespace ops;

// What a float attribute must satisfy besides being a number (NaN is always refused).
enum class Check { Finite, NonZero, NonNegative, NotNaN };

struct FloatAttr {
  const char* name;
  double dflt;
  Check check;
};

void check_attr(const FloatAttr& a, double v, const TypeContext& ctx) {
  std::string what = std::string("attribute ") + a.name + " = " + std::to_string(v);
  if (std::isnan(v)) ctx.fail(std::string("attribute ") + a.name + " is NaN; give a number");
  if (a.check != Check::NotNaN && !std::isfinite(v)) ctx.fail(what + " must be finite");
  if (a.check == Check::NonZero && v == 0) ctx.fail(what + " must not be 0 (it divides)");
  if (a.check == Check::NonNegative && v < 0) ctx.fail(what + " must be >= 0");
}

PrimExpr cst(const PrimExpr& like, double v) { return make_const(like.dtype(), v); }

// The activation of one element, given the input (a variable: use it freely) and the
// normalised attribute values in declaration order.
using ActFn = std::function<PrimExpr(const PrimExpr& x, const std::vector<double>& a)>;

const Op* register_activation(const std::string& name, std::vector<FloatAttr> spec, ActFn fn) {
  TypeRelation rel = [spec](const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
    check_arity(args, 1, ctx);
    const TensorType& x = tensor_arg(args, 0, "the input", ctx);
    check_float(x, "the input", ctx);
    for (const FloatAttr& a : spec) {
      double v = attr_float(attrs, a.name);  // the schema filled the default, checked the kind
      check_attr(a, v, ctx);
      attrs = attrs.with(a.name, v);
    }
    return Type(x);
  };
  std::string stage = bare_op_name(name);
  ComputeRule rule = [spec, fn, stage](const std::vector<Tensor>& in, const Attrs& attrs,
                                       const TensorType& out) {
    std::vector<double> values;
    for (const FloatAttr& a : spec) values.push_back(attr_float(attrs, a.name));
    const Tensor& x = in[0];
    return compute(stage, out.shape, [&](const std::vector<PrimVar>& i) {
      // The input is bound once: in a fused group it is the producer's whole expression.
      PrimVar v(stage + "_x", x.dtype());
      return let(v, x(as_exprs(i)), fn(v, values));
    });
  };
  Op op{name, 1, OpPattern::ElemWise, rel, rule};
  for (const FloatAttr& a : spec) op.attrs.push_back(float_attr(a.name, a.dflt, ""));
  return register_op(std::move(op));
}

// torch's elu family: x <= 0 ? neg_scale * expm1(x * in_scale) : pos_scale * x.
PrimExpr elu_like(const PrimExpr& x, double neg_scale, double in_scale, double pos_scale) {
  PrimExpr z = in_scale == 1.0 ? x : x * cst(x, in_scale);
  PrimExpr pos = pos_scale == 1.0 ? x : x * cst(x, pos_scale);
  return select(x <= cst(x, 0.0), expm1(z) * cst(x, neg_scale), pos);
}

// log(1 + e^z) as max(z, 0) + log1p(e^-|z|): no overflow for large z, and full accuracy
// where e^z is tiny. NaN propagates through max.
PrimExpr log1p_exp(const PrimExpr& z) { return max(z, cst(z, 0.0)) + log1p(exp(-abs(z))); }

// SELU's constants, as in torch.
constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
constexpr double kSeluScale = 1.0507009873554804934193349852946;

[[maybe_unused]] const Op* kElu = register_activation(
    "nn.elu", {{"alpha", 1.0, Check::Finite}},
    [](const PrimExpr& x, const std::vector<double>& a) { return elu_like(x, a[0], 1.0, 1.0); });

[[maybe_unused]] const Op* kSelu =
    register_activation("nn.selu", {}, [](const PrimExpr& x, const std::vector<double>&) {
      return elu_like(x, kSeluAlpha * kSeluScale, 1.0, kSeluScale);
    });

// torch: elu(x, alpha, scale=1, input_scale=1/alpha).
[[maybe_unused]] const Op* kCelu =
    register_activation("nn.celu", {{"alpha", 1.0, Check::NonZero}},
                        [](const PrimExpr& x, const std::vector<double>& a) {
                          return elu_like(x, a[0], 1.0 / a[0], 1.0);
                        });

// torch: x * beta > threshold ? x : log1p(exp(x * beta)) / beta.
[[maybe_unused]] const Op* kSoftplus = register_activation(
    "nn.softplus", {{"beta", 1.0, Check::NonZero}, {"threshold", 20.0, Check::NotNaN}},
    [](const PrimExpr& x, const std::vector<double>& a) {
      PrimExpr z = a[0] == 1.0 ? x : x * cst(x, a[0]);
      PrimExpr soft = log1p_exp(z);
      if (a[0] != 1.0) soft = soft / cst(x, a[0]);
      return select(z > cst(x, a[1]), x, soft);
    });

// DirectML's ParametricSoftplus: alpha * log(1 + exp(beta * x)), no linear region.
[[maybe_unused]] const Op* kParametricSoftplus = register_activation(
    "nn.parametric_softplus", {{"alpha", 1.0, Check::Finite}, {"beta", 1.0, Check::Finite}},
    [](const PrimExpr& x, const std::vector<double>& a) {
      return cst(x, a[0]) * log1p_exp(x * cst(x, a[1]));
    });

// torch: x / (1 + |x|), so +-inf gives NaN as in torch.
[[maybe_unused]] const Op* kSoftsign = register_activation(
    "nn.softsign", {},
    [](const PrimExpr& x, const std::vector<double>&) { return x / (cst(x, 1.0) + abs(x)); });

// torch.nn.Threshold(alpha, value): x <= alpha ? value : x, so NaN passes through.
// DirectML's ThresholdedRelu is value = 0.
[[maybe_unused]] const Op* kThresholdedRelu = register_activation(
    "nn.thresholded_relu", {{"alpha", 1.0, Check::NotNaN}, {"value", 0.0, Check::NotNaN}},
    [](const PrimExpr& x, const std::vector<double>& a) {
      return select(x <= cst(x, a[0]), cst(x, a[1]), x);
    });

// torch: -lambd <= x <= lambd ? 0 : x (NaN passes through).
[[maybe_unused]] const Op* kHardshrink =
    register_activation("nn.hardshrink", {{"lambd", 0.5, Check::Finite}},
                        [](const PrimExpr& x, const std::vector<double>& a) {
                          PrimExpr inside = logical_and(x >= cst(x, -a[0]), x <= cst(x, a[0]));
                          return select(inside, cst(x, 0.0), x);
                        });

// torch: x > lambd ? x - lambd : x < -lambd ? x + lambd : 0, and NaN passes. (torch's
// scalar loop returns x * 0, so -0 for negative x inside the band; its vector loop, which
// runs on all but a tensor's tail, returns +0, as here.)
[[maybe_unused]] const Op* kSoftshrink =
    register_activation("nn.softshrink", {{"lambd", 0.5, Check::NonNegative}},
                        [](const PrimExpr& x, const std::vector<double>& a) {
                          PrimExpr l = cst(x, a[0]);
                          PrimExpr band = select(is_nan(x), x, cst(x, 0.0));
                          return select(x > l, x - l, select(x < -l, x + l, band));
                        });

// DirectML's ScaledTanh: alpha * tanh(beta * x).
[[maybe_unused]] const Op* kScaledTanh = register_activation(
    "nn.scaled_tanh", {{"alpha", 1.0, Check::Finite}, {"beta", 1.0, Check::Finite}},
    [](const PrimExpr& x, const std::vector<double>& a) {
      return cst(x, a[0]) * tanh(x * cst(x, a[1]));
    });

// DirectML's Linear activation: alpha * x + beta.
[[maybe_unused]] const Op* kLinearAct = register_activation(
    "nn.linear_act", {{"alpha", 1.0, Check::Finite}, {"beta", 0.0, Check::Finite}},
    [](const PrimExpr& x, const std::vector<double>& a) {
      return x * cst(x, a[0]) + cst(x, a[1]);
    });

// mish = x * tanh(softplus(x)). With e = e^x and n = e (e + 2), tanh(log(1 + e)) is
// n / (n + 2): one exp, exact relative accuracy for very negative x (where it is ~e), and
// for x > 20 it is 1 to float64 precision, so x is returned before e^x could overflow.
// x = -inf gives -inf * 0 = NaN, as torch's x * tanh(log1p(exp(x))) does.
[[maybe_unused]] const Op* kMish =
    register_activation("nn.mish", {}, [](const PrimExpr& x, const std::vector<double>&) {
      PrimVar e("mish_e", x.dtype());
      PrimVar n("mish_n", x.dtype());
      PrimExpr ratio = let(n, e * (e + cst(x, 2.0)), n / (n + cst(x, 2.0)));
      return select(x > cst(x, 20.0), x, x * let(e, exp(x), ratio));
    });

}  // namespace
}  // namespace ember::ir
