// dispatch_by_range (range_dispatch.h): the parts' bodies, their parameters swapped for the
// last part's, in an if-else chain on the extent, under the symbols' lets they share.
#include "ember/ir/range_dispatch.h"

#include <set>

#include "ember/support/error.h"

namespace ember::ir {

namespace {

// The lets that read the symbols from the shape argument at the top of `body` (as
// lower_schedule writes them), and the statement under them.
std::pair<std::vector<const LetStmtNode*>, Stmt> symbol_lets(const Stmt& body) {
  std::vector<const LetStmtNode*> lets;
  Stmt s = body;
  while (auto* let = s.as<LetStmtNode>()) {
    auto* load = let->value.as<LoadNode>();
    if (!load || load->buffer->name != "shape_args") break;
    lets.push_back(let);
    s = let->body;
  }
  return {lets, s};
}

// `part`'s parameters mapped to `last`'s, which must match them by name, dtype and rank.
BufferMap match_params(const PrimFunc& part, const PrimFunc& last) {
  if (part.params.size() != last.params.size() || part.num_inputs != last.num_inputs)
    fail("dispatch_by_range: kernel ", part.name, " has ", part.params.size(),
         " parameters, kernel ", last.name, " ", last.params.size());
  BufferMap map;
  for (size_t i = 0; i < part.params.size(); ++i) {
    const Buffer &a = part.params[i], &b = last.params[i];
    if (a->name != b->name || a->dtype != b->dtype || a->shape.size() != b->shape.size())
      fail("dispatch_by_range: parameter ", i, " of kernel ", part.name, " (", a->name,
           ") does not match parameter ", b->name, " of kernel ", last.name);
    map[a.get()] = b;
  }
  return map;
}

}  // namespace

PrimFunc dispatch_by_range(const std::string& name, const PrimExpr& extent,
                           const std::vector<std::pair<int64_t, PrimFunc>>& parts) {
  if (parts.empty()) fail("dispatch_by_range: no kernels for ", name);
  const PrimFunc& last = parts.back().second;
  auto [lets, _] = symbol_lets(last.body);
  std::set<const PrimVarNode*> symbols;
  for (const LetStmtNode* l : lets) symbols.insert(l->var.get());
  visit_prim(extent, [&](const PrimExpr& x) {
    auto* v = x.as<PrimVarNode>();
    if (v && !symbols.count(v))
      fail("dispatch_by_range: kernel ", last.name, " does not read symbol ", v->name);
  });
  Stmt body;
  for (size_t i = parts.size(); i-- > 0;) {
    const auto& [bound, f] = parts[i];
    if (i + 1 < parts.size() && bound >= parts[i + 1].first)
      fail("dispatch_by_range: the bounds of ", name, " do not ascend (", bound, " then ",
           parts[i + 1].first, ")");
    auto [part_lets, inner] = symbol_lets(f.body);
    // The parts read the same symbols in the same order (each lowered on its own, with
    // variables of its own): the last part's variables stand for them.
    if (part_lets.size() != lets.size())
      fail("dispatch_by_range: kernel ", f.name, " reads other symbols than ", last.name);
    VarMap same;
    for (size_t j = 0; j < lets.size(); ++j) {
      if (!structural_equal(part_lets[j]->value.as<LoadNode>()->index,
                            lets[j]->value.as<LoadNode>()->index))
        fail("dispatch_by_range: kernel ", f.name, " reads other symbols than ", last.name);
      if (part_lets[j]->var.get() != lets[j]->var.get())
        same.emplace_back(part_lets[j]->var.get(), lets[j]->var);
    }
    Stmt own = swap_buffers(same.empty() ? inner : substitute(inner, same), match_params(f, last));
    body = i + 1 == parts.size() ? own : if_then_else(extent <= PrimExpr(bound), own, body);
  }
  for (size_t j = lets.size(); j-- > 0;) body = let_stmt(lets[j]->var, lets[j]->value, body);
  return PrimFunc{name, last.params, last.num_inputs, body};
}

std::string dispatch_label(const PrimFunc& f) {
  Stmt s = symbol_lets(f.body).second;
  std::string extent, bounds;
  while (auto* branch = s.as<IfThenElseNode>()) {
    auto* test = branch->cond.as<CompareNode>();
    int64_t bound;
    if (!test || test->op != CompareOp::LE || !as_int(test->b, &bound) || !branch->else_case.get())
      break;
    const std::string tested = to_string(test->a);
    if (!extent.empty() && tested != extent) break;
    extent = tested;
    bounds += (bounds.empty() ? "" : ",") + std::to_string(bound);
    s = branch->else_case;
  }
  return bounds.empty() ? "" : extent + "<=" + bounds;
}

PrimExpr run_dim(const Dim& d, const std::map<std::string, PrimVar>& vars) {
  if (d.is_static()) return {};
  PrimExpr e;
  for (const Symbol& s : d.symbols) e = e.get() ? e * vars.at(s->name) : PrimExpr(vars.at(s->name));
  if (d.coef != 1) e = PrimExpr(d.coef) * e;
  return d.offset == 0 ? e : e + PrimExpr(d.offset);
}

KernelSymbols::KernelSymbols(std::vector<PrimVar> in_order) : order(std::move(in_order)) {
  for (const PrimVar& v : order) vars.emplace(v.name(), v);
  if (!order.empty())
    shape_args = make_buffer("shape_args", DType::Int64, {static_cast<int64_t>(order.size())});
}

namespace {

std::vector<PrimVar> symbol_vars(const Function& group) {
  std::vector<PrimVar> out;
  for (const Symbol& s : function_symbols(group)) out.emplace_back(s->name);
  return out;
}

}  // namespace

KernelSymbols::KernelSymbols(const Function& group) : KernelSymbols(symbol_vars(group)) {}

PrimExpr KernelSymbols::dim(const Dim& d) const {
  return d.is_static() ? PrimExpr(d.offset) : run_dim(d, vars);
}

Stmt KernelSymbols::bind(Stmt body) const {
  for (size_t i = order.size(); i-- > 0;)
    body = let_stmt(order[i], load(shape_args, PrimExpr(static_cast<int64_t>(i))), body);
  return body;
}

}  // namespace ember::ir
