// AlterOpLayout: see alter_op_layout.h.
#include "ember/passes/alter_op_layout.h"

#include "ember/ir/op.h"

namespace ember::passes {

using namespace ir;

namespace {

Expr pack_dense(const CallNode* c, const std::vector<Expr>& in, const MachineModel& machine) {
  if (!c->op || c->op->name != "nn.dense" || in.size() != 2) return nullptr;
  auto* w = as<ConstantNode>(in[1]);
  if (!w || w->type.is_tuple) return nullptr;
  const TensorType& wt = w->type.tensor();
  if (wt.ndim() != 2 || !is_float(wt.dtype)) return nullptr;
  int64_t n = wt.shape[0];
  int64_t block = vector_lanes_for(machine, n, wt.dtype);
  Expr packed = call("nn.pack_dense_weight", {in[1]}, Attrs().with("block", block), in[1]->name);
  return call("nn.dense_packed", {in[0], packed}, c->attrs.with("units", n), c->name);
}

}  // namespace

Function alter_op_layout(const Function& f, const MachineModel& machine) {
  return rewrite(f, [&](const Expr& e, const std::vector<Expr>& in) -> Expr {
    auto* c = as<CallNode>(e);
    if (!c) return nullptr;
    return pack_dense(c, in, machine);
  });
}

}  // namespace ember::passes
