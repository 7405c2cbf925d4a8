// Traversal of the loop IR: PrimVisitor and PrimMutator (one method per node kind), and the
// helpers built on them (visit_prim, substitute).
#include "ember/ir/loop.h"
#include "ember/ir/tensor_expr.h"

namespace ember::ir {

std::vector<PrimExpr> operands(const PrimExpr& x) {
  if (!x) return {};
  switch (x.kind()) {
    case PrimKind::Binary:
      return {x.as<BinaryNode>()->a, x.as<BinaryNode>()->b};
    case PrimKind::Compare:
      return {x.as<CompareNode>()->a, x.as<CompareNode>()->b};
    case PrimKind::Not:
      return {x.as<NotNode>()->a};
    case PrimKind::Select:
      return {x.as<SelectNode>()->cond, x.as<SelectNode>()->t, x.as<SelectNode>()->f};
    case PrimKind::Cast:
      return {x.as<CastNode>()->value};
    case PrimKind::Reinterpret:
      return {x.as<ReinterpretNode>()->value};
    case PrimKind::Load:
      return {x.as<LoadNode>()->index};
    case PrimKind::Call:
      return x.as<PrimCallNode>()->args;
    case PrimKind::Let:
      return {x.as<LetNode>()->value, x.as<LetNode>()->body};
    default:
      return {};
  }
}

// ---------------------------------------------------------------------------------- visitor

void PrimVisitor::visit(const PrimExpr& e) {
  if (!e) return;
  switch (e.kind()) {
    case PrimKind::IntImm:
      return visit_int_imm(e.as<IntImmNode>());
    case PrimKind::FloatImm:
      return visit_float_imm(e.as<FloatImmNode>());
    case PrimKind::Var:
      return visit_var(e.as<PrimVarNode>());
    case PrimKind::Binary:
      return visit_binary(e.as<BinaryNode>());
    case PrimKind::Compare:
      return visit_compare(e.as<CompareNode>());
    case PrimKind::Not:
      return visit_not(e.as<NotNode>());
    case PrimKind::Select:
      return visit_select(e.as<SelectNode>());
    case PrimKind::Cast:
      return visit_cast(e.as<CastNode>());
    case PrimKind::Reinterpret:
      return visit_reinterpret(e.as<ReinterpretNode>());
    case PrimKind::Load:
      return visit_load(e.as<LoadNode>());
    case PrimKind::Call:
      return visit_call(e.as<PrimCallNode>());
    case PrimKind::Let:
      return visit_let(e.as<LetNode>());
    case PrimKind::ProducerLoad:
      return visit_producer_load(e.as<ProducerLoadNode>());
    case PrimKind::Reduce:
      return visit_reduce(e.as<ReduceNode>());
  }
}

void PrimVisitor::visit(const Stmt& s) {
  if (!s) return;
  switch (s.kind()) {
    case StmtKind::For:
      return visit_for(s.as<ForNode>());
    case StmtKind::Store:
      return visit_store(s.as<StoreNode>());
    case StmtKind::Allocate:
      return visit_allocate(s.as<AllocateNode>());
    case StmtKind::LetStmt:
      return visit_let_stmt(s.as<LetStmtNode>());
    case StmtKind::IfThenElse:
      return visit_if_then_else(s.as<IfThenElseNode>());
    case StmtKind::Seq:
      return visit_seq(s.as<SeqNode>());
    case StmtKind::Evaluate:
      return visit_evaluate(s.as<EvaluateNode>());
  }
}

void PrimVisitor::visit_binary(const BinaryNode* op) {
  visit(op->a);
  visit(op->b);
}
void PrimVisitor::visit_compare(const CompareNode* op) {
  visit(op->a);
  visit(op->b);
}
void PrimVisitor::visit_not(const NotNode* op) { visit(op->a); }
void PrimVisitor::visit_select(const SelectNode* op) {
  visit(op->cond);
  visit(op->t);
  visit(op->f);
}
void PrimVisitor::visit_cast(const CastNode* op) { visit(op->value); }
void PrimVisitor::visit_reinterpret(const ReinterpretNode* op) { visit(op->value); }
void PrimVisitor::visit_load(const LoadNode* op) { visit(op->index); }
void PrimVisitor::visit_call(const PrimCallNode* op) {
  for (auto& a : op->args) visit(a);
}
void PrimVisitor::visit_let(const LetNode* op) {
  visit(op->value);
  visit(op->body);
}
void PrimVisitor::visit_producer_load(const ProducerLoadNode* op) {
  for (auto& i : op->indices) visit(i);
}
void PrimVisitor::visit_reduce(const ReduceNode* op) { visit(op->source); }

void PrimVisitor::visit_for(const ForNode* op) {
  visit(op->min);
  visit(op->extent);
  visit(op->body);
}
void PrimVisitor::visit_store(const StoreNode* op) {
  visit(op->index);
  visit(op->value);
}
void PrimVisitor::visit_allocate(const AllocateNode* op) { visit(op->body); }
void PrimVisitor::visit_let_stmt(const LetStmtNode* op) {
  visit(op->value);
  visit(op->body);
}
void PrimVisitor::visit_if_then_else(const IfThenElseNode* op) {
  visit(op->cond);
  visit(op->then_case);
  visit(op->else_case);
}
void PrimVisitor::visit_seq(const SeqNode* op) {
  for (auto& s : op->seq) visit(s);
}
void PrimVisitor::visit_evaluate(const EvaluateNode* op) { visit(op->value); }

// ---------------------------------------------------------------------------------- mutator

PrimExpr PrimMutator::mutate(const PrimExpr& e) {
  if (!e) return e;
  switch (e.kind()) {
    case PrimKind::IntImm:
      return visit_int_imm(e, e.as<IntImmNode>());
    case PrimKind::FloatImm:
      return visit_float_imm(e, e.as<FloatImmNode>());
    case PrimKind::Var:
      return visit_var(e, e.as<PrimVarNode>());
    case PrimKind::Binary:
      return visit_binary(e, e.as<BinaryNode>());
    case PrimKind::Compare:
      return visit_compare(e, e.as<CompareNode>());
    case PrimKind::Not:
      return visit_not(e, e.as<NotNode>());
    case PrimKind::Select:
      return visit_select(e, e.as<SelectNode>());
    case PrimKind::Cast:
      return visit_cast(e, e.as<CastNode>());
    case PrimKind::Reinterpret:
      return visit_reinterpret(e, e.as<ReinterpretNode>());
    case PrimKind::Load:
      return visit_load(e, e.as<LoadNode>());
    case PrimKind::Call:
      return visit_call(e, e.as<PrimCallNode>());
    case PrimKind::Let:
      return visit_let(e, e.as<LetNode>());
    case PrimKind::ProducerLoad:
      return visit_producer_load(e, e.as<ProducerLoadNode>());
    case PrimKind::Reduce:
      return visit_reduce(e, e.as<ReduceNode>());
  }
  return e;
}

Stmt PrimMutator::mutate(const Stmt& s) {
  if (!s) return s;
  switch (s.kind()) {
    case StmtKind::For:
      return visit_for(s, s.as<ForNode>());
    case StmtKind::Store:
      return visit_store(s, s.as<StoreNode>());
    case StmtKind::Allocate:
      return visit_allocate(s, s.as<AllocateNode>());
    case StmtKind::LetStmt:
      return visit_let_stmt(s, s.as<LetStmtNode>());
    case StmtKind::IfThenElse:
      return visit_if_then_else(s, s.as<IfThenElseNode>());
    case StmtKind::Seq:
      return visit_seq(s, s.as<SeqNode>());
    case StmtKind::Evaluate:
      return visit_evaluate(s, s.as<EvaluateNode>());
  }
  return s;
}

namespace {
// Mutates each of `in`; true when any changed.
bool mutate_all(PrimMutator& m, const std::vector<PrimExpr>& in, std::vector<PrimExpr>& out) {
  bool changed = false;
  out.reserve(in.size());
  for (auto& x : in) {
    out.push_back(m.mutate(x));
    changed |= !out.back().same_as(x);
  }
  return changed;
}
}  // namespace

// Rebuilt nodes go through the builders, so they fold again what a mutation made constant.
PrimExpr PrimMutator::visit_binary(const PrimExpr& e, const BinaryNode* op) {
  PrimExpr a = mutate(op->a), b = mutate(op->b);
  if (a.same_as(op->a) && b.same_as(op->b)) return e;
  if (op->op == BinaryOp::BitAnd && a.dtype() == DType::Bool) return logical_and(a, b);
  if (op->op == BinaryOp::BitOr && a.dtype() == DType::Bool) return logical_or(a, b);
  return binary(op->op, a, b);
}

PrimExpr PrimMutator::visit_compare(const PrimExpr& e, const CompareNode* op) {
  PrimExpr a = mutate(op->a), b = mutate(op->b);
  if (a.same_as(op->a) && b.same_as(op->b)) return e;
  return compare(op->op, a, b);
}

PrimExpr PrimMutator::visit_not(const PrimExpr& e, const NotNode* op) {
  PrimExpr a = mutate(op->a);
  return a.same_as(op->a) ? e : logical_not(a);
}

PrimExpr PrimMutator::visit_select(const PrimExpr& e, const SelectNode* op) {
  PrimExpr c = mutate(op->cond), t = mutate(op->t), f = mutate(op->f);
  if (c.same_as(op->cond) && t.same_as(op->t) && f.same_as(op->f)) return e;
  return select(c, t, f);
}

PrimExpr PrimMutator::visit_cast(const PrimExpr& e, const CastNode* op) {
  PrimExpr v = mutate(op->value);
  return v.same_as(op->value) ? e : cast(op->dtype, v);
}

PrimExpr PrimMutator::visit_reinterpret(const PrimExpr& e, const ReinterpretNode* op) {
  PrimExpr v = mutate(op->value);
  return v.same_as(op->value) ? e : reinterpret(op->dtype, v);
}

PrimExpr PrimMutator::visit_load(const PrimExpr& e, const LoadNode* op) {
  PrimExpr i = mutate(op->index);
  return i.same_as(op->index) ? e : load(op->buffer, i);
}

PrimExpr PrimMutator::visit_call(const PrimExpr& e, const PrimCallNode* op) {
  std::vector<PrimExpr> args;
  if (!mutate_all(*this, op->args, args)) return e;
  switch (op->op) {  // calls whose type is not their first argument's keep theirs
    case Intrinsic::MmaSync:
    case Intrinsic::AsyncCopy:
    case Intrinsic::AsyncWait:
    case Intrinsic::Prefetch:
      return PrimExpr(std::make_shared<PrimCallNode>(op->dtype, op->op, std::move(args)));
    default:
      return prim_call(op->op, std::move(args));
  }
}

PrimExpr PrimMutator::visit_let(const PrimExpr& e, const LetNode* op) {
  PrimExpr v = mutate(op->value), b = mutate(op->body);
  if (v.same_as(op->value) && b.same_as(op->body)) return e;
  return let(op->var, v, b);
}

PrimExpr PrimMutator::visit_producer_load(const PrimExpr& e, const ProducerLoadNode* op) {
  std::vector<PrimExpr> idx;
  if (!mutate_all(*this, op->indices, idx)) return e;
  return PrimExpr(std::make_shared<ProducerLoadNode>(op->dtype, op->producer, std::move(idx)));
}

PrimExpr PrimMutator::visit_reduce(const PrimExpr& e, const ReduceNode* op) {
  PrimExpr s = mutate(op->source);
  if (s.same_as(op->source)) return e;
  return PrimExpr(std::make_shared<ReduceNode>(op->op, s, op->axes));
}

Stmt PrimMutator::visit_for(const Stmt& s, const ForNode* op) {
  PrimExpr mn = mutate(op->min), ext = mutate(op->extent);
  Stmt body = mutate(op->body);
  if (mn.same_as(op->min) && ext.same_as(op->extent) && body.same_as(op->body)) return s;
  return for_loop(op->var, mn, ext, op->for_kind, body, op->annotations);
}

Stmt PrimMutator::visit_store(const Stmt& s, const StoreNode* op) {
  PrimExpr i = mutate(op->index), v = mutate(op->value);
  if (i.same_as(op->index) && v.same_as(op->value)) return s;
  return store(op->buffer, i, v);
}

Stmt PrimMutator::visit_allocate(const Stmt& s, const AllocateNode* op) {
  Stmt b = mutate(op->body);
  return b.same_as(op->body) ? s : allocate(op->buffer, b);
}

Stmt PrimMutator::visit_let_stmt(const Stmt& s, const LetStmtNode* op) {
  PrimExpr v = mutate(op->value);
  Stmt b = mutate(op->body);
  if (v.same_as(op->value) && b.same_as(op->body)) return s;
  return let_stmt(op->var, v, b);
}

Stmt PrimMutator::visit_if_then_else(const Stmt& s, const IfThenElseNode* op) {
  PrimExpr c = mutate(op->cond);
  Stmt t = mutate(op->then_case), e = mutate(op->else_case);
  if (c.same_as(op->cond) && t.same_as(op->then_case) && e.same_as(op->else_case)) return s;
  return if_then_else(c, t, e);
}

Stmt PrimMutator::visit_seq(const Stmt& s, const SeqNode* op) {
  std::vector<Stmt> out;
  out.reserve(op->seq.size());
  bool changed = false;
  for (auto& x : op->seq) {
    out.push_back(mutate(x));
    changed |= !out.back().same_as(x);
  }
  return changed ? seq(std::move(out)) : s;
}

Stmt PrimMutator::visit_evaluate(const Stmt& s, const EvaluateNode* op) {
  PrimExpr v = mutate(op->value);
  return v.same_as(op->value) ? s : evaluate(v);
}

// ------------------------------------------------------------------------------- helpers

namespace {

// Calls the callbacks on every node, pre-order.
class CallbackVisitor : public PrimVisitor {
 public:
  CallbackVisitor(const std::function<void(const PrimExpr&)>& e,
                  const std::function<void(const Stmt&)>& s)
      : efn_(e), sfn_(s) {}
  void visit(const PrimExpr& e) override {
    if (!e) return;
    efn_(e);
    PrimVisitor::visit(e);
  }
  void visit(const Stmt& s) override {
    if (!s) return;
    if (sfn_) sfn_(s);
    PrimVisitor::visit(s);
  }

 private:
  const std::function<void(const PrimExpr&)>& efn_;
  const std::function<void(const Stmt&)>& sfn_;
};

class Substituter : public PrimMutator {
 public:
  explicit Substituter(const VarMap& m) : map_(m) {}

 protected:
  PrimExpr visit_var(const PrimExpr& e, const PrimVarNode* op) override {
    for (auto& [v, r] : map_)
      if (v == op) return r;
    return e;
  }

 private:
  const VarMap& map_;
};

class BufferSwapper : public PrimMutator {
 public:
  explicit BufferSwapper(const BufferMap& m) : map_(m) {}

 protected:
  PrimExpr visit_load(const PrimExpr& e, const LoadNode* op) override {
    auto it = map_.find(op->buffer.get());
    return it == map_.end() ? PrimMutator::visit_load(e, op) : load(it->second, mutate(op->index));
  }
  Stmt visit_store(const Stmt& s, const StoreNode* op) override {
    auto it = map_.find(op->buffer.get());
    if (it == map_.end()) return PrimMutator::visit_store(s, op);
    return store(it->second, mutate(op->index), mutate(op->value));
  }

 private:
  const BufferMap& map_;
};

}  // namespace

void visit_prim(const PrimExpr& e, const std::function<void(const PrimExpr&)>& fn) {
  std::function<void(const Stmt&)> none;
  CallbackVisitor(fn, none).visit(e);
}

void visit_prim(const Stmt& s, const std::function<void(const PrimExpr&)>& expr_fn,
                const std::function<void(const Stmt&)>& stmt_fn) {
  CallbackVisitor(expr_fn, stmt_fn).visit(s);
}

PrimExpr substitute(const PrimExpr& e, const VarMap& map) {
  return map.empty() ? e : Substituter(map).mutate(e);
}
Stmt substitute(const Stmt& s, const VarMap& map) {
  return map.empty() ? s : Substituter(map).mutate(s);
}

PrimExpr swap_buffers(const PrimExpr& e, const BufferMap& map) {
  return map.empty() ? e : BufferSwapper(map).mutate(e);
}
Stmt swap_buffers(const Stmt& s, const BufferMap& map) {
  return map.empty() ? s : BufferSwapper(map).mutate(s);
}

}  // namespace ember::ir
