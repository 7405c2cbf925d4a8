// Reductions over a set of axes (CommReduce): sum, mean, max, min, with torch's
// keepdim. An empty axis list reduces every axis. Results keep the input dtype (torch
// widens integer sums to int64; cast first for that). Max and min propagate NaN.
#include <algorithm>
#include <string>
#include <vector>

#include "op_util.h"

namespace ember::ir {
namespace {

using namespace ops;

enum class Kind { Sum, Mean, Max, Min };

Type reduce_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx, Kind kind) {
  check_arity(args, 1, ctx);
  const TensorType& x = tensor_arg(args, 0, "data", ctx);
  if (kind == Kind::Mean) check_float(x, "data", ctx);
  if (kind == Kind::Sum && x.dtype == DType::Bool)
    ctx.fail("data is " + to_string(x) + "; cast it to int64 or float32 to sum it");
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
    bool reduced = std::binary_search(axes.begin(), axes.end(), d);
    if (reduced && x.shape[d] == 0 && (kind == Kind::Max || kind == Kind::Min))
      ctx.fail("cannot take the " + std::string(kind == Kind::Max ? "max" : "min") + " over axis " +
               std::to_string(d) + " of " + to_string(x) + ", which is empty");
    if (!reduced)
      shape.push_back(x.shape[d]);
    else if (keepdims)
      shape.push_back(1);
  }
  attrs = attrs.with("axis", axes).with("keepdims", int64_t{keepdims});
  return TensorType{shape, x.dtype};
}

// Reads x at output index `i`, with reduce variables on the reduced axes.
Tensor reduce_stage(const std::string& name, const Tensor& x, const Attrs& attrs,
                    const TensorType& out, ReduceOp op) {
  std::vector<int64_t> axes = attr_ints(attrs, "axis");
  bool keepdims = attr_int(attrs, "keepdims") != 0;
  std::vector<IterVar> raxes;
  for (int64_t a : axes) raxes.push_back(reduce_axis(x.shape()[a], "r" + std::to_string(a)));
  return compute(name, out.shape, [&](const std::vector<PrimVar>& i) {
    std::vector<PrimExpr> xi;
    size_t next_out = 0, next_red = 0;
    for (int64_t d = 0; d < x.ndim(); ++d) {
      if (next_red < axes.size() && axes[next_red] == d) {
        xi.push_back(raxes[next_red++]->var);
        if (keepdims) ++next_out;  // the kept size-1 axis
      } else {
        xi.push_back(i[next_out++]);
      }
    }
    PrimExpr v = x(xi);
    if (raxes.empty()) return v;  // nothing to reduce (a rank-0 input)
    switch (op) {
      case ReduceOp::Sum:
        return sum(v, raxes);
      case ReduceOp::Max:
        return max_reduce(v, raxes);
      case ReduceOp::Min:
        return min_reduce(v, raxes);
    }
    return PrimExpr();
  });
}

ComputeRule reduce_compute(ReduceOp op, std::string name) {
  return [op, name](const std::vector<Tensor>& in, const Attrs& attrs, const TensorType& out) {
    return reduce_stage(name, in[0], attrs, out, op);
  };
}

// The sum, then a second stage dividing by the number of reduced elements.
Tensor mean_compute(const std::vector<Tensor>& in, const Attrs& attrs, const TensorType& out) {
  const Tensor& x = in[0];
  Tensor total = reduce_stage("mean_sum", x, attrs, out, ReduceOp::Sum);
  int64_t count = 1;
  for (int64_t a : attr_ints(attrs, "axis")) count *= x.shape()[a];
  return compute("mean", out.shape, [&](const std::vector<PrimVar>& i) {
    return total(as_exprs(i)) / make_const(x.dtype(), static_cast<double>(count));
  });
}

TypeRelation reduce_rel_for(Kind kind) {
  return [kind](const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
    return reduce_rel(args, attrs, ctx, kind);
  };
}

[[maybe_unused]] const Op* kSum =
    register_op(with_attrs({"sum", 1, OpPattern::CommReduce, reduce_rel_for(Kind::Sum),
                            reduce_compute(ReduceOp::Sum, "sum")},
                           reduce_attrs()));
[[maybe_unused]] const Op* kMean = register_op(with_attrs(
    {"mean", 1, OpPattern::CommReduce, reduce_rel_for(Kind::Mean), mean_compute}, reduce_attrs()));
[[maybe_unused]] const Op* kMax =
    register_op(with_attrs({"max", 1, OpPattern::CommReduce, reduce_rel_for(Kind::Max),
                            reduce_compute(ReduceOp::Max, "max")},
                           reduce_attrs()));
[[maybe_unused]] const Op* kMin =
    register_op(with_attrs({"min", 1, OpPattern::CommReduce, reduce_rel_for(Kind::Min),
                            reduce_compute(ReduceOp::Min, "min")},
                           reduce_attrs()));

}  // namespace
}  // namespace ember::ir
