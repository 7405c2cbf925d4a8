// AlterOpLayout: see alter_op_layout.h.
#include "ember/passes/alter_op_layout.h"

#include <map>
#include <set>
#include <string>

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

// The blocked value a from_blocked call converts back, or null.
Expr blocked_source(const Expr& e) {
  auto* c = as<CallNode>(e);
  return c && c->op && c->op->name == "from_blocked" ? c->args[0] : nullptr;
}

int64_t block_of(const Expr& blocked) { return blocked->type.tensor().shape[4]; }

Expr from_blocked(Expr blocked, const std::string& name) {
  return call("from_blocked", {std::move(blocked)}, {}, name);
}

// `x` [N, C, H, W] in blocks of `block` channels: the value a from_blocked came from when
// it has that block, else a to_blocked of x, one per (x, block) however many readers ask.
class Blocker {
 public:
  Expr operator()(const Expr& x, int64_t block) {
    Expr b = blocked_source(x);
    if (b && block_of(b) == block) return b;
    Expr& memo = memo_[{x.get(), block}];
    if (!memo) memo = call("to_blocked", {x}, Attrs().with("block", block), x->name);
    return memo;
  }

 private:
  std::map<std::pair<const ExprNode*, int64_t>, Expr> memo_;
};

Expr block_conv(const CallNode* c, const std::vector<Expr>& in, const MachineModel& machine,
                Blocker& to_blocked) {
  if (c->op->name != "nn.conv2d" || in.size() != 2 || c->attrs.get_int("groups", 1) != 1)
    return nullptr;
  if (!as<ConstantNode>(in[1]) || in[0]->type.is_tuple) return nullptr;
  const TensorType& x = in[0]->type.tensor();
  const TensorType& w = in[1]->type.tensor();
  if (x.ndim() != 4 || w.ndim() != 4 || !is_float(x.dtype)) return nullptr;
  int64_t ci = vector_lanes_for(machine, x.shape[1], x.dtype);
  int64_t co = vector_lanes_for(machine, w.shape[0], w.dtype);
  // Channels the block does not divide (the 3 of an RGB stem) keep the plain layout.
  if (x.shape[1] % ci != 0 || w.shape[0] % co != 0) return nullptr;
  Expr packed = call("nn.pack_conv_weight", {in[1]},
                     Attrs().with("in_block", ci).with("out_block", co), in[1]->name);
  Expr y = call("nn.conv2d_blocked", {to_blocked(in[0], ci), packed}, c->attrs, c->name);
  return from_blocked(y, c->name);
}

// The other operand of an elementwise op on a blocked value, blocked too: a tensor of the
// output's own shape [N, C, H, W] (a residual), a per-channel constant [C, 1, 1] or
// [1, C, 1, 1] as [1, C/c, 1, 1, c], or a scalar-shaped constant as it is. Null otherwise.
Expr blocked_operand(const Expr& e, const TensorType& out, int64_t block, Blocker& to_blocked) {
  if (e->type.is_tuple) return nullptr;
  if (e->type.tensor() == out) return to_blocked(e, block);
  if (!as<ConstantNode>(e)) return nullptr;
  const int64_t channels = out.shape[1];
  const auto& shape = e->type.tensor().shape;
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (numel == 1) return e;
  bool per_channel = (shape.size() == 3 && shape[0] == channels && shape[1] == 1 &&
                      shape[2] == 1) ||
                     (shape.size() == 4 && shape[0] == 1 && shape[1] == channels &&
                      shape[2] == 1 && shape[3] == 1);
  if (!per_channel) return nullptr;
  Expr r = call("reshape", {e}, Attrs().with("newshape", std::vector<int64_t>{1, channels, 1, 1}),
                e->name);
  return to_blocked(r, block);
}

// Elementwise ops keep the blocked layout: op(from_blocked(a), ...) = from_blocked(op(a, ...)).
Expr through_elementwise(const CallNode* c, const std::vector<Expr>& in, Blocker& to_blocked) {
  static const std::set<std::string> binary = {"add",     "subtract", "multiply",
                                               "divide",  "maximum",  "minimum"};
  if (c->op->pattern == OpPattern::ElemWise && in.size() == 1) {
    Expr a = blocked_source(in[0]);
    return a ? from_blocked(call(c->op, {a}, c->attrs, c->name), c->name) : nullptr;
  }
  if (!binary.count(c->op->name) || in.size() != 2 || c->type.is_tuple) return nullptr;
  const TensorType& out = c->type.tensor();
  Expr a = blocked_source(in[0]), b = blocked_source(in[1]);
  if (out.ndim() != 4) return nullptr;
  if (a && b) {
    if (a->type != b->type || in[0]->type.tensor() != out) return nullptr;
  } else if (a && in[0]->type.tensor() == out) {
    b = blocked_operand(in[1], out, block_of(a), to_blocked);
  } else if (b && in[1]->type.tensor() == out) {
    a = blocked_operand(in[0], out, block_of(b), to_blocked);
  } else {
    return nullptr;
  }
  if (!a || !b) return nullptr;
  return from_blocked(call(c->op, {a, b}, c->attrs, c->name), c->name);
}

}  // namespace

Function alter_op_layout(const Function& f, const MachineModel& machine) {
  Blocker to_blocked;
  return rewrite(f, [&](const Expr& e, const std::vector<Expr>& in) -> Expr {
    auto* c = as<CallNode>(e);
    if (!c || !c->op) return nullptr;
    if (Expr r = pack_dense(c, in, machine)) return r;
    if (Expr r = block_conv(c, in, machine, to_blocked)) return r;
    return through_elementwise(c, in, to_blocked);
  });
}

}  // namespace ember::passes
