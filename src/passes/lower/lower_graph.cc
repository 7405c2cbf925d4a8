#include <map>

#include "ember/ir/op.h"
#include "ember/passes/lower.h"
#include "ember/passes/schedule.h"
#include "ember/support/error.h"

namespace ember::passes {

using namespace ir;

namespace {

std::string symbol_name(const std::string& op, size_t index) {
  std::string s = "k" + std::to_string(index) + "_";
  for (char c : op) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return s;
}

}  // namespace

PrimFunc lower_call(const CallNode* call, const std::string& func_name,
                    const LowerOptions& options) {
  std::vector<ir::Tensor> inputs;
  for (size_t i = 0; i < call->args.size(); ++i) {
    const TensorType& t = call->args[i]->type.tensor();
    inputs.push_back(placeholder("p" + std::to_string(i), t.shape, t.dtype));
  }
  ir::Tensor out = call->op->compute(inputs, call->attrs, call->type.tensor());
  EMBER_CHECK(out && out.shape() == call->type.tensor().shape && out.dtype() == call->type.tensor().dtype,
              "compute rule of ", call->op->name, " disagrees with its type relation");
  // An op whose compute returns an input unchanged still needs a kernel that copies it.
  if (out->is_placeholder())
    out = compute(call->op->name, out.shape(), [&](const std::vector<PrimVar>& i) {
      return out(std::vector<PrimExpr>(i.begin(), i.end()));
    });
  Schedule sch({out});
  if (options.gpu) apply_gpu_schedule(sch);
  else apply_default_schedule(sch, options.vector_bits);
  return lower_schedule(sch, func_name, inputs);
}

LoweredGraph lower_graph(const Function& f, const LowerOptions& options) {
  LoweredGraph out;
  runtime::ExecGraph& g = out.graph;
  std::map<const ExprNode*, std::vector<int>> values;  // node -> value ids (tuples: several)
  auto new_value = [&](const TensorType& t) {
    g.values.push_back({t.shape, t.dtype});
    return static_cast<int>(g.values.size()) - 1;
  };
  for (auto& p : f->params) {
    int v = new_value(p->type.tensor());
    g.inputs.push_back({p->name, v});
    values[p.get()] = {v};
  }
  for (auto& e : post_order(f->body)) {
    if (values.count(e.get())) continue;
    switch (e->kind) {
      case NodeKind::Var:
        fail("input '", e->name, "' is used but is not a parameter of the function");
      case NodeKind::Constant: {
        auto* c = static_cast<const ConstantNode*>(e.get());
        int v = new_value(e->type.tensor());
        std::string name = c->name.empty() ? "const" + std::to_string(g.params.size()) : c->name;
        g.params.push_back({name, v, c->value});
        values[e.get()] = {v};
        break;
      }
      case NodeKind::Tuple: {
        std::vector<int> ids;
        for (auto& x : static_cast<const TupleNode*>(e.get())->fields) {
          auto& fv = values.at(x.get());
          ids.insert(ids.end(), fv.begin(), fv.end());
        }
        values[e.get()] = ids;
        break;
      }
      case NodeKind::TupleGetItem: {
        auto* t = static_cast<const TupleGetItemNode*>(e.get());
        values[e.get()] = {values.at(t->tuple.get()).at(t->index)};
        break;
      }
      case NodeKind::Call: {
        auto* c = static_cast<const CallNode*>(e.get());
        int v = new_value(e->type.tensor());
        values[e.get()] = {v};
        if (c->op->is_view) {
          g.views.push_back({v, values.at(c->args[0].get()).at(0)});
          break;
        }
        std::string func = symbol_name(c->op->name, out.funcs.size());
        out.funcs.push_back(lower_call(c, func, options));
        runtime::ExecGraph::Kernel k;
        k.func = func;
        k.name = c->name.empty() ? c->op->name : c->name;
        for (auto& a : c->args) k.args.push_back(values.at(a.get()).at(0));
        k.num_inputs = static_cast<int>(c->args.size());
        k.args.push_back(v);
        g.kernels.push_back(k);
        out.kernels.push_back({func, k.name, {c->op->name}, c->op->name});
        break;
      }
      case NodeKind::Function:
        fail("nested functions are not supported; inline the inner function first");
    }
  }
  g.outputs = values.at(f->body.get());
  return out;
}

}  // namespace ember::passes
