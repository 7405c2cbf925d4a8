#include "ember/ir/loop.h"

#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include "ember/ir/tensor_expr.h"
#include "ember/support/error.h"

namespace ember::ir {

// --------------------------------------------------------------------------------- builders

PrimExpr::PrimExpr(int v) : PrimExpr(static_cast<int64_t>(v)) {}
PrimExpr::PrimExpr(int64_t v) : node_(std::make_shared<IntImmNode>(DType::Int64, v)) {}
PrimExpr::PrimExpr(double v) : node_(std::make_shared<FloatImmNode>(DType::Float32, v)) {}

PrimVar::PrimVar(std::string name, DType t)
    : PrimExpr(std::make_shared<PrimVarNode>(std::move(name), t)) {}

int64_t BufferNode::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Buffer make_buffer(std::string name, DType dtype, std::vector<int64_t> shape, BufferScope scope) {
  return std::make_shared<BufferNode>(BufferNode{std::move(name), dtype, std::move(shape), scope});
}

PrimExpr flat_index(const Buffer& buffer, const std::vector<PrimExpr>& indices) {
  EMBER_CHECK(indices.size() == buffer->shape.size(), "buffer ", buffer->name, " has rank ",
              buffer->shape.size(), " but is indexed with ", indices.size(), " indices");
  PrimExpr index = PrimExpr(int64_t{0});
  for (size_t i = 0; i < indices.size(); ++i) index = index * buffer->shape[i] + indices[i];
  return index;
}

namespace {
// A double as an integer of type t the way generated casts do it (llvm.fptosi.sat): toward
// zero, NaN to 0, out-of-range values to the type's min or max. A plain static_cast is
// undefined behaviour for those.
int64_t saturating_int(DType t, double value) {
  const bool i32 = t == DType::Int32;
  const double lo = i32 ? -2147483648.0 : -9223372036854775808.0;
  const double hi = i32 ? 2147483648.0 : 9223372036854775808.0;  // 2^31, 2^63: one past max
  if (std::isnan(value)) return 0;
  if (value <= lo)
    return i32 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int64_t>::min();
  if (value >= hi)
    return i32 ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(value);
}
}  // namespace

PrimExpr make_const(DType t, double value) {
  if (is_float(t)) return PrimExpr(std::make_shared<FloatImmNode>(t, value));
  if (t == DType::Bool) return PrimExpr(std::make_shared<IntImmNode>(t, value != 0));
  return PrimExpr(std::make_shared<IntImmNode>(t, saturating_int(t, value)));
}

bool as_int(const PrimExpr& e, int64_t* out) {
  if (auto* i = e.as<IntImmNode>()) {
    *out = i->value;
    return true;
  }
  return false;
}

bool as_float(const PrimExpr& e, double* out) {
  if (auto* f = e.as<FloatImmNode>()) {
    *out = f->value;
    return true;
  }
  return false;
}

namespace {

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int64_t floor_mod(int64_t a, int64_t b) { return a - floor_div(a, b) * b; }

// Immediates adopt the other operand's dtype so `x * 2` works for any x.
void unify(PrimExpr& a, PrimExpr& b) {
  if (a.dtype() == b.dtype()) return;
  bool a_imm = a.as<IntImmNode>() || a.as<FloatImmNode>();
  bool b_imm = b.as<IntImmNode>() || b.as<FloatImmNode>();
  double v;
  int64_t iv;
  if (b_imm && !a_imm) {
    if (as_int(b, &iv))
      b = make_const(a.dtype(), static_cast<double>(iv));
    else if (as_float(b, &v))
      b = make_const(a.dtype(), v);
  } else if (a_imm && !b_imm) {
    if (as_int(a, &iv))
      a = make_const(b.dtype(), static_cast<double>(iv));
    else if (as_float(a, &v))
      a = make_const(b.dtype(), v);
  } else if (a_imm && b_imm) {
    // Both constants: promote to float if either is.
    DType t = is_float(a.dtype()) ? a.dtype() : b.dtype();
    if (as_int(a, &iv)) a = make_const(t, static_cast<double>(iv));
    if (as_int(b, &iv)) b = make_const(t, static_cast<double>(iv));
  }
  EMBER_CHECK(a.dtype() == b.dtype(), "operand dtypes differ: ", dtype_name(a.dtype()), " vs ",
              dtype_name(b.dtype()), " in ", to_string(a), " and ", to_string(b));
}

bool is_int_value(const PrimExpr& e, int64_t v) {
  int64_t x;
  return as_int(e, &x) && x == v;
}

}  // namespace

PrimExpr binary(BinaryOp op, PrimExpr a, PrimExpr b) {
  unify(a, b);
  int64_t x, y;
  if (as_int(a, &x) && as_int(b, &y) && a.dtype() != DType::Bool) {
    switch (op) {
      case BinaryOp::Add:
        return make_const(a.dtype(), double(x + y));
      case BinaryOp::Sub:
        return make_const(a.dtype(), double(x - y));
      case BinaryOp::Mul:
        return make_const(a.dtype(), double(x * y));
      case BinaryOp::Div:
        if (y != 0) return make_const(a.dtype(), double(floor_div(x, y)));
        break;
      case BinaryOp::Mod:
        if (y != 0) return make_const(a.dtype(), double(floor_mod(x, y)));
        break;
      case BinaryOp::Min:
        return make_const(a.dtype(), double(std::min(x, y)));
      case BinaryOp::Max:
        return make_const(a.dtype(), double(std::max(x, y)));
      default:
        break;
    }
  }
  if (is_int(a.dtype())) {
    // Identities that keep index expressions readable; never applied to floats, where
    // x + 0 is not x for x = -0.0.
    if (op == BinaryOp::Add && is_int_value(a, 0)) return b;
    if ((op == BinaryOp::Add || op == BinaryOp::Sub) && is_int_value(b, 0)) return a;
    if (op == BinaryOp::Mul && (is_int_value(a, 0) || is_int_value(b, 0)))
      return PrimExpr(make_const(a.dtype(), 0));
    if (op == BinaryOp::Mul && is_int_value(a, 1)) return b;
    if ((op == BinaryOp::Mul || op == BinaryOp::Div) && is_int_value(b, 1)) return a;
    if (op == BinaryOp::Mod && is_int_value(b, 1)) return make_const(a.dtype(), 0);
  }
  return PrimExpr(std::make_shared<BinaryNode>(op, std::move(a), std::move(b)));
}

PrimExpr operator+(PrimExpr a, PrimExpr b) { return binary(BinaryOp::Add, a, b); }
PrimExpr operator-(PrimExpr a, PrimExpr b) { return binary(BinaryOp::Sub, a, b); }
PrimExpr operator-(PrimExpr a) {
  if (is_float(a.dtype())) {
    double v;
    if (as_float(a, &v)) return make_const(a.dtype(), -v);
    return make_const(a.dtype(), -0.0) - a;  // -0.0 - x flips the sign of x exactly
  }
  return make_const(a.dtype(), 0) - a;
}
PrimExpr operator*(PrimExpr a, PrimExpr b) { return binary(BinaryOp::Mul, a, b); }
PrimExpr operator/(PrimExpr a, PrimExpr b) { return binary(BinaryOp::Div, a, b); }
PrimExpr operator%(PrimExpr a, PrimExpr b) { return binary(BinaryOp::Mod, a, b); }
PrimExpr min(PrimExpr a, PrimExpr b) { return binary(BinaryOp::Min, a, b); }
PrimExpr max(PrimExpr a, PrimExpr b) { return binary(BinaryOp::Max, a, b); }

namespace {
PrimExpr compare(CompareOp op, PrimExpr a, PrimExpr b) {
  unify(a, b);
  int64_t x, y;
  if (as_int(a, &x) && as_int(b, &y)) {
    bool r = false;
    switch (op) {
      case CompareOp::EQ:
        r = x == y;
        break;
      case CompareOp::NE:
        r = x != y;
        break;
      case CompareOp::LT:
        r = x < y;
        break;
      case CompareOp::LE:
        r = x <= y;
        break;
      case CompareOp::GT:
        r = x > y;
        break;
      case CompareOp::GE:
        r = x >= y;
        break;
    }
    return make_const(DType::Bool, r);
  }
  return PrimExpr(std::make_shared<CompareNode>(op, std::move(a), std::move(b)));
}
}  // namespace

PrimExpr operator<(PrimExpr a, PrimExpr b) { return compare(CompareOp::LT, a, b); }
PrimExpr operator<=(PrimExpr a, PrimExpr b) { return compare(CompareOp::LE, a, b); }
PrimExpr operator>(PrimExpr a, PrimExpr b) { return compare(CompareOp::GT, a, b); }
PrimExpr operator>=(PrimExpr a, PrimExpr b) { return compare(CompareOp::GE, a, b); }
PrimExpr operator==(PrimExpr a, PrimExpr b) { return compare(CompareOp::EQ, a, b); }
PrimExpr operator!=(PrimExpr a, PrimExpr b) { return compare(CompareOp::NE, a, b); }

PrimExpr logical_and(PrimExpr a, PrimExpr b) {
  EMBER_CHECK(a.dtype() == DType::Bool && b.dtype() == DType::Bool, "&& needs bool operands");
  if (is_int_value(a, 1)) return b;
  if (is_int_value(b, 1)) return a;
  if (is_int_value(a, 0) || is_int_value(b, 0)) return make_const(DType::Bool, 0);
  return PrimExpr(std::make_shared<BinaryNode>(BinaryOp::BitAnd, a, b));
}
PrimExpr logical_or(PrimExpr a, PrimExpr b) {
  EMBER_CHECK(a.dtype() == DType::Bool && b.dtype() == DType::Bool, "|| needs bool operands");
  if (is_int_value(a, 0)) return b;
  if (is_int_value(b, 0)) return a;
  if (is_int_value(a, 1) || is_int_value(b, 1)) return make_const(DType::Bool, 1);
  return PrimExpr(std::make_shared<BinaryNode>(BinaryOp::BitOr, a, b));
}
PrimExpr logical_not(PrimExpr a) {
  EMBER_CHECK(a.dtype() == DType::Bool, "! needs a bool operand");
  int64_t v;
  if (as_int(a, &v)) return make_const(DType::Bool, !v);
  return PrimExpr(std::make_shared<NotNode>(std::move(a)));
}

PrimExpr select(PrimExpr cond, PrimExpr t, PrimExpr f) {
  EMBER_CHECK(cond.dtype() == DType::Bool, "select condition must be bool");
  unify(t, f);
  int64_t c;
  if (as_int(cond, &c)) return c ? t : f;
  return PrimExpr(std::make_shared<SelectNode>(std::move(cond), std::move(t), std::move(f)));
}

PrimExpr cast(DType t, PrimExpr v) {
  if (v.dtype() == t) return v;
  int64_t i;
  double f;
  // An integer to a narrower integer wraps, as the generated trunc does (and without a trip
  // through double, which rounds large int64 values).
  if (as_int(v, &i) && t == DType::Int32)
    return PrimExpr(
        std::make_shared<IntImmNode>(t, static_cast<int32_t>(static_cast<uint32_t>(i))));
  if (as_int(v, &i) && t == DType::Int64) return PrimExpr(std::make_shared<IntImmNode>(t, i));
  if (as_int(v, &i) && t != DType::Bool) return make_const(t, static_cast<double>(i));
  if (as_float(v, &f) && is_float(t)) return make_const(t, f);
  return PrimExpr(std::make_shared<CastNode>(t, std::move(v)));
}

PrimExpr reinterpret(DType t, PrimExpr v) {
  EMBER_CHECK(dtype_bytes(t) == dtype_bytes(v.dtype()), "reinterpret needs equal sizes");
  if (v.dtype() == t) return v;
  return PrimExpr(std::make_shared<ReinterpretNode>(t, std::move(v)));
}

PrimExpr call(Intrinsic op, std::vector<PrimExpr> args) {
  EMBER_CHECK(!args.empty(), "intrinsic call without arguments");
  DType t = op == Intrinsic::IsNan ? DType::Bool : args[0].dtype();
  return PrimExpr(std::make_shared<PrimCallNode>(t, op, std::move(args)));
}

PrimExpr barrier() {
  return PrimExpr(
      std::make_shared<PrimCallNode>(DType::Int32, Intrinsic::Barrier, std::vector<PrimExpr>{}));
}

PrimExpr load(Buffer buffer, PrimExpr index) {
  return PrimExpr(std::make_shared<LoadNode>(std::move(buffer), std::move(index)));
}

PrimExpr let(PrimVar v, PrimExpr value, PrimExpr body) {
  return PrimExpr(std::make_shared<LetNode>(std::move(v), std::move(value), std::move(body)));
}

const char* for_kind_name(ForKind k) {
  switch (k) {
    case ForKind::Serial:
      return "serial";
    case ForKind::Parallel:
      return "parallel";
    case ForKind::Vectorized:
      return "vectorized";
    case ForKind::Unrolled:
      return "unrolled";
    case ForKind::GpuBlockX:
      return "blockIdx.x";
    case ForKind::GpuBlockY:
      return "blockIdx.y";
    case ForKind::GpuBlockZ:
      return "blockIdx.z";
    case ForKind::GpuThreadX:
      return "threadIdx.x";
    case ForKind::GpuThreadY:
      return "threadIdx.y";
    case ForKind::GpuThreadZ:
      return "threadIdx.z";
  }
  return "?";
}

bool is_gpu_kind(ForKind k) { return k >= ForKind::GpuBlockX && k <= ForKind::GpuThreadZ; }

Stmt for_loop(PrimVar v, PrimExpr min, PrimExpr extent, ForKind kind, Stmt body) {
  return Stmt(std::make_shared<ForNode>(std::move(v), std::move(min), std::move(extent), kind,
                                        std::move(body)));
}
Stmt store(Buffer buffer, PrimExpr index, PrimExpr value) {
  EMBER_CHECK(buffer->dtype == value.dtype(), "store of ", dtype_name(value.dtype()), " into ",
              dtype_name(buffer->dtype), " buffer ", buffer->name);
  return Stmt(std::make_shared<StoreNode>(std::move(buffer), std::move(index), std::move(value)));
}
Stmt allocate(Buffer buffer, Stmt body) {
  return Stmt(std::make_shared<AllocateNode>(std::move(buffer), std::move(body)));
}
Stmt let_stmt(PrimVar v, PrimExpr value, Stmt body) {
  return Stmt(std::make_shared<LetStmtNode>(std::move(v), std::move(value), std::move(body)));
}
Stmt if_then_else(PrimExpr cond, Stmt then_case, Stmt else_case) {
  int64_t c;
  if (as_int(cond, &c)) return c ? then_case : else_case;
  return Stmt(std::make_shared<IfThenElseNode>(std::move(cond), std::move(then_case),
                                               std::move(else_case)));
}
Stmt seq(std::vector<Stmt> stmts) {
  std::vector<Stmt> flat;
  for (auto& s : stmts) {
    if (!s) continue;
    if (auto* q = s.as<SeqNode>())
      flat.insert(flat.end(), q->seq.begin(), q->seq.end());
    else
      flat.push_back(s);
  }
  if (flat.size() == 1) return flat[0];
  return Stmt(std::make_shared<SeqNode>(std::move(flat)));
}
Stmt evaluate(PrimExpr value) { return Stmt(std::make_shared<EvaluateNode>(std::move(value))); }

// ---------------------------------------------------------------------------------- mutator

PrimExpr PrimMutator::mutate(const PrimExpr& e) {
  if (!e) return e;
  switch (e.kind()) {
    case PrimKind::Var:
      return visit_var(e, e.as<PrimVarNode>());
    case PrimKind::Load:
      return visit_load(e, e.as<LoadNode>());
    case PrimKind::ProducerLoad:
      return visit_producer_load(e, e.as<ProducerLoadNode>());
    default:
      return mutate_children(e);
  }
}

PrimExpr PrimMutator::visit_load(const PrimExpr& e, const LoadNode* op) {
  PrimExpr i = mutate(op->index);
  return i.same_as(op->index) ? e : load(op->buffer, i);
}

PrimExpr PrimMutator::visit_producer_load(const PrimExpr& e, const ProducerLoadNode* op) {
  std::vector<PrimExpr> idx;
  bool changed = false;
  for (auto& i : op->indices) {
    idx.push_back(mutate(i));
    changed |= !idx.back().same_as(i);
  }
  if (!changed) return e;
  return PrimExpr(std::make_shared<ProducerLoadNode>(op->dtype, op->producer, std::move(idx)));
}

PrimExpr PrimMutator::mutate_children(const PrimExpr& e) {
  switch (e.kind()) {
    case PrimKind::IntImm:
    case PrimKind::FloatImm:
    case PrimKind::Var:
      return e;
    case PrimKind::Binary: {
      auto* op = e.as<BinaryNode>();
      PrimExpr a = mutate(op->a), b = mutate(op->b);
      if (a.same_as(op->a) && b.same_as(op->b)) return e;
      if (op->op == BinaryOp::BitAnd && a.dtype() == DType::Bool) return logical_and(a, b);
      if (op->op == BinaryOp::BitOr && a.dtype() == DType::Bool) return logical_or(a, b);
      return binary(op->op, a, b);
    }
    case PrimKind::Compare: {
      auto* op = e.as<CompareNode>();
      PrimExpr a = mutate(op->a), b = mutate(op->b);
      if (a.same_as(op->a) && b.same_as(op->b)) return e;
      return compare(op->op, a, b);
    }
    case PrimKind::Not: {
      auto* op = e.as<NotNode>();
      PrimExpr a = mutate(op->a);
      return a.same_as(op->a) ? e : logical_not(a);
    }
    case PrimKind::Select: {
      auto* op = e.as<SelectNode>();
      PrimExpr c = mutate(op->cond), t = mutate(op->t), f = mutate(op->f);
      if (c.same_as(op->cond) && t.same_as(op->t) && f.same_as(op->f)) return e;
      return select(c, t, f);
    }
    case PrimKind::Cast: {
      auto* op = e.as<CastNode>();
      PrimExpr v = mutate(op->value);
      return v.same_as(op->value) ? e : cast(op->dtype, v);
    }
    case PrimKind::Reinterpret: {
      auto* op = e.as<ReinterpretNode>();
      PrimExpr v = mutate(op->value);
      return v.same_as(op->value) ? e : reinterpret(op->dtype, v);
    }
    case PrimKind::Load:
      return visit_load(e, e.as<LoadNode>());
    case PrimKind::Call: {
      auto* op = e.as<PrimCallNode>();
      std::vector<PrimExpr> args;
      bool changed = false;
      for (auto& a : op->args) {
        args.push_back(mutate(a));
        changed |= !args.back().same_as(a);
      }
      return changed ? call(op->op, std::move(args)) : e;
    }
    case PrimKind::Let: {
      auto* op = e.as<LetNode>();
      PrimExpr v = mutate(op->value), b = mutate(op->body);
      if (v.same_as(op->value) && b.same_as(op->body)) return e;
      return let(op->var, v, b);
    }
    case PrimKind::ProducerLoad:
      return visit_producer_load(e, e.as<ProducerLoadNode>());
    case PrimKind::Reduce: {
      auto* op = e.as<ReduceNode>();
      PrimExpr s = mutate(op->source);
      if (s.same_as(op->source)) return e;
      return PrimExpr(std::make_shared<ReduceNode>(op->op, s, op->axes));
    }
  }
  return e;
}

Stmt PrimMutator::mutate(const Stmt& s) {
  if (!s) return s;
  switch (s.kind()) {
    case StmtKind::Store:
      return visit_store(s, s.as<StoreNode>());
    case StmtKind::For:
      return visit_for(s, s.as<ForNode>());
    default:
      return mutate_children(s);
  }
}

Stmt PrimMutator::visit_store(const Stmt& s, const StoreNode* op) {
  PrimExpr i = mutate(op->index), v = mutate(op->value);
  if (i.same_as(op->index) && v.same_as(op->value)) return s;
  return store(op->buffer, i, v);
}

Stmt PrimMutator::visit_for(const Stmt& s, const ForNode* op) {
  PrimExpr mn = mutate(op->min), ext = mutate(op->extent);
  Stmt body = mutate(op->body);
  if (mn.same_as(op->min) && ext.same_as(op->extent) && body.same_as(op->body)) return s;
  return for_loop(op->var, mn, ext, op->for_kind, body);
}

Stmt PrimMutator::mutate_children(const Stmt& s) {
  switch (s.kind()) {
    case StmtKind::For:
      return visit_for(s, s.as<ForNode>());
    case StmtKind::Store:
      return visit_store(s, s.as<StoreNode>());
    case StmtKind::Allocate: {
      auto* op = s.as<AllocateNode>();
      Stmt b = mutate(op->body);
      return b.same_as(op->body) ? s : allocate(op->buffer, b);
    }
    case StmtKind::LetStmt: {
      auto* op = s.as<LetStmtNode>();
      PrimExpr v = mutate(op->value);
      Stmt b = mutate(op->body);
      if (v.same_as(op->value) && b.same_as(op->body)) return s;
      return let_stmt(op->var, v, b);
    }
    case StmtKind::IfThenElse: {
      auto* op = s.as<IfThenElseNode>();
      PrimExpr c = mutate(op->cond);
      Stmt t = mutate(op->then_case), e = mutate(op->else_case);
      if (c.same_as(op->cond) && t.same_as(op->then_case) && e.same_as(op->else_case)) return s;
      return if_then_else(c, t, e);
    }
    case StmtKind::Seq: {
      auto* op = s.as<SeqNode>();
      std::vector<Stmt> out;
      bool changed = false;
      for (auto& x : op->seq) {
        out.push_back(mutate(x));
        changed |= !out.back().same_as(x);
      }
      return changed ? seq(std::move(out)) : s;
    }
    case StmtKind::Evaluate: {
      auto* op = s.as<EvaluateNode>();
      PrimExpr v = mutate(op->value);
      return v.same_as(op->value) ? s : evaluate(v);
    }
  }
  return s;
}

// -------------------------------------------------------------------------------- visitors

namespace {
class Visitor : public PrimMutator {
 public:
  Visitor(const std::function<void(const PrimExpr&)>& e, const std::function<void(const Stmt&)>& s)
      : efn_(e), sfn_(s) {}
  PrimExpr mutate(const PrimExpr& e) override {
    if (!e) return e;
    efn_(e);
    mutate_children(e);
    return e;
  }
  Stmt mutate(const Stmt& s) override {
    if (!s) return s;
    if (sfn_) sfn_(s);
    mutate_children(s);
    return s;
  }

 protected:
  PrimExpr visit_load(const PrimExpr& e, const LoadNode* op) override {
    mutate(op->index);
    return e;
  }
  PrimExpr visit_producer_load(const PrimExpr& e, const ProducerLoadNode* op) override {
    for (auto& i : op->indices) mutate(i);
    return e;
  }
  Stmt visit_store(const Stmt& s, const StoreNode* op) override {
    mutate(op->index);
    mutate(op->value);
    return s;
  }
  Stmt visit_for(const Stmt& s, const ForNode* op) override {
    mutate(op->min);
    mutate(op->extent);
    mutate(op->body);
    return s;
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
}  // namespace

void visit_prim(const PrimExpr& e, const std::function<void(const PrimExpr&)>& fn) {
  std::function<void(const Stmt&)> none;
  Visitor(fn, none).mutate(e);
}

void visit_prim(const Stmt& s, const std::function<void(const PrimExpr&)>& expr_fn,
                const std::function<void(const Stmt&)>& stmt_fn) {
  Visitor(expr_fn, stmt_fn).mutate(s);
}

PrimExpr substitute(const PrimExpr& e, const VarMap& map) {
  return map.empty() ? e : Substituter(map).mutate(e);
}
Stmt substitute(const Stmt& s, const VarMap& map) {
  return map.empty() ? s : Substituter(map).mutate(s);
}

bool structural_equal(const PrimExpr& a, const PrimExpr& b) {
  if (a.same_as(b)) return true;
  if (!a || !b || a.kind() != b.kind() || a.dtype() != b.dtype()) return false;
  switch (a.kind()) {
    case PrimKind::IntImm:
      return a.as<IntImmNode>()->value == b.as<IntImmNode>()->value;
    case PrimKind::FloatImm: {
      double x = a.as<FloatImmNode>()->value, y = b.as<FloatImmNode>()->value;
      return x == y || (std::isnan(x) && std::isnan(y));
    }
    case PrimKind::Var:
      return false;  // identity only
    case PrimKind::Binary: {
      auto *x = a.as<BinaryNode>(), *y = b.as<BinaryNode>();
      return x->op == y->op && structural_equal(x->a, y->a) && structural_equal(x->b, y->b);
    }
    case PrimKind::Compare: {
      auto *x = a.as<CompareNode>(), *y = b.as<CompareNode>();
      return x->op == y->op && structural_equal(x->a, y->a) && structural_equal(x->b, y->b);
    }
    case PrimKind::Not:
      return structural_equal(a.as<NotNode>()->a, b.as<NotNode>()->a);
    case PrimKind::Select: {
      auto *x = a.as<SelectNode>(), *y = b.as<SelectNode>();
      return structural_equal(x->cond, y->cond) && structural_equal(x->t, y->t) &&
             structural_equal(x->f, y->f);
    }
    case PrimKind::Cast:
      return structural_equal(a.as<CastNode>()->value, b.as<CastNode>()->value);
    case PrimKind::Reinterpret:
      return structural_equal(a.as<ReinterpretNode>()->value, b.as<ReinterpretNode>()->value);
    case PrimKind::Load: {
      auto *x = a.as<LoadNode>(), *y = b.as<LoadNode>();
      return x->buffer == y->buffer && structural_equal(x->index, y->index);
    }
    case PrimKind::Call: {
      auto *x = a.as<PrimCallNode>(), *y = b.as<PrimCallNode>();
      if (x->op != y->op || x->args.size() != y->args.size()) return false;
      for (size_t i = 0; i < x->args.size(); ++i)
        if (!structural_equal(x->args[i], y->args[i])) return false;
      return true;
    }
    case PrimKind::ProducerLoad: {
      auto *x = a.as<ProducerLoadNode>(), *y = b.as<ProducerLoadNode>();
      if (x->producer != y->producer || x->indices.size() != y->indices.size()) return false;
      for (size_t i = 0; i < x->indices.size(); ++i)
        if (!structural_equal(x->indices[i], y->indices[i])) return false;
      return true;
    }
    default:
      return false;
  }
}

// --------------------------------------------------------------------------------- printer

namespace {

const char* binary_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add:
      return " + ";
    case BinaryOp::Sub:
      return " - ";
    case BinaryOp::Mul:
      return "*";
    case BinaryOp::Div:
      return "/";
    case BinaryOp::Mod:
      return " % ";
    case BinaryOp::BitAnd:
      return " & ";
    case BinaryOp::BitOr:
      return " | ";
    case BinaryOp::BitXor:
      return " ^ ";
    case BinaryOp::Shl:
      return " << ";
    case BinaryOp::Shr:
      return " >> ";
    default:
      return nullptr;
  }
}

const char* compare_symbol(CompareOp op) {
  switch (op) {
    case CompareOp::EQ:
      return " == ";
    case CompareOp::NE:
      return " != ";
    case CompareOp::LT:
      return " < ";
    case CompareOp::LE:
      return " <= ";
    case CompareOp::GT:
      return " > ";
    case CompareOp::GE:
      return " >= ";
  }
  return "?";
}

const char* intrinsic_name(Intrinsic op) {
  switch (op) {
    case Intrinsic::Sqrt:
      return "sqrt";
    case Intrinsic::Floor:
      return "floor";
    case Intrinsic::Ceil:
      return "ceil";
    case Intrinsic::Abs:
      return "abs";
    case Intrinsic::Round:
      return "round";
    case Intrinsic::IsNan:
      return "isnan";
    case Intrinsic::Fma:
      return "fma";
    case Intrinsic::Barrier:
      return "barrier";
    case Intrinsic::CheckIndex:
      return "check_index";
  }
  return "?";
}

void print_expr(std::ostream& os, const PrimExpr& e) {
  if (!e) {
    os << "<null>";
    return;
  }
  switch (e.kind()) {
    case PrimKind::IntImm: {
      auto* op = e.as<IntImmNode>();
      if (op->dtype == DType::Bool)
        os << (op->value ? "true" : "false");
      else
        os << op->value;
      if (op->dtype == DType::Int32) os << "i32";
      return;
    }
    case PrimKind::FloatImm: {
      auto* op = e.as<FloatImmNode>();
      std::ostringstream s;
      s.precision(9);
      s << op->value;
      std::string t = s.str();
      if (t.find_first_of(".eni") == std::string::npos) t += ".0";
      os << t << (op->dtype == DType::Float32 ? "f" : "");
      return;
    }
    case PrimKind::Var:
      os << e.as<PrimVarNode>()->name;
      return;
    case PrimKind::Binary: {
      auto* op = e.as<BinaryNode>();
      if (op->op == BinaryOp::Min || op->op == BinaryOp::Max) {
        os << (op->op == BinaryOp::Min ? "min(" : "max(");
        print_expr(os, op->a);
        os << ", ";
        print_expr(os, op->b);
        os << ")";
        return;
      }
      os << "(";
      print_expr(os, op->a);
      os << binary_symbol(op->op);
      print_expr(os, op->b);
      os << ")";
      return;
    }
    case PrimKind::Compare: {
      auto* op = e.as<CompareNode>();
      os << "(";
      print_expr(os, op->a);
      os << compare_symbol(op->op);
      print_expr(os, op->b);
      os << ")";
      return;
    }
    case PrimKind::Not:
      os << "!";
      print_expr(os, e.as<NotNode>()->a);
      return;
    case PrimKind::Select: {
      auto* op = e.as<SelectNode>();
      os << "select(";
      print_expr(os, op->cond);
      os << ", ";
      print_expr(os, op->t);
      os << ", ";
      print_expr(os, op->f);
      os << ")";
      return;
    }
    case PrimKind::Cast:
      os << dtype_name(e.dtype()) << "(";
      print_expr(os, e.as<CastNode>()->value);
      os << ")";
      return;
    case PrimKind::Reinterpret:
      os << "reinterpret<" << dtype_name(e.dtype()) << ">(";
      print_expr(os, e.as<ReinterpretNode>()->value);
      os << ")";
      return;
    case PrimKind::Load: {
      auto* op = e.as<LoadNode>();
      os << op->buffer->name << "[";
      print_expr(os, op->index);
      os << "]";
      return;
    }
    case PrimKind::Call: {
      auto* op = e.as<PrimCallNode>();
      os << intrinsic_name(op->op) << "(";
      for (size_t i = 0; i < op->args.size(); ++i) {
        if (i) os << ", ";
        print_expr(os, op->args[i]);
      }
      os << ")";
      return;
    }
    case PrimKind::Let: {
      auto* op = e.as<LetNode>();
      os << "(let " << op->var.name() << " = ";
      print_expr(os, op->value);
      os << " in ";
      print_expr(os, op->body);
      os << ")";
      return;
    }
    case PrimKind::ProducerLoad: {
      auto* op = e.as<ProducerLoadNode>();
      os << op->producer->name << "(";
      for (size_t i = 0; i < op->indices.size(); ++i) {
        if (i) os << ", ";
        print_expr(os, op->indices[i]);
      }
      os << ")";
      return;
    }
    case PrimKind::Reduce: {
      auto* op = e.as<ReduceNode>();
      const char* names[] = {"sum", "max", "min"};
      os << names[static_cast<int>(op->op)] << "(";
      print_expr(os, op->source);
      os << ", axes=[";
      for (size_t i = 0; i < op->axes.size(); ++i) os << (i ? ", " : "") << op->axes[i]->var.name();
      os << "])";
      return;
    }
  }
}

void print_stmt(std::ostream& os, const Stmt& s, int indent) {
  if (!s) return;
  std::string pad(indent * 2, ' ');
  switch (s.kind()) {
    case StmtKind::For: {
      auto* op = s.as<ForNode>();
      int64_t mn;
      os << pad << "for " << op->var.name() << " in [";
      if (as_int(op->min, &mn) && mn == 0)
        os << "0, " << op->extent << ")";
      else
        os << op->min << ", " << op->min << " + " << op->extent << ")";
      if (op->for_kind != ForKind::Serial) os << " " << for_kind_name(op->for_kind);
      os << ":\n";
      print_stmt(os, op->body, indent + 1);
      return;
    }
    case StmtKind::Store: {
      auto* op = s.as<StoreNode>();
      os << pad << op->buffer->name << "[" << op->index << "] = " << op->value << "\n";
      return;
    }
    case StmtKind::Allocate: {
      auto* op = s.as<AllocateNode>();
      os << pad << "allocate " << op->buffer->name << ": " << dtype_name(op->buffer->dtype) << "["
         << op->buffer->numel() << "]"
         << (op->buffer->scope == BufferScope::Shared ? " shared" : "") << "\n";
      print_stmt(os, op->body, indent);
      return;
    }
    case StmtKind::LetStmt: {
      auto* op = s.as<LetStmtNode>();
      os << pad << "let " << op->var.name() << " = " << op->value << "\n";
      print_stmt(os, op->body, indent);
      return;
    }
    case StmtKind::IfThenElse: {
      auto* op = s.as<IfThenElseNode>();
      os << pad << "if " << op->cond << ":\n";
      print_stmt(os, op->then_case, indent + 1);
      if (op->else_case) {
        os << pad << "else:\n";
        print_stmt(os, op->else_case, indent + 1);
      }
      return;
    }
    case StmtKind::Seq:
      for (auto& x : s.as<SeqNode>()->seq) print_stmt(os, x, indent);
      return;
    case StmtKind::Evaluate:
      os << pad << s.as<EvaluateNode>()->value << "\n";
      return;
  }
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const PrimExpr& e) {
  print_expr(os, e);
  return os;
}
std::ostream& operator<<(std::ostream& os, const Stmt& s) {
  print_stmt(os, s, 0);
  return os;
}
std::ostream& operator<<(std::ostream& os, const PrimFunc& f) {
  os << "func " << f.name << "(";
  for (size_t i = 0; i < f.params.size(); ++i) {
    auto& b = f.params[i];
    os << (i ? ", " : "") << b->name << ": " << dtype_name(b->dtype) << "[";
    for (size_t d = 0; d < b->shape.size(); ++d) os << (d ? ", " : "") << b->shape[d];
    os << "]";
  }
  os << "):\n";
  print_stmt(os, f.body, 1);
  return os;
}
std::string to_string(const PrimExpr& e) {
  std::ostringstream os;
  os << e;
  return os.str();
}
std::string to_string(const Stmt& s) {
  std::ostringstream os;
  os << s;
  return os.str();
}
std::string to_string(const PrimFunc& f) {
  std::ostringstream os;
  os << f;
  return os.str();
}

// -------------------------------------------------------------------------------- verifier

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
