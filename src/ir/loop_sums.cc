#include "ember/ir/loop_sums.h"

#include <cmath>
#include <map>
#include <vector>

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
  for (int n : {kMaxSumAccumulators, 2})
    if (extent >= 2 * n * lanes) return n;
  return 1;
}

bool never_nan(const PrimExpr& e, const std::set<const BufferNode*>& nan_free) {
  if (!is_float(e.dtype())) return true;
  if (auto* f = e.as<FloatImmNode>()) return !std::isnan(f->value);
  if (auto* l = e.as<LoadNode>()) return nan_free.count(l->buffer.get()) > 0;
  if (auto* c = e.as<CastNode>()) return !is_float(c->value.dtype());
  if (auto* b = e.as<BinaryNode>())
    return (b->op == BinaryOp::Max || b->op == BinaryOp::Min) && never_nan(b->a, nan_free) &&
           never_nan(b->b, nan_free);
  auto* sel = e.as<SelectNode>();
  if (!sel) return false;
  auto* test = sel->cond.as<PrimCallNode>();
  if (test && test->op == Intrinsic::IsNan && structural_equal(test->args[0], sel->f))
    return never_nan(sel->t, nan_free);  // select(isnan(x), c, x)
  return never_nan(sel->t, nan_free) && never_nan(sel->f, nan_free);
}

std::set<const BufferNode*> nan_free_buffers(const Stmt& body) {
  std::map<const BufferNode*, std::vector<PrimExpr>> stored;
  std::set<const BufferNode*> local;
  visit_prim(
      body, [](const PrimExpr&) {},
      [&](const Stmt& s) {
        if (auto* a = s.as<AllocateNode>(); a && is_float(a->buffer->dtype))
          local.insert(a->buffer.get());
        if (auto* st = s.as<StoreNode>()) stored[st->buffer.get()].push_back(st->value);
      });
  // Start from every local buffer and drop the ones a possibly-NaN value is stored into,
  // until none is dropped (a buffer's own accumulation assumes itself NaN-free).
  std::set<const BufferNode*> out;
  for (const BufferNode* b : local)
    if (stored.count(b)) out.insert(b);
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = out.begin(); it != out.end();) {
      bool ok = true;
      for (const PrimExpr& v : stored[*it]) ok &= never_nan(v, out);
      if (ok) {
        ++it;
      } else {
        it = out.erase(it);
        changed = true;
      }
    }
  }
  return out;
}

}  // namespace ember::ir
