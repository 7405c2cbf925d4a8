#include "analysis.h"

#include <algorithm>
#include <map>

namespace ember::passes {

using namespace ir;

bool is_reduction(const Stage& s) { return s.body().as<ReduceNode>() != nullptr; }

bool uses_var(const PrimExpr& e, const PrimVarNode* v) {
  bool found = false;
  visit_prim(e, [&](const PrimExpr& x) { found |= x.get() == v; });
  return found;
}

bool reads(const PrimExpr& body, const TensorNode* producer) {
  bool found = false;
  visit_prim(body, [&](const PrimExpr& e) {
    if (auto* p = e.as<ProducerLoadNode>()) found |= p->producer.get() == producer;
  });
  return found;
}

bool reads_along(const PrimExpr& body, const TensorNode* producer, const PrimVarNode* axis_var) {
  bool found = false;
  visit_prim(body, [&](const PrimExpr& e) {
    auto* p = e.as<ProducerLoadNode>();
    if (!p || p->producer.get() != producer) return;
    for (auto& idx : p->indices) found |= uses_var(idx, axis_var);
  });
  return found;
}

namespace {

int64_t chain_length(const PrimExpr& e, std::map<const PrimExprNode*, int64_t>& memo,
                     std::map<const PrimVarNode*, int64_t>& lets) {
  if (!e) return 0;
  if (auto it = memo.find(e.get()); it != memo.end()) return it->second;
  switch (e.kind()) {
    case PrimKind::Var: {
      auto it = lets.find(e.as<PrimVarNode>());
      return it == lets.end() ? 0 : it->second;
    }
    case PrimKind::Let: {
      auto* l = e.as<LetNode>();
      lets[l->var.get()] = chain_length(l->value, memo, lets);
      return memo[e.get()] = chain_length(l->body, memo, lets);
    }
    case PrimKind::IntImm:
    case PrimKind::FloatImm:
    case PrimKind::Load:  // its index is not on the value's path
    case PrimKind::ProducerLoad:
    case PrimKind::Reduce:
      return 0;
    default:
      break;
  }
  int64_t longest = 0;
  for (const PrimExpr& x : operands(e)) longest = std::max(longest, chain_length(x, memo, lets));
  return memo[e.get()] = longest + (e.dtype() != DType::Int64 ? 1 : 0);
}

}  // namespace

int64_t chain_length(const PrimExpr& e) {
  std::map<const PrimExprNode*, int64_t> memo;
  std::map<const PrimVarNode*, int64_t> lets;
  return chain_length(e, memo, lets);
}

}  // namespace ember::passes
