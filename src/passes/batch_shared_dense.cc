// BatchSharedDense: see batch_shared_dense.h. One group is rewritten at a time, so that the
// combined call is built from inputs that the rewrite leaves unchanged (they read no call of
// the group); the next group is then found in the rewritten graph.
#include "ember/passes/batch_shared_dense.h"

#include <map>
#include <set>
#include <vector>

#include "ember/ir/op.h"

namespace ember::passes {

using namespace ir;

namespace {

// The nodes of `nodes` (in post order) that are, or read, one of `targets`: one pass over
// the graph, producers first, no recursion (an unrolled RNN is thousands of nodes deep).
std::set<const ExprNode*> readers_of(const std::vector<Expr>& nodes,
                                     const std::set<const ExprNode*>& targets) {
  std::set<const ExprNode*> out;
  for (const Expr& e : nodes) {
    bool reads = targets.count(e.get()) > 0;
    for (const Expr& in : inputs_of(e)) reads = reads || out.count(in.get()) > 0;
    if (reads) out.insert(e.get());
  }
  return out;
}

// A dense whose weight is a constant and whose input is [M, K]: the weight's node, or null.
const ExprNode* shared_weight(const Expr& e) {
  auto* c = as<CallNode>(e);
  if (!c || !c->op || c->op->name != "nn.dense" || c->args.size() != 2) return nullptr;
  if (!as<ConstantNode>(c->args[1]) || c->args[0]->type.is_tuple) return nullptr;
  if (c->args[0]->type.tensor().ndim() != 2) return nullptr;
  return c->args[1].get();
}

// The first group (in post order) of two or more calls sharing a weight whose inputs read
// none of the group's calls; empty when there is none.
std::vector<Expr> find_group(const Function& f) {
  std::map<const ExprNode*, std::vector<Expr>> by_weight;
  std::vector<const ExprNode*> order;
  const std::vector<Expr> nodes = post_order(f->body);
  for (const Expr& e : nodes)
    if (const ExprNode* w = shared_weight(e)) {
      if (!by_weight.count(w)) order.push_back(w);
      by_weight[w].push_back(e);
    }
  for (const ExprNode* w : order) {
    const std::vector<Expr>& calls = by_weight[w];
    if (calls.size() < 2) continue;
    std::set<const ExprNode*> members;
    for (const Expr& c : calls) members.insert(c.get());
    const std::set<const ExprNode*> tainted = readers_of(nodes, members);
    std::map<const ExprNode*, int> same_input;  // two calls on one input compute one thing
    for (const Expr& c : calls) ++same_input[as<CallNode>(c)->args[0].get()];
    std::vector<Expr> group;
    Dim rows = 0;  // the batched rows: their run-time sizes must add up (same symbols)
    for (const Expr& c : calls) {
      const Expr& x = as<CallNode>(c)->args[0];
      const Dim m = x->type.tensor().dim(0);
      const bool adds =
          m.is_static() || rows.is_static() ||
          m.symbols.size() == rows.symbols.size() &&
              std::equal(m.symbols.begin(), m.symbols.end(), rows.symbols.begin(),
                         [](const Symbol& a, const Symbol& b) { return a->name == b->name; });
      if (same_input[x.get()] == 1 && !tainted.count(x.get()) && adds) {
        group.push_back(c);
        rows = rows + m;
      }
    }
    if (group.size() >= 2) return group;
  }
  return {};
}

Function batch_group(const Function& f, const std::vector<Expr>& group) {
  std::vector<Expr> inputs;
  std::vector<std::string> names;
  for (const Expr& c : group) {
    inputs.push_back(as<CallNode>(c)->args[0]);
    names.push_back(c->name);
  }
  const auto* first = as<CallNode>(group[0]);
  const std::string name = join_names(names);
  Expr rows = call("concatenate", inputs, Attrs().with("axis", int64_t{0}), name + " rows");
  Expr batched = call(first->op, {rows, first->args[1]}, first->attrs, name);
  std::map<const ExprNode*, Expr> slices;
  Dim begin = 0;
  for (size_t i = 0; i < group.size(); ++i) {
    const Dim m = inputs[i]->type.tensor().dim(0);
    slices[group[i].get()] =
        call("strided_slice", {batched},
             Attrs().with_dims("begin", {begin}).with_dims("end", {begin + m}), group[i]->name);
    begin = begin + m;
  }
  return rewrite(f, [&](const Expr& e, const std::vector<Expr>&) -> Expr {
    auto it = slices.find(e.get());
    return it == slices.end() ? nullptr : it->second;
  });
}

}  // namespace

Function batch_shared_dense(const Function& f) {
  Function out = f;
  for (std::vector<Expr> group = find_group(out); !group.empty(); group = find_group(out))
    out = batch_group(out, group);
  if (out.get() != f.get()) infer_types(out);
  return out;
}

}  // namespace ember::passes
