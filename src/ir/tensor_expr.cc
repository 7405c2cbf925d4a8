#include "ember/ir/tensor_expr.h"

#include <cmath>
#include <limits>
#include <set>

#include "ember/support/error.h"

namespace ember::ir {

IterVar iter_var(const std::string& name, int64_t extent, bool reduce) {
  return std::make_shared<IterVarNode>(IterVarNode{PrimVar(name), extent, reduce});
}

std::vector<TensorRef> TensorNode::inputs() const {
  std::vector<TensorRef> out;
  if (!body) return out;
  visit_prim(body, [&](const PrimExpr& e) {
    if (auto* p = e.as<ProducerLoadNode>()) {
      for (auto& t : out)
        if (t == p->producer) return;
      out.push_back(p->producer);
    }
  });
  return out;
}

PrimExpr Tensor::operator()(std::vector<PrimExpr> indices) const {
  EMBER_CHECK(indices.size() == node_->shape.size(), "tensor ", node_->name, " has rank ",
              node_->shape.size(), " but is read with ", indices.size(), " indices");
  for (auto& i : indices) i = cast(DType::Int64, i);
  return PrimExpr(std::make_shared<ProducerLoadNode>(node_->dtype, node_, std::move(indices)));
}

Tensor placeholder(const std::string& name, std::vector<int64_t> shape, DType dtype) {
  auto n = std::make_shared<TensorNode>();
  n->name = name;
  n->dtype = dtype;
  n->shape = std::move(shape);
  return Tensor(n);
}

Tensor compute(const std::string& name, std::vector<int64_t> shape, const ComputeFn& fn) {
  auto n = std::make_shared<TensorNode>();
  n->name = name;
  std::vector<PrimVar> vars;
  static const char* kAxisNames[] = {"i", "j", "k", "l", "m", "n", "o", "p"};
  for (size_t d = 0; d < shape.size(); ++d) {
    std::string axis = d < 8 ? kAxisNames[d] : "i" + std::to_string(d);
    n->axes.push_back(iter_var(axis, shape[d]));
    vars.push_back(n->axes.back()->var);
  }
  n->shape = std::move(shape);
  n->body = fn(vars);
  EMBER_CHECK(n->body, "compute ", name, " returned no expression");
  n->dtype = n->body.dtype();
  return Tensor(n);
}

IterVar reduce_axis(int64_t extent, const std::string& name) {
  return iter_var(name, extent, true);
}

namespace {
PrimExpr make_reduce(ReduceOp op, PrimExpr source, std::vector<IterVar> axes) {
  for (auto& a : axes) EMBER_CHECK(a->reduce, "axis ", a->var.name(), " is not a reduce axis");
  return PrimExpr(std::make_shared<ReduceNode>(op, std::move(source), std::move(axes)));
}
}  // namespace

PrimExpr sum(PrimExpr source, std::vector<IterVar> axes) {
  return make_reduce(ReduceOp::Sum, std::move(source), std::move(axes));
}
PrimExpr max_reduce(PrimExpr source, std::vector<IterVar> axes) {
  return make_reduce(ReduceOp::Max, std::move(source), std::move(axes));
}
PrimExpr min_reduce(PrimExpr source, std::vector<IterVar> axes) {
  return make_reduce(ReduceOp::Min, std::move(source), std::move(axes));
}

PrimExpr reduce_identity(ReduceOp op, DType dtype) {
  switch (op) {
    case ReduceOp::Sum:
      return make_const(dtype, 0);
    case ReduceOp::Max:
      if (is_float(dtype)) return make_const(dtype, -std::numeric_limits<double>::infinity());
      return PrimExpr(std::make_shared<IntImmNode>(dtype, int_min(dtype)));
    case ReduceOp::Min:
      if (is_float(dtype)) return make_const(dtype, std::numeric_limits<double>::infinity());
      return PrimExpr(std::make_shared<IntImmNode>(dtype, int_max(dtype)));
  }
  return PrimExpr();
}

std::vector<Tensor> topo_order(const std::vector<Tensor>& outputs) {
  std::vector<Tensor> order;
  std::set<const TensorNode*> seen;
  std::function<void(const TensorRef&)> visit = [&](const TensorRef& t) {
    if (!seen.insert(t.get()).second) return;
    for (auto& in : t->inputs()) visit(in);
    order.push_back(Tensor(t));
  };
  for (auto& o : outputs) visit(o.ref());
  return order;
}

}  // namespace ember::ir
