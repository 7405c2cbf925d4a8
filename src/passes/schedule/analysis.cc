#include "analysis.h"

#include <algorithm>

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

}  // namespace ember::passes
