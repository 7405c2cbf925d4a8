#include "ember/ir/transposed_loads.h"

#include <set>

#include "ember/ir/simplify.h"
#include "ember/runtime/dtype.h"

namespace ember::ir {

namespace {

// The vector loop under `outer` through unrolled loops only, and those loops.
const ForNode* vector_loop_under(const ForNode* outer, TransposedLoads& t) {
  for (const ForNode* f = outer->body.as<ForNode>(); f; f = f->body.as<ForNode>()) {
    if (f->for_kind == ForKind::Vectorized) return f;
    int64_t extent = 0;
    if (f->for_kind != ForKind::Unrolled || !as_int(f->extent, &extent) || extent < 1)
      return nullptr;
    t.between.push_back(f);
    t.combinations *= extent;
  }
  return nullptr;
}

}  // namespace

TransposedLoads transposed_loads(const ForNode* outer) {
  TransposedLoads t;
  const ForNode* vec = vector_loop_under(outer, t);
  int64_t lanes = 0, extent = 0;
  if ((outer->for_kind != ForKind::Serial && outer->for_kind != ForKind::Unrolled) || !vec ||
      !as_int(vec->extent, &lanes) || !as_int(outer->extent, &extent) || lanes < 4 || lanes > 64 ||
      (lanes & (lanes - 1)) || extent < lanes)
    return {};
  // Variables bound inside the vector loop, buffers it stores into, and whether it is guarded.
  std::set<const PrimVarNode*> inner{vec->var.get()};
  std::set<const BufferNode*> stored;
  std::vector<const LoadNode*> loads;
  bool plain = true;
  visit_prim(
      vec->body,
      [&](const PrimExpr& e) {
        if (auto* let = e.as<LetNode>()) inner.insert(let->var.get());
        if (auto* load = e.as<LoadNode>()) loads.push_back(load);
      },
      [&](const Stmt& s) {
        if (auto* let = s.as<LetStmtNode>()) inner.insert(let->var.get());
        if (auto* st = s.as<StoreNode>()) stored.insert(st->buffer.get());
        plain &= !s.as<IfThenElseNode>() && !s.as<ForNode>() && !s.as<AllocateNode>();
      });
  if (!plain) return {};
  std::set<const LoadNode*> seen;
  int64_t bytes = 0;
  for (const LoadNode* load : loads) {
    if (!seen.insert(load).second || stored.count(load->buffer.get())) continue;
    auto form = linear_form(load->index);
    if (!form) continue;
    int64_t step = 0, stride = 0;
    bool free = true;
    for (auto& [v, c] : form->coeff) {
      if (v == outer->var.get())
        step = c;
      else if (v == vec->var.get())
        stride = c;
      else
        free &= !inner.count(v);
    }
    const int64_t tile = t.combinations * lanes * lanes * dtype_bytes(load->buffer->dtype);
    if (!free || step != 1 || (stride >= -4 && stride <= 4) || bytes + tile > kMaxTransposedBytes)
      continue;
    bytes += tile;
    t.loads.push_back({load, stride});
  }
  if (t.loads.empty()) return {};
  t.vector_loop = vec;
  return t;
}

}  // namespace ember::ir
