// Loop IR builders: the node constructors, with the constant folding and identities that
// keep schedules' index expressions readable (see loop.h).
#include <cmath>
#include <limits>

#include "ember/ir/loop.h"
#include "ember/support/error.h"

namespace ember::ir {

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
  std::vector<PrimExpr> shape;
  for (int64_t d : buffer->shape) shape.push_back(PrimExpr(d));
  return flat_index(shape, indices);
}

PrimExpr flat_index(const std::vector<PrimExpr>& shape, const std::vector<PrimExpr>& indices) {
  PrimExpr index = PrimExpr(int64_t{0});
  for (size_t i = 0; i < indices.size(); ++i) index = index * shape[i] + indices[i];
  return index;
}

namespace {
// A double as an integer of type t the way generated casts do it (llvm.fptosi.sat): toward
// zero, NaN to 0, out-of-range values to the type's min or max. A plain static_cast is
// undefined behaviour for those. An 8-bit type takes the int32 value, wrapped (as PyTorch's
// conversion through int does, and the generated code).
int64_t saturating_int(DType t, double value) {
  if (dtype_bytes(t) == 1) return wrap_int(t, saturating_int(DType::Int32, value));
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
  // A bfloat16 constant holds its rounded value, as the generated code's cast rounds.
  if (t == DType::BFloat16) value = round_bf16(value);
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

PrimExpr int_imm(DType t, uint64_t v) {
  return PrimExpr(std::make_shared<IntImmNode>(t, wrap_int(t, static_cast<int64_t>(v))));
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
      // Wrapped as the generated code wraps (unsigned arithmetic: no overflow in C++).
      case BinaryOp::Add:
        return int_imm(a.dtype(), uint64_t(x) + uint64_t(y));
      case BinaryOp::Sub:
        return int_imm(a.dtype(), uint64_t(x) - uint64_t(y));
      case BinaryOp::Mul:
        return int_imm(a.dtype(), uint64_t(x) * uint64_t(y));
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
  if (as_int(v, &i) && is_int(t)) return PrimExpr(std::make_shared<IntImmNode>(t, wrap_int(t, i)));
  if (as_int(v, &i) && t != DType::Bool) return make_const(t, static_cast<double>(i));
  if (as_float(v, &f) && is_float(t)) return make_const(t, f);
  return PrimExpr(std::make_shared<CastNode>(t, std::move(v)));
}

PrimExpr reinterpret(DType t, PrimExpr v) {
  EMBER_CHECK(dtype_bytes(t) == dtype_bytes(v.dtype()), "reinterpret needs equal sizes");
  if (v.dtype() == t) return v;
  return PrimExpr(std::make_shared<ReinterpretNode>(t, std::move(v)));
}

PrimExpr prim_call(Intrinsic op, std::vector<PrimExpr> args) {
  EMBER_CHECK(!args.empty(), "intrinsic call without arguments");
  DType t = op == Intrinsic::IsNan ? DType::Bool : args[0].dtype();
  return PrimExpr(std::make_shared<PrimCallNode>(t, op, std::move(args)));
}

PrimExpr barrier() {
  return PrimExpr(
      std::make_shared<PrimCallNode>(DType::Int32, Intrinsic::Barrier, std::vector<PrimExpr>{}));
}

PrimExpr prefetch(Buffer buffer, PrimExpr index) {
  return PrimExpr(std::make_shared<PrimCallNode>(
      DType::Int32, Intrinsic::Prefetch,
      std::vector<PrimExpr>{load(std::move(buffer), std::move(index))}));
}

PrimExpr async_copy(Buffer dst, PrimExpr dst_index, Buffer src, PrimExpr src_index) {
  EMBER_CHECK(dst->dtype == src->dtype, "async_copy between buffers of different types");
  return PrimExpr(std::make_shared<PrimCallNode>(
      DType::Int32, Intrinsic::AsyncCopy,
      std::vector<PrimExpr>{load(std::move(dst), std::move(dst_index)),
                            load(std::move(src), std::move(src_index))}));
}

PrimExpr async_commit() {
  return PrimExpr(std::make_shared<PrimCallNode>(DType::Int32, Intrinsic::AsyncCommit,
                                                 std::vector<PrimExpr>{}));
}

PrimExpr async_wait(int64_t groups) {
  return PrimExpr(std::make_shared<PrimCallNode>(DType::Int32, Intrinsic::AsyncWait,
                                                 std::vector<PrimExpr>{PrimExpr(groups)}));
}

PrimExpr mma_sync(int element, MmaPrecision precision, std::vector<PrimExpr> c,
                  std::vector<PrimExpr> a, std::vector<PrimExpr> b) {
  const size_t ab = precision == MmaPrecision::TF32 ? 1 : 2;  // values per 32-bit register
  EMBER_CHECK(precision != MmaPrecision::Highest && element >= 0 && element < 4 && c.size() == 4 &&
                  a.size() == 4 * ab && b.size() == 2 * ab,
              "mma_sync needs an element 0-3, a tensor-core precision and fragments of 4, ", 4 * ab,
              " and ", 2 * ab, " values");
  std::vector<PrimExpr> args{PrimExpr(int64_t{element}), PrimExpr(static_cast<int64_t>(precision))};
  for (auto* part : {&c, &a, &b})
    for (auto& v : *part) {
      EMBER_CHECK(v.dtype() == DType::Float32, "mma_sync fragments are float32 values");
      args.push_back(std::move(v));
    }
  return PrimExpr(
      std::make_shared<PrimCallNode>(DType::Float32, Intrinsic::MmaSync, std::move(args)));
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
    case ForKind::WarpMma:
      return "warp_mma";
  }
  return "?";
}

int64_t mma_k(MmaPrecision p) { return p == MmaPrecision::TF32 ? 8 : 16; }

const char* mma_precision_name(MmaPrecision p) {
  switch (p) {
    case MmaPrecision::Highest:
      return "highest";
    case MmaPrecision::TF32:
      return "tf32";
    case MmaPrecision::BF16:
      return "bf16";
    case MmaPrecision::FP16:
      return "fp16";
  }
  return "?";
}

MmaPrecision parse_mma_precision(const std::string& name) {
  for (MmaPrecision p :
       {MmaPrecision::Highest, MmaPrecision::TF32, MmaPrecision::BF16, MmaPrecision::FP16})
    if (name == mma_precision_name(p)) return p;
  fail("unknown matmul precision '", name,
       "': use \"highest\" (float32 FMAs), \"tf32\", \"bf16\" or \"fp16\" (tensor cores, "
       "float32 accumulation)");
}

bool is_gpu_kind(ForKind k) { return k >= ForKind::GpuBlockX && k <= ForKind::GpuThreadZ; }

Stmt for_loop(PrimVar v, PrimExpr min, PrimExpr extent, ForKind kind, Stmt body,
              LoopAnnotations annotations) {
  return Stmt(std::make_shared<ForNode>(std::move(v), std::move(min), std::move(extent), kind,
                                        std::move(body), annotations));
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

}  // namespace ember::ir
