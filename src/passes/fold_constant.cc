// FoldConstant: evaluates the parts of the graph that depend on no input.
//
// A node is constant-valued when it is a Constant, or an op call whose arguments are all
// constant-valued and whose type has no run-time sizes. Folding replaces the constant-valued calls
// whose value escapes (read by a node that is not constant-valued, or the function's output) by
// Constants: those are the roots of the maximal constant subgraphs. All roots are evaluated
// together, as the outputs of one function with no inputs, so the whole pass compiles once.
#include "ember/passes/fold_constant.h"

#include <map>
#include <set>
#include <string>

#include "ember/ir/op.h"
#include "ember/support/error.h"

namespace ember::passes {

using namespace ir;

namespace {

// The source names in the subgraph under `root`, each once, joined with " + ". Names that
// are already joined are split so that "conv1 + bn1" and "bn1" give "conv1 + bn1". The
// calls name the value; a bare view of a constant (reshape of a weight) keeps the weight's.
std::string joined_names(const Expr& root) {
  std::vector<std::string> names[2];  // [0]: calls, [1]: constants
  for (auto& e : post_order(root)) names[e->kind == NodeKind::Call ? 0 : 1].push_back(e->name);
  std::string calls = join_names(names[0]);
  return calls.empty() ? join_names(names[1]) : calls;
}

// The evaluator compiles with Ember's own pipeline, which may run FoldConstant again on the
// all-constant function it was given; folding there would recurse forever, so a fold_constant
// nested inside an evaluation leaves its function as it is.
thread_local bool g_evaluating = false;

struct EvaluatingScope {
  EvaluatingScope() { g_evaluating = true; }
  ~EvaluatingScope() { g_evaluating = false; }
};

}  // namespace

Function fold_constant(const Function& f, const ConstEvaluator& evaluate) {
  if (g_evaluating) return f;
  std::vector<Expr> order = post_order(f->body);

  // Constant-valued nodes. Calls of fused functions are left to their own kernels.
  std::set<const ExprNode*> is_const;
  for (auto& e : order) {
    if (e->kind == NodeKind::Constant) {
      is_const.insert(e.get());
    } else if (auto* c = as<CallNode>(e); c && c->op && !e->type.is_tuple) {
      // A value over run-time sizes (arange(seq) as a slice of a constant) has no one value.
      bool all = !e->type.tensor().symbolic();
      for (auto& a : c->args) all = all && is_const.count(a.get());
      if (all) is_const.insert(e.get());
    }
  }

  // Roots: constant-valued calls whose value escapes.
  std::vector<Expr> roots;
  std::set<const ExprNode*> root_set;
  auto add_root = [&](const Expr& e) {
    if (e->kind == NodeKind::Call && is_const.count(e.get()) && root_set.insert(e.get()).second)
      roots.push_back(e);
  };
  for (auto& e : order)
    if (!is_const.count(e.get()))
      for (auto& in : inputs_of(e)) add_root(in);
  add_root(f->body);
  if (roots.empty()) return f;

  EMBER_CHECK(evaluate, "FoldConstant needs a constant evaluator (see passes/pipeline.h)");
  std::vector<runtime::NDArray> values;
  {
    EvaluatingScope scope;
    Expr body = roots.size() == 1 ? roots[0] : tuple(roots);
    values = evaluate(function({}, body, f->name + "_constants"));
  }
  EMBER_CHECK(values.size() == roots.size(), "the constant evaluator returned ", values.size(),
              " tensors for ", roots.size(), " outputs");

  std::map<const ExprNode*, Expr> folded;
  for (size_t i = 0; i < roots.size(); ++i) {
    const TensorType& want = roots[i]->type.tensor();
    EMBER_CHECK(values[i].shape() == want.shape && values[i].dtype() == want.dtype,
                "the constant evaluator returned ", runtime::shape_str(values[i].shape()), " ",
                dtype_name(values[i].dtype()), " for ", to_string(want));
    folded[roots[i].get()] = constant(values[i], joined_names(roots[i]));
  }
  return rewrite(f, [&](const Expr& e, const std::vector<Expr>&) -> Expr {
    auto it = folded.find(e.get());
    return it == folded.end() ? nullptr : it->second;
  });
}

}  // namespace ember::passes
