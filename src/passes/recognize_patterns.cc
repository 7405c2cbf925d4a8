// RecognizePatterns: composite functions written out as elementwise pieces (as models and
// exporters often do) become one op each, so that FuseOps sees one activation or one
// reduction instead of a chain (see recognize_patterns.h for the patterns). Products are
// matched as a flat list of factors times a scalar coefficient, which makes the match
// independent of how the multiplications are bracketed and ordered.
#include "ember/passes/recognize_patterns.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ember/ir/op.h"

namespace ember::passes {

using namespace ir;

namespace {

// The value of a one-element float constant.
bool scalar(const Expr& e, double* v) {
  auto s = scalar_constant(e, true);
  if (s) *v = *s;
  return s.has_value();
}

bool near(double a, double b) { return std::fabs(a - b) <= 1e-4 * std::fabs(b); }

bool scalar_is(const Expr& e, double want) {
  double v;
  return scalar(e, &v) && near(v, want);
}

// e as coef * terms[0] * terms[1] * ... (multiplies, and divides by a scalar constant).
struct Product {
  double coef = 1.0;
  std::vector<Expr> terms;
};

void flatten(const Expr& e, Product& p) {
  double v;
  if (scalar(e, &v)) {
    p.coef *= v;
  } else if (auto* m = op_call(e, "multiply")) {
    flatten(m->args[0], p);
    flatten(m->args[1], p);
  } else if (auto* d = op_call(e, "divide"); d && scalar(d->args[1], &v) && v != 0.0) {
    flatten(d->args[0], p);
    p.coef /= v;
  } else {
    p.terms.push_back(e);
  }
}

Product product(const Expr& e) {
  Product p;
  flatten(e, p);
  return p;
}

// The power of x that `e` is (x, power(x, k), products of those); 0 if it is not one.
int degree_in(const Expr& e, const Expr& x) {
  Product p = product(e);
  if (!near(p.coef, 1.0) || p.terms.empty()) return 0;
  int total = 0;
  for (auto& t : p.terms) {
    double k;
    if (t == x)
      ++total;
    else if (auto* pw = op_call(t, "power"); pw && pw->args[0] == x && scalar(pw->args[1], &k) &&
                                             k == std::floor(k) && k > 0 && k < 64)
      total += static_cast<int>(k);
    else
      return 0;
  }
  return total;
}

// u for 1 + f(u) or f(u) + 1 with f the unary op `fn`; null otherwise.
Expr one_plus(const Expr& e, const std::string& fn) {
  auto* a = op_call(e, "add");
  if (!a) return nullptr;
  for (int k = 0; k < 2; ++k)
    if (scalar_is(a->args[k], 1.0))
      if (auto* f = op_call(a->args[1 - k], fn)) return f->args[0];
  return nullptr;
}

// u = sqrt(2/pi) * (x + 0.044715 * x^3), either order of the sum.
bool is_tanh_inner(const Expr& u, const Expr& x) {
  Product p = product(u);
  if (!near(p.coef, std::sqrt(2.0 / M_PI)) || p.terms.size() != 1) return false;
  auto* s = op_call(p.terms[0], "add");
  if (!s) return false;
  for (int k = 0; k < 2; ++k) {
    if (s->args[k] != x) continue;
    // 0.044715 * x^3: the coefficient splits off, the remaining factors must make x^3.
    Product cube = product(s->args[1 - k]);
    if (!near(cube.coef, 0.044715) || cube.terms.empty()) continue;
    int deg = 0;
    for (auto& t : cube.terms) {
      int d = degree_in(t, x);
      if (d == 0) return false;
      deg += d;
    }
    if (deg == 3) return true;
  }
  return false;
}

// Names of the calls between `root` and its leaf `x` (x and constants excluded), producers
// first: the source names a pattern's replacement keeps.
std::string names_between(const Expr& root, const Expr& x) {
  std::vector<std::string> names;
  std::set<const ExprNode*> seen;
  std::function<void(const Expr&)> walk = [&](const Expr& e) {
    if (e == x || !seen.insert(e.get()).second) return;
    auto* c = as<CallNode>(e);
    if (!c) return;
    for (auto& a : c->args) walk(a);
    names.push_back(e->name);
  };
  walk(root);
  return join_names(names);
}

Expr make(const std::string& op, const Expr& x, Attrs attrs, const Expr& root,
          const std::string& pattern) {
  return call(op, {x}, attrs.with("fusion_pattern", pattern), names_between(root, x));
}

Expr gelu(const Expr& e) {
  if (!op_call(e, "multiply")) return nullptr;
  Product p = product(e);
  if (!near(p.coef, 0.5) || p.terms.size() != 2) return nullptr;
  for (int k = 0; k < 2; ++k) {
    const Expr& x = p.terms[1 - k];
    if (x->type.is_tuple || !(x->type == e->type) || !is_float(x->type.tensor().dtype)) continue;
    if (Expr t = one_plus(p.terms[k], "erf")) {
      Product q = product(t);
      if (q.terms.size() == 1 && q.terms[0] == x && near(q.coef, 1.0 / std::sqrt(2.0)))
        return make("nn.gelu", x, Attrs({{"approximate", std::string("none")}}), e,
                    "GELU(erf) recognition");
    }
    if (Expr u = one_plus(p.terms[k], "tanh"); u && is_tanh_inner(u, x))
      return make("nn.gelu", x, Attrs({{"approximate", std::string("tanh")}}), e,
                  "GELU(tanh) recognition");
  }
  return nullptr;
}

Attrs reduce_attrs(const CallNode* c) {
  return Attrs(
      {{"axis", c->attrs.get_ints("axis", {})}, {"keepdims", c->attrs.get_int("keepdims", 0)}});
}

bool float_tensor(const Expr& e) { return !e->type.is_tuple && is_float(e->type.tensor().dtype); }

Expr reduction(const CallNode* c, const Expr& e) {
  const std::string& op = c->op->name;
  if (op == "sum") {
    const Expr& in = c->args[0];
    if (auto* a = op_call(in, "abs"); a && float_tensor(a->args[0]))
      return make("l1_norm", a->args[0], reduce_attrs(c), e, "L1Norm recognition");
    if (auto* m = op_call(in, "multiply");
        m && m->args[0] == m->args[1] && float_tensor(m->args[0]))
      return make("sum_squares", m->args[0], reduce_attrs(c), e, "SumSquares recognition");
    if (auto* pw = op_call(in, "power");
        pw && scalar_is(pw->args[1], 2.0) && pw->args[0]->type == in->type)
      return make("sum_squares", pw->args[0], reduce_attrs(c), e, "SumSquares recognition");
  }
  if (op == "sqrt")
    if (auto* s = op_call(c->args[0], "sum_squares"))
      return make("l2_norm", s->args[0], reduce_attrs(s), e, "L2Norm recognition");
  if (op == "log") {
    if (auto* sm = op_call(c->args[0], "nn.softmax"))
      return make("nn.log_softmax", sm->args[0], Attrs({{"axis", sm->attrs.get_int("axis", -1)}}),
                  e, "softmax -> log");
    if (auto* s = op_call(c->args[0], "sum"); s && float_tensor(s->args[0])) {
      if (auto* ex = op_call(s->args[0], "exp"))
        return make("log_sum_exp", ex->args[0], reduce_attrs(s), e, "LogSumExp recognition");
      return make("log_sum", s->args[0], reduce_attrs(s), e, "LogSum recognition");
    }
  }
  return nullptr;
}

// m itself, or m behind torch.logsumexp's guard where(abs(m) == inf, 0, m).
Expr unguard(const Expr& g) {
  auto* w = op_call(g, "where");
  if (!w || !scalar_is(w->args[1], 0.0)) return g;
  auto* eq = op_call(w->args[0], "equal");
  if (!eq) return g;
  double inf;
  for (int k = 0; k < 2; ++k) {
    auto* a = op_call(eq->args[k], "abs");
    if (a && a->args[0] == w->args[2] && scalar(eq->args[1 - k], &inf) && std::isinf(inf) &&
        inf > 0)
      return w->args[2];
  }
  return g;
}

// log_sum_exp(x - g) + g' -> log_sum_exp(x), g = (guarded) max(x) over the same axes with
// keepdims, g' = g or g reshaped to the result.
Expr stable_log_sum_exp(const CallNode* c, const Expr& e) {
  if (c->op->name != "add") return nullptr;
  for (int k = 0; k < 2; ++k) {
    auto* lse = op_call(c->args[k], "log_sum_exp");
    if (!lse || !(lse->type == e->type)) continue;
    auto* sub = op_call(lse->args[0], "subtract");
    if (!sub) continue;
    const Expr& x = sub->args[0];
    const Expr& g = sub->args[1];
    auto* mx = op_call(unguard(g), "max");
    if (!mx || mx->args[0] != x || mx->attrs.get_int("keepdims", 0) != 1 ||
        mx->attrs.get_ints("axis", {}) != lse->attrs.get_ints("axis", {}) ||
        !(x->type == sub->type))
      continue;
    Expr other = c->args[1 - k];
    if (auto* r = op_call(other, "reshape")) other = r->args[0];
    if (other != g) continue;
    return make("log_sum_exp", x, reduce_attrs(lse), e, "LogSumExp recognition");
  }
  return nullptr;
}

// topk(softmax(x, axis=a), axis=a) -> topk(x, softmax=1), likewise for log_softmax, when
// the softmax has no other reader in the input graph (where `original` is this topk): the
// kernel then selects on x and normalises only the k winners (src/ir/ops/topk.cc).
Expr softmax_topk(const CallNode* c, const Expr& e, const Expr& original,
                  const std::map<const ExprNode*, int>& uses) {
  if (c->op->name != "topk" || c->attrs.get_int("softmax", 0) || c->attrs.get_int("log_softmax", 0))
    return nullptr;
  auto it = uses.find(as<CallNode>(original)->args[0].get());
  if (it == uses.end() || it->second != 1) return nullptr;
  for (std::string kind : {"softmax", "log_softmax"}) {
    auto* sm = op_call(c->args[0], "nn." + kind);
    if (sm && sm->attrs.get_int("axis", -1) == c->attrs.get_int("axis", -1))
      return make("topk", sm->args[0], c->attrs.with(kind, int64_t{1}), e, kind + "->topk");
  }
  return nullptr;
}

// nn.dense(x, cast(W)) and nn.matmul(x, cast(transpose(W))) or nn.matmul(x, cast(V)), with
// W [N, K] or V [K, N] an 8-bit integer constant (a weight-only quantized layer, as torchao
// exports it) -> nn.dense(x, W): the kernel reads the 8-bit weights and converts them in its
// loop, a quarter of the bytes a GEMV streams, where FoldConstant would store them widened.
Expr narrow_weight_dense(const CallNode* c, const Expr& e) {
  const bool matmul = c->op->name == "nn.matmul";
  if ((!matmul && c->op->name != "nn.dense") || c->args.size() != 2) return nullptr;
  auto* widen = op_call(c->args[1], "cast");
  if (!widen || !float_tensor(c->args[0]) ||
      !(widen->type.tensor().dtype == c->args[0]->type.tensor().dtype))
    return nullptr;
  Expr w = widen->args[0];
  if (matmul && w->type.tensor().ndim() == 2) {
    auto* t = op_call(w, "transpose");
    w = t && as<ConstantNode>(t->args[0])
            ? t->args[0]
            : call("transpose", {w}, Attrs().with("axes", std::vector<int64_t>{1, 0}), w->name);
  }
  Expr source = w;
  if (auto* t = op_call(w, "transpose")) source = t->args[0];
  auto* constant = as<ConstantNode>(source);
  if (!constant || w->type.tensor().ndim() != 2 || !is_int(constant->type.tensor().dtype) ||
      dtype_bytes(constant->type.tensor().dtype) != 1)
    return nullptr;
  return call("nn.dense", {c->args[0], w},
              Attrs().with("fusion_pattern", std::string("8-bit weight -> dense")),
              names_between(e, c->args[0]));
}

}  // namespace

Function recognize_patterns(const Function& f) {
  std::map<const ExprNode*, int> uses = use_counts(f);
  return rewrite(f, [&](const Expr& e, const std::vector<Expr>& in) -> Expr {
    auto* c = as<CallNode>(e);
    if (!c || !c->op) return nullptr;
    // Match on the node rebuilt over its rewritten inputs, so inner patterns come first.
    Expr node = with_inputs(e, in);
    auto* n = as<CallNode>(node);
    if (Expr r = gelu(node)) return r;
    if (Expr r = reduction(n, node)) return r;
    if (Expr r = stable_log_sum_exp(n, node)) return r;
    if (Expr r = softmax_topk(n, node, e, uses)) return r;
    if (Expr r = narrow_weight_dense(n, node)) return r;
    return node != e ? node : nullptr;
  });
}

}  // namespace ember::passes
