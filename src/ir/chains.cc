#include "ember/ir/chains.h"

#include <algorithm>
#include <map>

namespace ember::ir {

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

bool is_long_chain_loop(const ForNode* loop) {
  if (loop->for_kind != ForKind::Serial) return false;
  auto* vec = loop->body.as<ForNode>();
  if (!vec || vec->for_kind != ForKind::Vectorized) return false;
  auto* st = vec->body.as<StoreNode>();
  return st && chain_length(st->value) >= kLongChain;
}

}  // namespace ember::ir
