// vectorize_row_invariants (row_invariants.h). Fused, log-sum-exp plus a bias row over 4
// rows of 16 values (log_sum_exp_partial_other_max_axis) ran the four rows' logs as a
// scalar chain each, slower than its unfused kernels, where LLVM vectorizes the log
// kernel's 4 rows (calibration: row invariants).
#include "ember/passes/row_invariants.h"

#include <algorithm>
#include <set>

#include "ember/ir/chains.h"
#include "ember/runtime/dtype.h"

namespace ember::passes {

using namespace ir;

namespace {

// What a row loop's body binds and writes, none of which an invariant may use.
struct RowLoopBody {
  std::set<const PrimVarNode*> bound;
  std::set<const BufferNode*> written;
  bool guarded = false;  // a guard or a loop that may not run: a value a row may skip
  bool vectorized = false;
};

RowLoopBody scan(const Stmt& body) {
  RowLoopBody b;
  visit_prim(
      body,
      [&](const PrimExpr& e) {
        if (auto* let = e.as<LetNode>()) b.bound.insert(let->var.get());
      },
      [&](const Stmt& s) {
        int64_t extent = 0;
        if (auto* f = s.as<ForNode>()) {
          b.bound.insert(f->var.get());
          b.guarded |= !as_int(f->extent, &extent) || extent < 1;
          b.vectorized |= f->for_kind == ForKind::Vectorized;
        }
        if (auto* let = s.as<LetStmtNode>()) b.bound.insert(let->var.get());
        if (auto* st = s.as<StoreNode>()) b.written.insert(st->buffer.get());
        if (auto* a = s.as<AllocateNode>()) b.written.insert(a->buffer.get());
        b.guarded |= s.as<IfThenElseNode>() != nullptr;
      });
  return b;
}

// Replaces the row invariants of the stores in vector loops under one row loop by loads of
// their per-row buffers (`hoisted`, one per distinct value).
class Hoister : public PrimMutator {
 public:
  struct Hoisted {
    PrimExpr value;
    Buffer buffer;
  };
  Hoister(const ForNode* rows, const RowLoopBody& body, const MachineModel& machine)
      : loop_(rows), body_(body), machine_(machine) {
    as_int(rows->extent, &rows_);
  }
  std::vector<Hoisted> hoisted;

  PrimExpr mutate(const PrimExpr& e) override {
    if (vectors_ > 0 && is_invariant(e)) return load(buffer_for(e), row() - loop_->min);
    return PrimMutator::mutate(e);
  }
  using PrimMutator::mutate;

 protected:
  Stmt visit_for(const Stmt& s, const ForNode* op) override {
    const int v = op->for_kind == ForKind::Vectorized ? 1 : 0;
    vectors_ += v;
    Stmt out = PrimMutator::visit_for(s, op);
    vectors_ -= v;
    return out;
  }

 private:
  PrimExpr row() const { return loop_->var; }

  bool is_invariant(const PrimExpr& e) const {
    if (!is_float(e.dtype()) || e.as<LoadNode>()) return false;
    const int64_t lanes = machine_.lanes(e.dtype());
    if (rows_ > 2 * lanes || chain_length(e) < kLongChain) return false;
    std::set<const PrimVarNode*> own;
    bool uses_row = false;
    return closed(e, own, uses_row) && uses_row;
  }

  // Does `e` use only the row, variables bound outside the row loop and its own lets, and
  // read no buffer the row loop writes? Sets `uses_row` when it uses the row.
  bool closed(const PrimExpr& e, std::set<const PrimVarNode*>& own, bool& uses_row) const {
    if (auto* v = e.as<PrimVarNode>()) {
      if (v == loop_->var.get()) uses_row = true;
      return v == loop_->var.get() || own.count(v) || !body_.bound.count(v);
    }
    if (auto* l = e.as<LoadNode>(); l && body_.written.count(l->buffer.get())) return false;
    if (auto* let = e.as<LetNode>()) own.insert(let->var.get());
    for (const PrimExpr& x : operands(e))
      if (!closed(x, own, uses_row)) return false;
    return true;
  }

  const Buffer& buffer_for(const PrimExpr& e) {
    for (const Hoisted& h : hoisted)
      if (structural_equal(h.value, e)) return h.buffer;
    std::string name = loop_->var.name() + ".invariant" + std::to_string(hoisted.size());
    hoisted.push_back({e, make_buffer(name, e.dtype(), {rows_}, BufferScope::Local)});
    return hoisted.back().buffer;
  }

  const ForNode* loop_;
  const RowLoopBody& body_;
  const MachineModel& machine_;
  int64_t rows_ = 0;
  int vectors_ = 0;
};

class RowInvariants : public PrimMutator {
 public:
  explicit RowInvariants(const MachineModel& machine) : machine_(machine) {}

 protected:
  Stmt visit_for(const Stmt& s, const ForNode* op) override {
    Stmt inner = PrimMutator::visit_for(s, op);  // row loops inside this one first
    auto* f = inner.as<ForNode>();
    int64_t rows = 0;
    if (f->for_kind != ForKind::Serial || !as_int(f->extent, &rows) || rows < 2) return inner;
    RowLoopBody body = scan(f->body);
    if (body.guarded || !body.vectorized) return inner;
    Hoister h(f, body, machine_);
    Stmt rest = h.mutate(f->body);
    if (h.hoisted.empty()) return inner;
    // All rows' values as one vector loop, then the row loop reading them.
    std::vector<Stmt> steps;
    for (const auto& [value, buffer] : h.hoisted) {
      PrimVar r(f->var.name() + ".v", f->var.dtype());
      PrimExpr at_r = substitute(value, {{f->var.get(), PrimExpr(r) + f->min}});
      steps.push_back(for_loop(r, make_const(r.dtype(), 0), f->extent, ForKind::Vectorized,
                               store(buffer, r, at_r)));
    }
    steps.push_back(for_loop(f->var, f->min, f->extent, f->for_kind, rest));
    Stmt out = seq(steps);
    for (const auto& hoisted : h.hoisted) out = allocate(hoisted.buffer, out);
    return out;
  }

 private:
  const MachineModel& machine_;
};

}  // namespace

PrimFunc vectorize_row_invariants(const PrimFunc& f, const MachineModel& machine) {
  PrimFunc out = f;
  out.body = RowInvariants(machine).mutate(f.body);
  return out;
}

}  // namespace ember::passes
