// The neural-network ops outside the conv, dense, pool and norm families (nn_conv.cc,
// nn_dense.cc, nn_pool.cc, nn_norm.cc): nn.bias_add and constant padding, nn.pad. Shapes and
// numerics follow torch.nn.functional.
#include <string>
#include <vector>

#include "nn_util.h"

namespace ember::ir {
namespace {

using namespace ops;

// ---------------------------------------------------------------- bias_add

Type bias_add_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 2, ctx);
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  const TensorType& bias = tensor_arg(args, 1, "bias", ctx);
  if (data.dtype == DType::Bool) ctx.fail("data is " + to_string(data) + "; cast it to float32");
  int64_t axis = normalize_axis(attr_int(attrs, "axis"), data.ndim(), ctx);
  attrs = attrs.with("axis", axis);
  check_channel_param(data, axis, bias, "the bias", ctx);
  return data;
}

Tensor bias_add_compute(const std::vector<Tensor>& in, const Attrs& attrs, const TensorType& out) {
  const Tensor &data = in[0], &bias = in[1];
  int64_t axis = attr_int(attrs, "axis");
  return compute("bias_add", out.shape, [&](const std::vector<PrimVar>& i) {
    return data(as_exprs(i)) + bias({i[axis]});
  });
}

// ---------------------------------------------------------------- pad

// pad_width is flat [before_0, after_0, before_1, after_1, ...], one pair per axis;
// negative widths crop (F.pad). Only constant padding.
Type pad_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 1, ctx);
  const TensorType& x = tensor_arg(args, 0, "data", ctx);
  std::string mode = attr_str(attrs, "pad_mode");
  if (mode != "constant")
    ctx.fail("pad_mode '" + mode + "' is not supported; only 'constant' padding is");
  std::vector<int64_t> width = attr_ints(attrs, "pad_width");
  if (static_cast<int64_t>(width.size()) != 2 * x.ndim())
    ctx.fail("pad_width " + ints_str(width) + " has " + std::to_string(width.size()) +
             " values but data " + to_string(x) + " needs " + std::to_string(2 * x.ndim()) +
             " (a before and an after width for each axis)");
  std::vector<int64_t> shape = x.shape;
  for (int64_t d = 0; d < x.ndim(); ++d) {
    shape[d] += width[2 * d] + width[2 * d + 1];
    if (shape[d] < 0)
      ctx.fail("pad_width " + ints_str(width) + " crops axis " + std::to_string(d) + " of " +
               to_string(x) + " to a negative size " + std::to_string(shape[d]));
    if (x.shape[d] == 0 && shape[d] > 0)
      ctx.fail("axis " + std::to_string(d) + " of " + to_string(x) +
               " is empty; padding an empty axis is not supported");
  }
  attrs = attrs.with("pad_width", width)
              .with("pad_value", attr_float(attrs, "pad_value"))
              .with("pad_mode", mode);
  return TensorType{shape, x.dtype};
}

// Select evaluates both sides, so the load reads clamped (always valid) indices; only the
// sides that are padded get a guard.
Tensor pad_compute(const std::vector<Tensor>& in, const Attrs& attrs, const TensorType& out) {
  const Tensor& x = in[0];
  auto width = attr_ints(attrs, "pad_width");
  PrimExpr fill = make_const(x.dtype(), attr_float(attrs, "pad_value"));
  return compute("pad", out.shape, [&](const std::vector<PrimVar>& i) {
    PrimExpr inside = make_const(DType::Bool, 1);
    std::vector<PrimExpr> xi;
    for (size_t d = 0; d < i.size(); ++d) {
      int64_t before = width[2 * d], size = x.shape()[d];
      PrimExpr y = i[d] - idx(before);
      if (before > 0) {
        inside = logical_and(inside, y >= idx(0));
        y = max(y, idx(0));
      }
      if (before + size < out.shape[d]) {
        inside = logical_and(inside, y < idx(size));
        y = min(y, idx(size - 1));
      }
      xi.push_back(y);
    }
    return select(inside, x(xi), fill);
  });
}

// ---------------------------------------------------------------- registration

[[maybe_unused]] const Op* kBiasAdd =
    register_op(with_attrs({"nn.bias_add", 2, OpPattern::Broadcast, bias_add_rel, bias_add_compute},
                           {int_attr("axis", 1, "the channel axis of data")}));
[[maybe_unused]] const Op* kPad = register_op(
    with_attrs({"nn.pad", 1, OpPattern::Injective, pad_rel, pad_compute},
               {required_attr("pad_width", AttrKind::Ints,
                              "[before_0, after_0, before_1, after_1, ...], one pair per axis"),
                float_attr("pad_value", 0.0, "the fill value"),
                str_attr("pad_mode", "constant", "only \"constant\"")}));

}  // namespace
}  // namespace ember::ir
