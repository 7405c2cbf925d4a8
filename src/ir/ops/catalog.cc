// Reductions of the fusion catalog (TensorRT's reduce fusions), each one op so that the
// reduction and the elementwise work around it run in one loop nest: l1_norm = sum(|x|),
// sum_squares = sum(x * x), l2_norm = sqrt(sum(x * x)), log_sum = log(sum(x)) and
// log_sum_exp = log(sum(exp(x))), computed stably as torch.logsumexp does: m + log(sum(
// exp(x - m))) with m the max, taken as 0 when it is infinite (so all -inf gives -inf and
// a +inf gives +inf rather than NaN). Attributes as sum: axis (empty = every axis) and
// keepdims. Float inputs only. RecognizePatterns creates them from their elementwise forms.
#include <algorithm>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "ember/ir/prim_math.h"
#include "op_util.h"

namespace ember::ir {
namespace {

using namespace ops;

Type catalog_reduce_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 1, ctx);
  const TensorType& x = tensor_arg(args, 0, "data", ctx);
  check_float(x, "data", ctx);
  std::vector<int64_t> axes = attr_ints(attrs, "axis");
  if (axes.empty())
    for (int64_t d = 0; d < x.ndim(); ++d) axes.push_back(d);
  for (int64_t& a : axes) a = normalize_axis(a, x.ndim(), ctx);
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    ctx.fail("axis " + ints_str(attr_ints(attrs, "axis")) + " repeats an axis");
  bool keepdims = attr_int(attrs, "keepdims") != 0;
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < x.ndim(); ++d) {
    if (!std::binary_search(axes.begin(), axes.end(), d))
      shape.push_back(x.shape[d]);
    else if (keepdims)
      shape.push_back(1);
  }
  attrs = attrs.with("axis", axes).with("keepdims", int64_t{keepdims});
  return TensorType{shape, x.dtype};
}

// x's index for output index `i`: reduce variables on the reduced axes.
std::vector<PrimExpr> input_index(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims,
                                  const std::vector<IterVar>& raxes,
                                  const std::vector<PrimVar>& i) {
  std::vector<PrimExpr> xi;
  size_t next_out = 0, next_red = 0;
  for (int64_t d = 0; d < x.ndim(); ++d) {
    if (next_red < axes.size() && axes[next_red] == d) {
      xi.push_back(raxes[next_red++]->var);
      if (keepdims) ++next_out;
    } else {
      xi.push_back(i[next_out++]);
    }
  }
  return xi;
}

std::vector<IterVar> reduce_axes_of(const Tensor& x, const std::vector<int64_t>& axes) {
  std::vector<IterVar> r;
  for (int64_t a : axes) r.push_back(reduce_axis(x.shape()[a], "r" + std::to_string(a)));
  return r;
}

// sum over the reduced axes of f(x[...]), then g(total) elementwise (skipped when null).
using Fn = std::function<PrimExpr(const PrimExpr&)>;
ComputeRule sum_then(const std::string& name, Fn f, Fn g) {
  return [=](const std::vector<Tensor>& in, const Attrs& attrs, const TensorType& out) {
    const Tensor& x = in[0];
    auto axes = attr_ints(attrs, "axis");
    bool keepdims = attr_int(attrs, "keepdims") != 0;
    auto raxes = reduce_axes_of(x, axes);
    Tensor total = compute(g ? name + "_sum" : name, out.shape, [&](const std::vector<PrimVar>& i) {
      PrimExpr v = f(x(input_index(x, axes, keepdims, raxes, i)));
      return raxes.empty() ? v : sum(v, raxes);
    });
    if (!g) return total;
    return compute(name, out.shape,
                   [&](const std::vector<PrimVar>& i) { return g(total(as_exprs(i))); });
  };
}

Tensor log_sum_exp_compute(const std::vector<Tensor>& in, const Attrs& attrs,
                           const TensorType& out) {
  const Tensor& x = in[0];
  auto axes = attr_ints(attrs, "axis");
  bool keepdims = attr_int(attrs, "keepdims") != 0;
  auto r1 = reduce_axes_of(x, axes);
  // The max only keeps exp(x - m) finite: its NaNs are left out (a NaN still reaches the
  // result through the sum), so the code generator's max needs no NaN propagation, and the
  // kernel no NaN test and blend per element (calibration: log-sum-exp max).
  Tensor mx = compute("log_sum_exp_max", out.shape, [&](const std::vector<PrimVar>& i) {
    PrimExpr v = x(input_index(x, axes, keepdims, r1, i));
    if (r1.empty()) return v;
    const PrimExpr minus_inf = make_const(v.dtype(), -std::numeric_limits<double>::infinity());
    return max_reduce(select(is_nan(v), minus_inf, v), r1);
  });
  // torch's guard: an infinite max is taken as 0, so exp(x - m) is never inf - inf.
  auto shift = [&](const std::vector<PrimVar>& i) {
    PrimExpr m = mx(as_exprs(i));
    PrimExpr inf = make_const(x.dtype(), std::numeric_limits<double>::infinity());
    return select(abs(m) == inf, make_const(x.dtype(), 0.0), m);
  };
  // x - m is never positive unless m is +inf (then shifted by 0): the short exp
  // (exp_nonpositive) takes it, clamped to 0 there (NaN kept), and a +inf max gives +inf
  // (NaN with a NaN in the row) whatever the sum of the clamped terms.
  auto r2 = reduce_axes_of(x, axes);
  Tensor total = compute("log_sum_exp_sum", out.shape, [&](const std::vector<PrimVar>& i) {
    PrimExpr v = x(input_index(x, axes, keepdims, r2, i)) - shift(i);
    const PrimExpr zero = make_const(v.dtype(), 0.0);
    PrimExpr e = exp_nonpositive(select(v > zero, zero, v));
    return r2.empty() ? e : sum(e, r2);
  });
  return compute("log_sum_exp", out.shape, [&](const std::vector<PrimVar>& i) {
    PrimExpr t = total(as_exprs(i));
    const PrimExpr inf = make_const(t.dtype(), std::numeric_limits<double>::infinity());
    return select(mx(as_exprs(i)) == inf, t + inf, log(t) + shift(i));
  });
}

PrimExpr square(const PrimExpr& v) { return v * v; }
PrimExpr identity(const PrimExpr& v) { return v; }
PrimExpr abs_of(const PrimExpr& v) { return abs(v); }
PrimExpr sqrt_of(const PrimExpr& v) { return sqrt(v); }
PrimExpr log_of(const PrimExpr& v) { return log(v); }

[[maybe_unused]] const Op* kL1Norm = register_op(with_attrs(
    {"l1_norm", 1, OpPattern::CommReduce, catalog_reduce_rel, sum_then("l1_norm", abs_of, {})},
    reduce_attrs()));
[[maybe_unused]] const Op* kSumSquares =
    register_op(with_attrs({"sum_squares", 1, OpPattern::CommReduce, catalog_reduce_rel,
                            sum_then("sum_squares", square, {})},
                           reduce_attrs()));
[[maybe_unused]] const Op* kL2Norm = register_op(with_attrs(
    {"l2_norm", 1, OpPattern::CommReduce, catalog_reduce_rel, sum_then("l2_norm", square, sqrt_of)},
    reduce_attrs()));
[[maybe_unused]] const Op* kLogSum =
    register_op(with_attrs({"log_sum", 1, OpPattern::CommReduce, catalog_reduce_rel,
                            sum_then("log_sum", identity, log_of)},
                           reduce_attrs()));
[[maybe_unused]] const Op* kLogSumExp = register_op(
    with_attrs({"log_sum_exp", 1, OpPattern::CommReduce, catalog_reduce_rel, log_sum_exp_compute},
               reduce_attrs()));

}  // namespace
}  // namespace ember::ir
