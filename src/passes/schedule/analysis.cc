#include "analysis.h"

#include <algorithm>
#include <map>
#include <vector>

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
  std::vector<PrimExpr> inputs;
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
    case PrimKind::Binary:
      inputs = {e.as<BinaryNode>()->a, e.as<BinaryNode>()->b};
      break;
    case PrimKind::Compare:
      inputs = {e.as<CompareNode>()->a, e.as<CompareNode>()->b};
      break;
    case PrimKind::Not:
      inputs = {e.as<NotNode>()->a};
      break;
    case PrimKind::Select:
      inputs = {e.as<SelectNode>()->cond, e.as<SelectNode>()->t, e.as<SelectNode>()->f};
      break;
    case PrimKind::Cast:
      inputs = {e.as<CastNode>()->value};
      break;
    case PrimKind::Reinterpret:
      inputs = {e.as<ReinterpretNode>()->value};
      break;
    case PrimKind::Call:
      inputs = e.as<PrimCallNode>()->args;
      break;
    default:  // constants, loads (their indices are not on the value's path)
      return 0;
  }
  int64_t longest = 0;
  for (const PrimExpr& x : inputs) longest = std::max(longest, chain_length(x, memo, lets));
  return memo[e.get()] = longest + (e.dtype() != DType::Int64 ? 1 : 0);
}

}  // namespace

int64_t chain_length(const PrimExpr& e) {
  std::map<const PrimExprNode*, int64_t> memo;
  std::map<const PrimVarNode*, int64_t> lets;
  return chain_length(e, memo, lets);
}

}  // namespace ember::passes
