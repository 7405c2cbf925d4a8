// LegalizeBF16: see legalize_bf16.h.
#include "ember/passes/legalize_bf16.h"

#include <set>
#include <string>
#include <vector>

#include "ember/ir/op.h"

namespace ember::passes {

using namespace ir;

namespace {

// Ops that move elements without computing on them (exact in bfloat16), and those made for
// bfloat16 operands (nn.pack_bf16_pairs, the bfloat16 products' packing, and the blocked
// bfloat16 conv, which reads its activations' pairs as words).
bool moves_only(const std::string& op) {
  static const std::set<std::string> kOps = {
      "nn.pack_bf16_pairs", "cast",         "reshape",     "flatten", "transpose",
      "to_blocked",         "from_blocked", "concatenate", "squeeze", "strided_slice",
      "expand_dims",        "broadcast_to", "take",        "gather",  "adv_index"};
  return kOps.count(op) != 0 || op == "nn.conv2d_bf16_blocked";
}

bool is_bf16(const TensorType& t) { return t.dtype == DType::BFloat16; }

Expr cast_to(const Expr& e, DType t, const std::string& name) {
  return call("cast", {e}, Attrs().with("dtype", std::string(dtype_name(t))), name);
}

}  // namespace

Function legalize_bf16(const Function& f) {
  return rewrite(f, [](const Expr& e, const std::vector<Expr>& in) -> Expr {
    auto* c = as<CallNode>(e);
    if (!c || !c->op || moves_only(c->op->name)) return nullptr;
    bool any = false;
    std::vector<Expr> args = in;
    for (Expr& a : args)
      if (!a->type.is_tuple && is_bf16(a->type.tensor())) {
        a = cast_to(a, DType::Float32, c->name);
        any = true;
      }
    if (!any) return nullptr;
    Expr r = call(c->op, args, c->attrs, c->name);
    const Type& was = e->type;
    // Each result that was bfloat16 and is now float32 is rounded back.
    auto back = [&](const Expr& v, const TensorType& old) {
      return is_bf16(old) && v->type.tensor().dtype == DType::Float32
                 ? cast_to(v, DType::BFloat16, c->name)
                 : v;
    };
    if (!was.is_tuple) return back(r, was.tensor());
    std::vector<Expr> fields;
    for (size_t k = 0; k < was.fields.size(); ++k)
      fields.push_back(back(tuple_get_item(r, static_cast<int64_t>(k), c->name), was.fields[k]));
    return tuple(fields, c->name);
  });
}

}  // namespace ember::passes
