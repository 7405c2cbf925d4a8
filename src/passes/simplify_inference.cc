// SimplifyInference: inference-only ops become plain arithmetic that later passes understand.
// BatchNorm turns into a multiply by a per-channel scale and an add of a per-channel shift,
// which FoldConstant evaluates and FoldScaleAxis folds into the preceding conv's weights.
#include "ember/passes/simplify_inference.h"

#include <set>
#include <string>

#include "ember/ir/op.h"
#include "ember/support/error.h"

namespace ember::passes {

using namespace ir;

namespace {

// Ops that are the identity at inference time (dropout only acts in training).
const std::set<std::string>& identity_ops() {
  static const std::set<std::string> ops = {"nn.dropout", "dropout", "nn.identity", "identity"};
  return ops;
}

// A [C] tensor reshaped to [C, 1, ..., 1] so that NumPy broadcasting applies it along `axis`
// of an `ndim`-D tensor (leading dimensions broadcast by themselves).
Expr along_axis(const Expr& v, int64_t axis, int64_t ndim, const std::string& name) {
  if (axis == ndim - 1) return v;
  std::vector<int64_t> shape{v->type.tensor().shape[0]};
  shape.resize(static_cast<size_t>(ndim - axis), 1);
  return call("reshape", {v}, Attrs({{"newshape", shape}}), name);
}

// x * scale + shift with scale = gamma / sqrt(var + eps), shift = beta - mean * scale.
Expr expand_batch_norm(const CallNode* bn, const std::vector<Expr>& in) {
  const Expr &x = in[0], &gamma = in[1], &beta = in[2], &mean = in[3], &var = in[4];
  const std::string& name = bn->name;
  const TensorType& data = x->type.tensor();
  int64_t axis = bn->attrs.get_int("axis", 1);
  double eps_value = bn->attrs.get_float("epsilon", 1e-5);

  // eps as a one-element tensor in the data dtype, broadcast against var.
  runtime::NDArray eps_tensor = runtime::NDArray::empty({1}, data.dtype);
  switch (data.dtype) {
    case DType::Float32:
      *eps_tensor.data_as<float>() = static_cast<float>(eps_value);
      break;
    case DType::Float64:
      *eps_tensor.data_as<double>() = eps_value;
      break;
    default:
      EMBER_CHECK(false, "batch_norm '", name, "' on non-float data passed its type check");
  }
  Expr eps = constant(eps_tensor, name);
  Expr scale = call("divide", {gamma, call("sqrt", {call("add", {var, eps}, {}, name)}, {}, name)},
                    {}, name);
  Expr shift = call("subtract", {beta, call("multiply", {mean, scale}, {}, name)}, {}, name);
  Expr scaled = call("multiply", {x, along_axis(scale, axis, data.ndim(), name)}, {}, name);
  return call("add", {scaled, along_axis(shift, axis, data.ndim(), name)}, {}, name);
}

}  // namespace

Function simplify_inference(const Function& f) {
  return rewrite(f, [](const Expr& e, const std::vector<Expr>& in) -> Expr {
    auto* c = as<CallNode>(e);
    if (!c || !c->op) return nullptr;
    if (c->op->name == "nn.batch_norm") return expand_batch_norm(c, in);
    if (identity_ops().count(c->op->name) && in.size() == 1 && in[0]->type == e->type) return in[0];
    return nullptr;
  });
}

}  // namespace ember::passes
