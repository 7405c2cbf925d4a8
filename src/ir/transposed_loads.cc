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

namespace {

bool uses_any(const PrimExpr& e, const std::set<const PrimVarNode*>& vars) {
  bool found = false;
  visit_prim(e, [&](const PrimExpr& x) {
    if (auto* v = x.as<PrimVarNode>(); v && vars.count(v)) found = true;
  });
  return found;
}

// A store of a lane-varying value to a lane-invariant index (e.g. `acc[0] = acc[0] + x[i]`)
// makes the lanes race for one element: such a loop is not vectorizable as written and is
// emitted as a serial loop, which keeps the program's meaning.
class LaneCollisions : public PrimVisitor {
 public:
  explicit LaneCollisions(const PrimVarNode* lane) : varying_{lane} {}
  bool found = false;

  using PrimVisitor::visit;
  void visit(const Stmt& s) override {
    if (!found) PrimVisitor::visit(s);
  }
  void visit(const PrimExpr&) override {}  // stores are statements: expressions hold none

 protected:
  void visit_store(const StoreNode* op) override {
    found |= !uses_any(op->index, varying_) && uses_any(op->value, varying_);
  }
  // A let of a lane-varying value varies too.
  void visit_let_stmt(const LetStmtNode* op) override {
    if (uses_any(op->value, varying_)) varying_.insert(op->var.get());
    visit(op->body);
  }

 private:
  std::set<const PrimVarNode*> varying_;
};

}  // namespace

bool lanes_collide(const ForNode* vector_loop) {
  LaneCollisions c(vector_loop->var.get());
  c.visit(vector_loop->body);
  return c.found;
}

}  // namespace ember::ir
