// BF16Products: see bf16_products.h.
#include "ember/passes/bf16_products.h"

#include <string>
#include <vector>

#include "ember/ir/op.h"
#include "ember/passes/alter_op_layout.h"

namespace ember::passes {

using namespace ir;

namespace {

// The bfloat16 tensor `e` widens to float32 (cast(X)), or null.
Expr widened(const Expr& e) {
  auto* c = op_call(e, "cast");
  if (!c || e->type.tensor().dtype != DType::Float32) return nullptr;
  return c->args[0]->type.tensor().dtype == DType::BFloat16 ? c->args[0] : nullptr;
}

Expr bf16_dense(const CallNode* c) {
  if (!c || !c->op || c->args.size() != 2) return nullptr;
  const bool matmul = c->op->name == "nn.matmul";
  if (!matmul && c->op->name != "nn.dense") return nullptr;
  Expr x = widened(c->args[0]), w = widened(c->args[1]);
  if (!x || !w || !as<ConstantNode>(w) || w->type.tensor().ndim() != 2) return nullptr;
  if (x->type.tensor().ndim() < 1) return nullptr;
  const std::string& name = c->name;
  if (matmul)  // x @ V with V [K, N]: the dense of V's transpose (folded: a constant)
    w = call("transpose", {w}, Attrs().with("axes", std::vector<int64_t>{1, 0}), w->name);
  return call(
      "nn.dense_bf16",
      {call("nn.pack_bf16_pairs", {x}, {}, name), call("nn.pack_bf16_pairs", {w}, {}, w->name)}, {},
      name);
}

// A conv (groups 1) over words of two channels, where AlterOpLayout blocks it (any image
// size) or the NCHW form's vectors, which run along the output's rows, fill. Grouped and
// depthwise convs keep the float32 conv of the widened values.
Expr bf16_conv(const CallNode* c, const MachineModel& machine) {
  if (!c || !c->op || c->op->name != "nn.conv2d" || c->args.size() != 2) return nullptr;
  if (c->attrs.get_int("groups", 1) != 1) return nullptr;
  Expr x = widened(c->args[0]), w = widened(c->args[1]);
  if (!x || !w || !as<ConstantNode>(w) || w->type.tensor().ndim() != 4) return nullptr;
  const TensorType& out = c->type.tensor();
  if (!blocks_word_conv(machine, x->type.tensor().shape[1], out.shape[1], 2) &&
      out.shape[3] < machine.lanes(DType::Float32))
    return nullptr;
  const Attrs channels = Attrs().with("axis", int64_t{1});
  const std::string& name = c->name;
  return call("nn.conv2d_bf16",
              {call("nn.pack_bf16_pairs", {x}, channels, name),
               call("nn.pack_bf16_pairs", {w}, channels, w->name)},
              c->attrs, name);
}

}  // namespace

Function bf16_products(const Function& f, bool bf16_dot, const MachineModel& machine) {
  if (!bf16_dot) return f;
  return rewrite(f, [&](const Expr& e, const std::vector<Expr>& in) -> Expr {
    auto* c = as<CallNode>(e);
    if (!c || !c->op) return nullptr;
    Expr node = with_inputs(e, in);
    if (Expr r = bf16_dense(as<CallNode>(node))) return r;
    if (Expr r = bf16_conv(as<CallNode>(node), machine)) return r;
    return node != e ? node : nullptr;
  });
}

}  // namespace ember::passes
