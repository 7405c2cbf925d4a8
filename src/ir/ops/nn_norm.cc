// Normalisations: nn.batch_norm (inference form), nn.softmax and nn.log_softmax,
// nn.layer_norm and nn.instance_norm (both mean_variance_norm). Shapes and numerics follow
// torch.nn.functional.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ember/ir/prim_math.h"
#include "nn_util.h"

namespace ember::ir {
namespace {

using namespace ops;

Type batch_norm_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 5, ctx);
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  check_float(data, "data", ctx);
  int64_t axis = normalize_axis(attr_int(attrs, "axis"), data.ndim(), ctx);
  double eps = attr_float(attrs, "epsilon");
  if (!(eps >= 0)) ctx.fail("epsilon = " + std::to_string(eps) + " must be >= 0");
  attrs = attrs.with("axis", axis).with("epsilon", eps);
  const char* names[] = {"gamma", "beta", "moving_mean", "moving_var"};
  for (size_t i = 1; i < 5; ++i)
    check_channel_param(data, axis, tensor_arg(args, i, names[i - 1], ctx), names[i - 1], ctx);
  return data;
}

// Inference form, in the data dtype: (x - mean) / sqrt(var + eps) * gamma + beta.
Tensor batch_norm_compute(const std::vector<Tensor>& in, const Attrs& attrs,
                          const TensorType& out) {
  const Tensor &data = in[0], &gamma = in[1], &beta = in[2], &mean = in[3], &var = in[4];
  int64_t axis = attr_int(attrs, "axis");
  PrimExpr eps = make_const(data.dtype(), attr_float(attrs, "epsilon"));
  return compute("batch_norm", out.shape, [&](const std::vector<PrimVar>& i) {
    std::vector<PrimExpr> c{i[axis]};
    return (data(as_exprs(i)) - mean(c)) / sqrt(var(c) + eps) * gamma(c) + beta(c);
  });
}

// ---------------------------------------------------------------- softmax

Type softmax_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 1, ctx);
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  check_float(data, "data", ctx);
  if (data.ndim() == 0) ctx.fail("data must have at least 1 dimension, got " + to_string(data));
  attrs = attrs.with("axis", normalize_axis(attr_int(attrs, "axis"), data.ndim(), ctx));
  return data;
}

// What softmax and log_softmax share: the axis, the reduced shape (the axis kept with size
// 1), an index with the axis replaced, and the stability max over the axis (`name`_max).
struct AxisMax {
  AxisMax(const std::string& name, const Tensor& x, const Attrs& attrs, const TensorType& out)
      : axis(static_cast<size_t>(attr_int(attrs, "axis"))), extent(out.shape[axis]) {
    reduced = out.shape;
    reduced[axis] = 1;
    IterVar k = reduce_axis(extent, "k");
    max = compute(name + "_max", reduced,
                  [&](const std::vector<PrimVar>& i) { return max_reduce(x(at(i, k->var)), {k}); });
  }
  std::vector<PrimExpr> at(const std::vector<PrimVar>& i, PrimExpr v) const {
    std::vector<PrimExpr> r = as_exprs(i);
    r[axis] = std::move(v);
    return r;
  }
  size_t axis;
  int64_t extent;
  std::vector<int64_t> reduced;
  Tensor max;
};

// Numerically stable like torch: max over the axis, exp(x - max), sum, divide. The
// reduced stages keep the axis with size 1. x - max is never positive, so its exp takes the
// short form (exp_nonpositive: terms under 2^-126 of the row's largest flush to 0).
Tensor softmax_compute(const std::vector<Tensor>& in, const Attrs& attrs, const TensorType& out) {
  const Tensor& x = in[0];
  const AxisMax m("softmax", x, attrs, out);
  Tensor e = compute("softmax_exp", out.shape, [&](const std::vector<PrimVar>& i) {
    return exp_nonpositive(x(as_exprs(i)) - m.max(m.at(i, idx(0))));
  });
  IterVar k = reduce_axis(m.extent, "k");
  Tensor total = compute("softmax_sum", m.reduced, [&](const std::vector<PrimVar>& i) {
    return sum(e(m.at(i, k->var)), {k});
  });
  return compute("softmax", out.shape, [&](const std::vector<PrimVar>& i) {
    return e(as_exprs(i)) / total(m.at(i, idx(0)));
  });
}

Tensor log_softmax_compute(const std::vector<Tensor>& in, const Attrs& attrs,
                           const TensorType& out) {
  const Tensor& x = in[0];
  const AxisMax m("log_softmax", x, attrs, out);
  IterVar k = reduce_axis(m.extent, "k");
  Tensor total = compute("log_softmax_sum", m.reduced, [&](const std::vector<PrimVar>& i) {
    return sum(exp_nonpositive(x(m.at(i, k->var)) - m.max(m.at(i, idx(0)))), {k});
  });
  // torch's order: (x - max) - log(sum(exp(x - max))).
  return compute("log_softmax", out.shape, [&](const std::vector<PrimVar>& i) {
    return x(as_exprs(i)) - m.max(m.at(i, idx(0))) - log(total(m.at(i, idx(0))));
  });
}

// ---------------------------------------------------------------- layer_norm

// Normalises over the trailing axes from `axis` on (torch's normalized_shape =
// data.shape[axis:]); gamma and beta have exactly that shape.
Type layer_norm_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 3, ctx);
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  check_float(data, "data", ctx);
  if (data.ndim() == 0) ctx.fail("data must have at least 1 dimension, got " + to_string(data));
  int64_t axis = normalize_axis(attr_int(attrs, "axis"), data.ndim(), ctx);
  double eps = attr_float(attrs, "epsilon");
  if (!(eps >= 0)) ctx.fail("epsilon = " + std::to_string(eps) + " must be >= 0");
  attrs = attrs.with("axis", axis).with("epsilon", eps);
  std::vector<int64_t> norm(data.shape.begin() + axis, data.shape.end());
  const char* names[] = {"gamma", "beta"};
  for (size_t i = 1; i < 3; ++i) {
    const TensorType& p = tensor_arg(args, i, names[i - 1], ctx);
    check_same_dtype(data, "data", p, names[i - 1], ctx);
    if (p.shape != norm)
      ctx.fail(std::string(names[i - 1]) + " is " + to_string(p) + " but must have shape " +
               ints_str(norm) + " (data " + to_string(data) + " normalised from axis " +
               std::to_string(axis) + " on)");
  }
  return data;
}

// Mean-variance normalisation over the trailing axes from `axis` on, in five stages in the
// data dtype: the shift s, the row's first element; the sum of the shifted data x - s; the
// correction c, the mean of d = (x - s) - sum / n; the biased variance, the mean of d^2;
// and the output d * rsqrt(var + eps) * gamma + beta - c * scale, where `affine` maps an
// output index to the gamma and beta values. Why the shift: the float32 sum of a constant
// row c is not n * c, so x - sum / n would be a few ulps of c that rsqrt(eps) scales up to
// an error of ~1e-3 where torch gives exactly beta. Shifted, a constant row sums to exactly
// 0, and a row of large offset and small spread (1000 + 1e-3 * noise) keeps its spread's
// digits (x - s is exact). Why the correction: sum / n is rounded at the scale of |x - s|,
// the spread, so without it every output of a row would be off by the same ~1 ulp of the
// spread; the sum of such a row against a long positive vector then grows with its length
// (BiT standardizes its conv weights this way, and its convs read ReLU outputs: 7x
// PyTorch's error on the model). c is summed from terms centred on zero, so d - c is
// centred to within rounding. The stages are named `name`_shift, `name`_sum, `name`_fix,
// `name`_var and `name`.
using Affine = std::function<std::pair<PrimExpr, PrimExpr>(const std::vector<PrimVar>& i)>;

Tensor mean_variance_norm(const std::string& name, const Tensor& x, size_t axis, double epsilon,
                          const TensorType& out, const Affine& affine) {
  std::vector<int64_t> lead(out.shape.begin(), out.shape.begin() + axis);
  std::vector<int64_t> norm(out.shape.begin() + axis, out.shape.end());
  PrimExpr n = make_const(x.dtype(), static_cast<double>(numel(norm)));
  PrimExpr eps = make_const(x.dtype(), epsilon);
  auto reduce_axes = [&]() {
    std::vector<IterVar> r;
    for (size_t d = 0; d < norm.size(); ++d)
      r.push_back(reduce_axis(norm[d], "r" + std::to_string(d)));
    return r;
  };
  // The shift: a one-element reduction, so that it is computed once per row into a local
  // (an inlined x(i, 0) would be recomputed, its producer's epilogue included, at every
  // element of all three stages).
  // An empty row has no first element (and no output): it is not shifted.
  const bool empty = numel(norm) == 0;
  IterVar r0 = reduce_axis(1, "first");
  Tensor shift = compute(name + "_shift", lead, [&](const std::vector<PrimVar>& i) {
    std::vector<PrimExpr> first = as_exprs(i);
    first.push_back(r0->var);
    first.resize(i.size() + norm.size(), make_const(DType::Int64, 0));
    return sum(empty ? make_const(x.dtype(), 0.0) : x(first), {r0});
  });
  // x at leading index `i` and normalised index `r`, minus the shift.
  auto shifted = [&](const std::vector<PrimExpr>& i, const std::vector<PrimExpr>& r) {
    std::vector<PrimExpr> xi = i;
    xi.insert(xi.end(), r.begin(), r.end());
    return x(xi) - shift(i);
  };
  auto vars = [](const std::vector<IterVar>& r) {
    std::vector<PrimExpr> v;
    for (auto& a : r) v.push_back(a->var);
    return v;
  };
  std::vector<IterVar> r1 = reduce_axes();
  Tensor total = compute(name + "_sum", lead, [&](const std::vector<PrimVar>& i) {
    return sum(shifted(as_exprs(i), vars(r1)), r1);
  });
  // x - s minus the shifted mean: what the correction and the variance sum and the output
  // scales, the same rounding in all three.
  auto centred = [&](const std::vector<PrimExpr>& i, const std::vector<PrimExpr>& r) {
    return shifted(i, r) - total(i) / n;
  };
  std::vector<IterVar> r2 = reduce_axes(), r3 = reduce_axes();
  Tensor fix = compute(name + "_fix", lead, [&](const std::vector<PrimVar>& i) {
    return sum(centred(as_exprs(i), vars(r2)), r2);
  });
  Tensor sq = compute(name + "_var", lead, [&](const std::vector<PrimVar>& i) {
    PrimExpr d = centred(as_exprs(i), vars(r3));
    return sum(d * d, r3);
  });
  return compute(name, out.shape, [&](const std::vector<PrimVar>& i) {
    std::vector<PrimExpr> li(i.begin(), i.begin() + axis), ni(i.begin() + axis, i.end());
    // (d - c) * rstd * g + b as one FMA of d: the scale rstd * g and the offset
    // b - c * scale are the row's own where g and b are (instance norm's per channel),
    // computed once per row (an instance norm -> softshrink over 64 x 56 x 56 was
    // compute-bound on AVX2 with the offset per element).
    auto [g, b] = affine(i);
    PrimExpr scale = rsqrt(sq(li) / n + eps) * g;
    return fma(centred(li, ni), scale, b - fix(li) / n * scale);
  });
}

Tensor layer_norm_compute(const std::vector<Tensor>& in, const Attrs& attrs,
                          const TensorType& out) {
  const Tensor &gamma = in[1], &beta = in[2];
  size_t axis = static_cast<size_t>(attr_int(attrs, "axis"));
  return mean_variance_norm("layer_norm", in[0], axis, attr_float(attrs, "epsilon"), out,
                            [&](const std::vector<PrimVar>& i) {
                              std::vector<PrimExpr> ni(i.begin() + axis, i.end());
                              return std::make_pair(gamma(ni), beta(ni));
                            });
}

// ---------------------------------------------------------------- instance_norm

// torch's instance_norm with instance statistics: data [N, C, spatial...] is normalised
// over the spatial axes of each (n, c), then scaled by gamma [C] and shifted by beta [C].
Type instance_norm_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 3, ctx);
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  check_float(data, "data", ctx);
  if (data.ndim() < 3)
    ctx.fail("data must be [N, C, spatial...] with at least one spatial axis, got " +
             to_string(data) + "; add the batch axis with expand_dims");
  double eps = attr_float(attrs, "epsilon");
  if (!(eps >= 0)) ctx.fail("epsilon = " + std::to_string(eps) + " must be >= 0");
  attrs = attrs.with("epsilon", eps);
  const char* names[] = {"gamma", "beta"};
  for (size_t i = 1; i < 3; ++i) {
    const TensorType& p = tensor_arg(args, i, names[i - 1], ctx);
    check_same_dtype(data, "data", p, names[i - 1], ctx);
    if (p.shape != std::vector<int64_t>{data.shape[1]})
      ctx.fail(std::string(names[i - 1]) + " is " + to_string(p) + " but must have shape [" +
               std::to_string(data.shape[1]) + "] (one value per channel of data " +
               to_string(data) + ")");
  }
  return data;
}

Tensor instance_norm_compute(const std::vector<Tensor>& in, const Attrs& attrs,
                             const TensorType& out) {
  const Tensor &gamma = in[1], &beta = in[2];
  return mean_variance_norm(
      "instance_norm", in[0], 2, attr_float(attrs, "epsilon"), out,
      [&](const std::vector<PrimVar>& i) { return std::make_pair(gamma({i[1]}), beta({i[1]})); });
}

// ---------------------------------------------------------------- registration

[[maybe_unused]] const Op* kBatchNorm = register_op(
    with_attrs({"nn.batch_norm", 5, OpPattern::Broadcast, batch_norm_rel, batch_norm_compute},
               {int_attr("axis", 1, "the channel axis of data"),
                float_attr("epsilon", 1e-5, "added to the variance")}));
const AttrSpec kSoftmaxAxis = int_attr("axis", -1, "the axis the probabilities sum along");
[[maybe_unused]] const Op* kSoftmax = register_op(
    with_attrs({"nn.softmax", 1, OpPattern::Opaque, softmax_rel, softmax_compute}, {kSoftmaxAxis}));
[[maybe_unused]] const Op* kLogSoftmax = register_op(with_attrs(
    {"nn.log_softmax", 1, OpPattern::Opaque, softmax_rel, log_softmax_compute}, {kSoftmaxAxis}));
// Normalisations are reductions to FuseOps: elementwise epilogues fuse into them, and the
// default schedule computes the statistics at the output's row loop.
[[maybe_unused]] const Op* kLayerNorm = register_op(
    with_attrs({"nn.layer_norm", 3, OpPattern::CommReduce, layer_norm_rel, layer_norm_compute},
               {int_attr("axis", -1, "normalise over the axes from this one on"),
                float_attr("epsilon", 1e-5, "added to the variance")}));
[[maybe_unused]] const Op* kInstanceNorm = register_op(with_attrs(
    {"nn.instance_norm", 3, OpPattern::CommReduce, instance_norm_rel, instance_norm_compute},
    {float_attr("epsilon", 1e-5, "added to the variance")}));

}  // namespace
}  // namespace ember::ir
