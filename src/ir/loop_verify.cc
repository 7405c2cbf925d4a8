// The loop-IR verifier run before code generation (see `verify` in loop.h).
#include <set>

#include "ember/ir/loop.h"
#include "ember/support/error.h"

namespace ember::ir {

namespace {

class Verifier {
 public:
  explicit Verifier(const PrimFunc& f) : f_(f) {
    for (auto& b : f.params) buffers_.insert(b.get());
  }

  void stmt(const Stmt& s, bool in_vector) {
    if (!s) return;
    switch (s.kind()) {
      case StmtKind::For: {
        auto* op = s.as<ForNode>();
        if (in_vector) fail_at(s, "a loop inside a vectorized loop");
        expr(op->min);
        expr(op->extent);
        int64_t ext;
        if (op->for_kind == ForKind::Vectorized && !as_int(op->extent, &ext))
          fail_at(s, "vectorized loop with a non-constant extent");
        if (is_gpu_kind(op->for_kind) && !as_int(op->extent, &ext))
          fail_at(s, "GPU-bound loop with a non-constant extent (it sets a launch dimension)");
        if (is_gpu_kind(op->for_kind) && in_vector)
          fail_at(s, "GPU-bound loop inside a vectorized loop");
        bound_.insert(op->var.get());
        stmt(op->body, in_vector || op->for_kind == ForKind::Vectorized);
        bound_.erase(op->var.get());
        return;
      }
      case StmtKind::Store: {
        auto* op = s.as<StoreNode>();
        check_buffer(op->buffer, s);
        expr(op->index);
        expr(op->value);
        if (op->value.dtype() != op->buffer->dtype) fail_at(s, "stored value has another dtype");
        if (!is_int(op->index.dtype())) fail_at(s, "non-integer store index");
        return;
      }
      case StmtKind::Allocate: {
        auto* op = s.as<AllocateNode>();
        if (in_vector) fail_at(s, "allocation inside a vectorized loop");
        buffers_.insert(op->buffer.get());
        stmt(op->body, in_vector);
        buffers_.erase(op->buffer.get());
        return;
      }
      case StmtKind::LetStmt: {
        auto* op = s.as<LetStmtNode>();
        expr(op->value);
        if (op->value.dtype() != op->var.dtype()) fail_at(s, "let value has another dtype");
        bound_.insert(op->var.get());
        stmt(op->body, in_vector);
        bound_.erase(op->var.get());
        return;
      }
      case StmtKind::IfThenElse: {
        auto* op = s.as<IfThenElseNode>();
        expr(op->cond);
        if (op->cond.dtype() != DType::Bool) fail_at(s, "non-bool condition");
        stmt(op->then_case, in_vector);
        stmt(op->else_case, in_vector);
        return;
      }
      case StmtKind::Seq:
        for (auto& x : s.as<SeqNode>()->seq) stmt(x, in_vector);
        return;
      case StmtKind::Evaluate:
        expr(s.as<EvaluateNode>()->value);
        return;
    }
  }

 private:
  void expr(const PrimExpr& e) {
    EMBER_CHECK(e, "null expression in ", f_.name);
    switch (e.kind()) {
      case PrimKind::Var:
        if (!bound_.count(e.get()))
          EMBER_CHECK(false, "unbound variable ", e.as<PrimVarNode>()->name, " in ", f_.name);
        return;
      case PrimKind::ProducerLoad:
      case PrimKind::Reduce:
        EMBER_CHECK(false, "tensor-expression node left after lowering in ", f_.name, ": ",
                    to_string(e));
        return;
      case PrimKind::Load: {
        auto* op = e.as<LoadNode>();
        EMBER_CHECK(buffers_.count(op->buffer.get()), "load from unknown buffer ", op->buffer->name,
                    " in ", f_.name);
        expr(op->index);
        return;
      }
      case PrimKind::Let: {
        auto* op = e.as<LetNode>();
        expr(op->value);
        bound_.insert(op->var.get());
        expr(op->body);
        bound_.erase(op->var.get());
        return;
      }
      case PrimKind::Binary: {
        auto* op = e.as<BinaryNode>();
        EMBER_CHECK(op->a.dtype() == op->b.dtype(),
                    "binary operands differ in dtype: ", to_string(e));
        expr(op->a);
        expr(op->b);
        return;
      }
      default: {
        switch (e.kind()) {
          case PrimKind::Compare:
            expr(e.as<CompareNode>()->a);
            expr(e.as<CompareNode>()->b);
            break;
          case PrimKind::Not:
            expr(e.as<NotNode>()->a);
            break;
          case PrimKind::Select:
            expr(e.as<SelectNode>()->cond);
            expr(e.as<SelectNode>()->t);
            expr(e.as<SelectNode>()->f);
            break;
          case PrimKind::Cast:
            expr(e.as<CastNode>()->value);
            break;
          case PrimKind::Reinterpret:
            expr(e.as<ReinterpretNode>()->value);
            break;
          case PrimKind::Call:
            for (auto& a : e.as<PrimCallNode>()->args) expr(a);
            break;
          default:
            break;
        }
        return;
      }
    }
  }

  void check_buffer(const Buffer& b, const Stmt& s) {
    if (!buffers_.count(b.get())) fail_at(s, "store to unknown buffer " + b->name);
  }

  [[noreturn]] void fail_at(const Stmt& s, const std::string& what) {
    std::string text = to_string(s);
    if (text.size() > 400) text = text.substr(0, 400) + "...";
    throw InternalError("internal error: loop IR of " + f_.name + " is invalid: " + what +
                        "\n  at: " + text);
  }

  const PrimFunc& f_;
  std::set<const void*> bound_;
  std::set<const BufferNode*> buffers_;
};

}  // namespace

void verify(const PrimFunc& f) {
  EMBER_CHECK(f.body, "function ", f.name, " has no body");
  Verifier(f).stmt(f.body, false);
}

}  // namespace ember::ir
