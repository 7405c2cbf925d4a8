// Structural equality of loop-IR expressions.
#include <cmath>

#include "ember/ir/loop.h"

namespace ember::ir {

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

}  // namespace ember::ir
