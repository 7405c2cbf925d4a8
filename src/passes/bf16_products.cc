// BF16Products: see bf16_products.h.
#include "ember/passes/bf16_products.h"

#include <string>
#include <vector>

#include "ember/ir/op.h"

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

}  // namespace

Function bf16_products(const Function& f, bool bf16_dot) {
  if (!bf16_dot) return f;
  return rewrite(f, [&](const Expr& e, const std::vector<Expr>& in) -> Expr {
    auto* c = as<CallNode>(e);
    if (!c || !c->op) return nullptr;
    Expr node = with_inputs(e, in);
    if (Expr r = bf16_dense(as<CallNode>(node))) return r;
    return node != e ? node : nullptr;
  });
}

}  // namespace ember::passes
