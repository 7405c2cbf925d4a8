#include "ember/passes/bind_params.h"

#include <fmt/format.h>

#include "ember/support/error.h"

namespace ember::passes {

using namespace ir;

// The one check of `params` against the function (ember.build passes them through): each
// error names the param and says what to pass instead.
Function bind_params(const Function& f, const std::map<std::string, runtime::NDArray>& params) {
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
      fail("ember.build: params has '", name, "', which is not a parameter of the function; ",
           names.empty() ? std::string("the function has no parameters")
                         : "its parameters are " + fmt::format("{}", fmt::join(names, ", ")),
           " (bind each array to the name of the parameter it replaces)");
    const TensorType& want = it->second->type.tensor();
    TensorType got{value.shape(), value.dtype()};
    if (want != got)
      fail("ember.build: param '", name, "' is ", to_string(got),
           " but the function declares it as ", to_string(want),
           "; pass an array of that shape and dtype");
  }
  return rewrite(f, [&](const Expr& e, const std::vector<Expr>&) -> Expr {
    if (e->kind != NodeKind::Var) return nullptr;
    auto it = params.find(e->name);
    return it == params.end() ? nullptr : constant(it->second, e->name);
  });
}

}  // namespace ember::passes
