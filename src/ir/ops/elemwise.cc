// Elementwise ops: broadcasting binary arithmetic and float unary functions.
#include <string>
#include <vector>

#include "ember/ir/op.h"
#include "ember/ir/prim_math.h"

namespace ember::ir {
namespace {

const TensorType& tensor_arg(const std::vector<Type>& args, size_t i, const char* what,
                             const TypeContext& ctx) {
  if (args[i].is_tuple) ctx.fail(std::string(what) + " must be a tensor, not a tuple");
  return args[i].tensor();
}

void check_arity(const std::vector<Type>& args, size_t n, const TypeContext& ctx) {
  if (args.size() != n)
    ctx.fail("takes " + std::to_string(n) + " input(s) but was given " +
             std::to_string(args.size()));
}

// "nn.relu" -> "relu": the stage (and kernel) name.
std::string stage_name(const std::string& op) {
  return op.rfind("nn.", 0) == 0 ? op.substr(3) : op;
}

// Index of `t` for output index `idx` under NumPy broadcasting (size-1 dimensions read 0).
std::vector<PrimExpr> broadcast_index(const Tensor& t, const std::vector<PrimVar>& idx) {
  size_t offset = idx.size() - t.shape().size();
  std::vector<PrimExpr> out;
  for (size_t d = 0; d < t.shape().size(); ++d)
    out.push_back(t.shape()[d] == 1 ? PrimExpr(int64_t{0}) : PrimExpr(idx[offset + d]));
  return out;
}

// ---------------------------------------------------------------- binary (Broadcast)

Type binary_rel(const std::vector<Type>& args, Attrs&, const TypeContext& ctx) {
  check_arity(args, 2, ctx);
  const TensorType& a = tensor_arg(args, 0, "the first input", ctx);
  const TensorType& b = tensor_arg(args, 1, "the second input", ctx);
  if (a.dtype != b.dtype)
    ctx.fail("input dtypes differ: " + to_string(a) + " vs " + to_string(b) +
             "; cast one input so that both have the same dtype");
  if (a.dtype == DType::Bool)
    ctx.fail("arithmetic on bool tensors is not supported; cast the inputs to float32");
  // Integer division would have to choose between torch's true and floor division.
  if (ctx.op_name == "divide" && !is_float(a.dtype))
    ctx.fail("integer division is not supported (inputs are " + std::string(dtype_name(a.dtype)) +
             "); cast the inputs to a float dtype");
  return TensorType{broadcast_shapes(a.shape, b.shape, ctx), a.dtype};
}

ComputeRule binary_compute(BinaryOp op, std::string name) {
  return [op, name](const std::vector<Tensor>& in, const Attrs&, const TensorType& out) {
    const Tensor &a = in[0], &b = in[1];
    return compute(name, out.shape, [&](const std::vector<PrimVar>& i) {
      return binary(op, a(broadcast_index(a, i)), b(broadcast_index(b, i)));
    });
  };
}

const Op* register_binary(const std::string& name, BinaryOp op) {
  return register_op({name, 2, OpPattern::Broadcast, binary_rel, binary_compute(op, name)});
}

[[maybe_unused]] const Op* kAdd = register_binary("add", BinaryOp::Add);
[[maybe_unused]] const Op* kSubtract = register_binary("subtract", BinaryOp::Sub);
[[maybe_unused]] const Op* kMultiply = register_binary("multiply", BinaryOp::Mul);
[[maybe_unused]] const Op* kDivide = register_binary("divide", BinaryOp::Div);

// ---------------------------------------------------------------- unary float (ElemWise)

Type unary_float_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 1, ctx);
  const TensorType& x = tensor_arg(args, 0, "the input", ctx);
  if (!is_float(x.dtype))
    ctx.fail("the input is " + to_string(x) +
             " but the op needs a float tensor (float32 or float64); cast the input to float32");
  if (ctx.op_name == "clip") {
    if (!attrs.has("a_min") || !attrs.has("a_max"))
      ctx.fail("needs both the a_min and a_max attributes");
    // Store as floats so the compute rule reads one representation.
    attrs = attrs.with("a_min", attrs.get_float("a_min", 0.0))
                .with("a_max", attrs.get_float("a_max", 0.0));
  }
  return x;
}

using UnaryFn = std::function<PrimExpr(const PrimExpr& x, const Attrs& attrs)>;

const Op* register_unary(const std::string& name, UnaryFn fn) {
  std::string stage = stage_name(name);
  ComputeRule rule = [fn, stage](const std::vector<Tensor>& in, const Attrs& attrs,
                                 const TensorType& out) {
    const Tensor& x = in[0];
    return compute(stage, out.shape, [&](const std::vector<PrimVar>& i) {
      return fn(x(std::vector<PrimExpr>(i.begin(), i.end())), attrs);
    });
  };
  return register_op({name, 1, OpPattern::ElemWise, unary_float_rel, rule});
}

// Max and Min propagate NaN (loop.h), so relu and clip pass NaN through like torch.
[[maybe_unused]] const Op* kRelu = register_unary(
    "nn.relu", [](const PrimExpr& x, const Attrs&) { return max(x, make_const(x.dtype(), 0.0)); });
[[maybe_unused]] const Op* kSigmoid =
    register_unary("sigmoid", [](const PrimExpr& x, const Attrs&) { return sigmoid(x); });
[[maybe_unused]] const Op* kTanh =
    register_unary("tanh", [](const PrimExpr& x, const Attrs&) { return tanh(x); });
[[maybe_unused]] const Op* kExp =
    register_unary("exp", [](const PrimExpr& x, const Attrs&) { return exp(x); });
[[maybe_unused]] const Op* kSqrt =
    register_unary("sqrt", [](const PrimExpr& x, const Attrs&) { return sqrt(x); });
[[maybe_unused]] const Op* kRsqrt =
    register_unary("rsqrt", [](const PrimExpr& x, const Attrs&) { return rsqrt(x); });
[[maybe_unused]] const Op* kClip =
    register_unary("clip", [](const PrimExpr& x, const Attrs& attrs) {
      PrimExpr lo = make_const(x.dtype(), attrs.get_float("a_min", 0.0));
      PrimExpr hi = make_const(x.dtype(), attrs.get_float("a_max", 0.0));
      return min(max(x, lo), hi);  // torch.clamp: a_min > a_max gives a_max everywhere
    });

}  // namespace
}  // namespace ember::ir
