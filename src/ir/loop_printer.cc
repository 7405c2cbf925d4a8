// The loop IR's text form (`to_string`, `<<`), as Library.get_source("loop") shows it.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <sstream>

#include "ember/ir/loop.h"
#include "ember/ir/tensor_expr.h"

// Expressions print through operator<<, so fmt::join can list them.
template <>
struct fmt::formatter<ember::ir::PrimExpr> : fmt::ostream_formatter {};

namespace ember::ir {

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
    case Intrinsic::Prefetch:
      return "prefetch";
    case Intrinsic::MmaSync:
      return "mma_sync";
    case Intrinsic::AsyncCopy:
      return "async_copy";
    case Intrinsic::AsyncCommit:
      return "async_commit";
    case Intrinsic::AsyncWait:
      return "async_wait";
    case Intrinsic::DotU8S8:
      return "dot_u8s8";
    case Intrinsic::DotBF16:
      return "dot_bf16";
    case Intrinsic::DotU7S8:
      return "dot_u7s8";
  }
  return "?";
}

// One case per expression kind, each a few lines: over 80 lines because the kinds are
// many, not because a case is long.
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
      if (op->dtype == DType::Int8) os << "i8";
      if (op->dtype == DType::UInt8) os << "u8";
      return;
    }
    case PrimKind::FloatImm: {
      auto* op = e.as<FloatImmNode>();
      std::ostringstream s;
      s.precision(9);
      s << op->value;
      std::string t = s.str();
      if (t.find_first_of(".eni") == std::string::npos) t += ".0";
      os << t << (op->dtype == DType::Float32 ? "f" : op->dtype == DType::BFloat16 ? "bf" : "");
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
      os << fmt::format("{}({})", intrinsic_name(op->op), fmt::join(op->args, ", "));
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
      os << fmt::format("{}({})", op->producer->name, fmt::join(op->indices, ", "));
      return;
    }
    case PrimKind::Reduce: {
      auto* op = e.as<ReduceNode>();
      const char* names[] = {"sum", "max", "min"};
      os << names[static_cast<int>(op->op)] << "(";
      print_expr(os, op->source);
      std::vector<std::string> axes;
      for (auto& a : op->axes) axes.push_back(a->var.name());
      os << fmt::format(", axes=[{}])", fmt::join(axes, ", "));
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
      const LoopAnnotations& a = op->annotations;
      if (a.sum_accumulators) os << " rolled_sum(" << a.sum_accumulators << ")";
      if (a.transposed_blocks) os << " transposed_blocks";
      if (a.rolled_call) os << " rolled_call";
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
         << (op->buffer->scope == BufferScope::Shared      ? " shared"
             : op->buffer->scope == BufferScope::PerThread ? " per thread"
                                                           : "")
         << "\n";
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
  std::vector<std::string> params;
  for (auto& b : f.params)
    params.push_back(
        fmt::format("{}: {}[{}]", b->name, dtype_name(b->dtype), fmt::join(b->shape, ", ")));
  os << fmt::format("func {}({}):\n", f.name, fmt::join(params, ", "));
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

}  // namespace ember::ir
