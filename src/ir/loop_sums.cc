#include "ember/ir/loop_sums.h"

#include "ember/runtime/dtype.h"

namespace ember::ir {

Accumulation accumulation_of(const StoreNode* st) {
  if (!is_float(st->buffer->dtype)) return Accumulation::None;
  auto is_acc = [&](const PrimExpr& e) {
    auto* l = e.as<LoadNode>();
    return l && l->buffer.get() == st->buffer.get() && structural_equal(l->index, st->index);
  };
  if (auto* bin = st->value.as<BinaryNode>()) {
    const bool acc = is_acc(bin->a) || is_acc(bin->b);
    if (!acc) return Accumulation::None;
    return bin->op == BinaryOp::Add   ? Accumulation::Add
           : bin->op == BinaryOp::Max ? Accumulation::Max
           : bin->op == BinaryOp::Min ? Accumulation::Min
                                      : Accumulation::None;
  }
  auto* fma = st->value.as<PrimCallNode>();
  return fma && fma->op == Intrinsic::Fma && is_acc(fma->args[2]) ? Accumulation::Fma
                                                                  : Accumulation::None;
}

bool is_rolled_scalar_sum(const ForNode* loop) {
  int64_t extent = 0;
  auto* st = loop->body.as<StoreNode>();
  if (!st || !as_int(loop->extent, &extent) || extent < 8) return false;
  bool moves = false;
  visit_prim(st->index, [&](const PrimExpr& e) { moves |= e.get() == loop->var.get(); });
  return !moves && accumulation_of(st) != Accumulation::None;
}

int rolled_sum_interleave(int64_t extent, int64_t lanes) {
  for (int n : {4, 2})
    if (extent >= 2 * n * lanes) return n;
  return 1;
}

}  // namespace ember::ir
