#include "ember/passes/bind_params.h"

#include <fmt/format.h>

#include "ember/support/error.h"

namespace ember::passes {

using namespace ir;

Function bind_params(const Function& f, const std::map<std::string, runtime::Tensor>& params) {
  if (params.empty()) return f;
  std::map<std::string, const ExprNode*> inputs;
  std::vector<std::string> names;
  for (auto& p : f->params) {
    inputs[p->name] = p.get();
    names.push_back(p->name);
  }
  for (auto& [name, value] : params) {
    auto it = inputs.find(name);
    if (it == inputs.end())
      fail("params has '", name, "' but the function has no input of that name; its inputs are: ",
           fmt::format("{}", fmt::join(names, ", ")));
    const TensorType& want = it->second->type.tensor();
    TensorType got{value.shape(), value.dtype()};
    if (want != got)
      fail("param '", name, "' is ", to_string(got), " but the input expects ", to_string(want),
           "; pass a tensor of that shape and dtype");
  }
  return rewrite(f, [&](const Expr& e, const std::vector<Expr>&) -> Expr {
    if (e->kind != NodeKind::Var) return nullptr;
    auto it = params.find(e->name);
    return it == params.end() ? nullptr : constant(it->second, e->name);
  });
}

}  // namespace ember::passes
