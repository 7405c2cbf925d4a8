// RecognizeAttention: scaled dot-product attention written as separate ops becomes one
// nn.attention call, which lowers to an online-softmax kernel (src/passes/lower/
// attention.cc) that never stores the L x S score and probability matrices.
//
// The matcher starts at the second product, batch_matmul(P, V), and walks up:
//   P      = softmax(X, last axis), seen through reshapes that only flatten batch dims
//   X      = masks over Y: where(keep, ., -inf), where(drop, -inf, .), add(., float mask);
//            at most one mask plus one causal where (a constant tril keep-mask)
//   Y      = scale ops over Z: multiply or divide by a scalar constant, any number
//   Z      = batch_matmul(Q, K^T) (or nn.matmul of 2-D operands), through batch reshapes
//   K^T    = transpose(K) over the last two axes (otherwise a transpose is inserted)
// Masks come after the scale, as in every attention written by hand or by the frontend, so
// the float mask is not scaled. Every node between the inputs and the output must have no
// other use: a model that also returns the probabilities keeps its ops.
//
// The match is made on the input graph (with its use counts); the rewrite then builds the
// call from the rewritten q, k, v and mask, so stacked attention layers all fuse.
#include "ember/passes/recognize_attention.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "ember/ir/op.h"
#include "ember/support/error.h"

namespace ember::passes {

using namespace ir;

namespace {

// The value of a one-element float constant.
bool scalar_value(const Expr& e, double* out) {
  auto s = scalar_constant(e, true);
  if (s) *out = *s;
  return s.has_value();
}

bool is_neg_inf(const Expr& e) {
  double v;
  return scalar_value(e, &v) && std::isinf(v) && v < 0;
}

// Shapes are compared as dimensions, run-time ones included (issue 44): two dimensions with
// the same largest value may still differ in a run.
std::vector<Dim> last2(const Expr& e) {
  std::vector<Dim> d = e->type.tensor().all_dims();
  return d.size() < 2 ? d : std::vector<Dim>(d.end() - 2, d.end());
}

std::vector<Dim> batch_of(const Expr& e) {
  std::vector<Dim> d = e->type.tensor().all_dims();
  return d.size() < 2 ? std::vector<Dim>{} : std::vector<Dim>(d.begin(), d.end() - 2);
}

// Whether `a` and `b` have the same number of elements in every run.
bool same_product(const std::vector<Dim>& a, const std::vector<Dim>& b) {
  auto product = [](const std::vector<Dim>& v) {
    Dim n = 1;
    for (const Dim& d : v) n = n * d;
    return n;
  };
  try {
    return product(a) == product(b);
  } catch (const Error&) {
    return false;  // a product of no run-time form (seq * seq): not a batch reshape we know
  }
}

// Whether strided_slice `s` keeps the leading part of its input (begins 0, steps 1).
bool leading_part(const CallNode& s) {
  for (int64_t b : s.attrs.get_ints("begin", {}))
    if (b != 0) return false;
  for (int64_t step : s.attrs.get_ints("strides", {}))
    if (step != 1) return false;
  return true;
}

// A constant bool [.., L, S] mask (leading dims 1) that is tril: keeps j <= i. Over run-time
// sizes, the leading [L, S] of one made at their maxima (the frontend's form), a tril too.
bool is_causal_mask(const Expr& e, const Dim& L_dim, const Dim& S_dim) {
  if (last2(e) != std::vector<Dim>{L_dim, S_dim}) return false;
  Expr whole = e;
  while (auto* s = op_call(whole, "strided_slice")) {
    if (!leading_part(*s)) return false;
    whole = s->args[0];
  }
  auto* c = as<ConstantNode>(whole);
  if (!c || c->value.dtype() != DType::Bool || c->value.shape().size() < 2) return false;
  const int64_t L = c->value.shape().end()[-2], S = c->value.shape().back();
  if (c->value.numel() != L * S) return false;
  const uint8_t* d = c->value.data_as<uint8_t>();
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < S; ++j)
      if ((d[i * S + j] != 0) != (j <= i)) return false;
  return true;
}

// One recognised attention, in terms of nodes of the input graph.
struct Match {
  Expr q, k, v, mask;
  bool k_transposed = false;  // k is K^T [.., E, S]: a transpose must be inserted
  bool drop_mask = false;     // mask is True where scores are dropped: logical_not it
  bool causal = false;
  double scale = 1.0;
  std::vector<Dim> batch;  // the softmax's batch dimensions
  std::vector<std::string> names;
};

class Matcher {
 public:
  explicit Matcher(const Function& f) : uses_(use_counts(f)) {}

  // `e` is batch_matmul(P, V) (or a 2-D nn.matmul) ending an attention.
  bool match(const Expr& e, Match* m) {
    auto* pv = op_call(e, "nn.batch_matmul");
    if (!pv && !(pv = op_call(e, "nn.matmul"))) return false;
    if (pv->op->name == "nn.matmul" &&
        (batch_of(pv->args[0]).size() || batch_of(pv->args[1]).size()))
      return false;
    if (!is_float(e->type.tensor().dtype)) return false;
    note(e, m);
    Expr sm = strip(pv->args[0], m);
    auto* softmax = op_call(sm, "nn.softmax");
    if (!softmax || !inner(sm) ||
        softmax->attrs.get_int("axis", -1) != sm->type.tensor().ndim() - 1)
      return false;
    note(sm, m);
    m->batch = batch_of(sm);
    auto [L, S] = std::pair{last2(sm)[0], last2(sm)[1]};
    if (!same_product(batch_of(pv->args[0]), m->batch) ||
        !same_product(batch_of(pv->args[1]), m->batch))
      return false;
    m->v = pv->args[1];
    if (!match_masks(softmax->args[0], L, S, m)) return false;
    return m->q && m->k && m->v;
  }

  bool single_use(const Expr& e) const { return inner(e); }

 private:
  bool inner(const Expr& e) const {
    auto it = uses_.find(e.get());
    return it != uses_.end() && it->second == 1;
  }

  void note(const Expr& e, Match* m) const {
    if (!e->name.empty() && std::find(m->names.begin(), m->names.end(), e->name) == m->names.end())
      m->names.push_back(e->name);
  }

  // Steps up through single-use reshapes that keep the last two dimensions.
  Expr strip(Expr e, Match* m) const {
    while (auto* r = op_call(e, "reshape")) {
      if (!inner(e) || last2(r->args[0]) != last2(e) || r->args[0]->type.tensor().ndim() < 2) break;
      note(e, m);
      e = r->args[0];
    }
    return e;
  }

  // X = masks over the scaled scores; tries each operand of an add as the scores.
  bool match_masks(const Expr& x, const Dim& L, const Dim& S, Match* m) {
    const TensorType& t = x->type.tensor();
    if (!inner(x)) return false;
    if (auto* w = op_call(x, "where")) {
      bool keep = is_neg_inf(w->args[2]), drop = is_neg_inf(w->args[1]);
      const Expr& rest = keep ? w->args[1] : w->args[2];
      if ((!keep && !drop) || rest->type.tensor() != t) return false;
      Match saved = *m;
      if (keep && !m->causal && is_causal_mask(w->args[0], L, S)) {
        m->causal = true;
      } else if (!m->mask) {
        m->mask = w->args[0];
        m->drop_mask = drop;
        // masked_fill(~keep, -inf) drops where not keep: keep is the mask.
        if (auto* n = op_call(m->mask, "logical_not"); n && drop) {
          m->mask = n->args[0];
          m->drop_mask = false;
        }
      } else {
        return false;
      }
      note(x, m);
      if (match_masks(rest, L, S, m)) return true;
      *m = saved;
      return false;
    }
    if (auto* a = op_call(x, "add")) {
      if (m->mask) return match_scale(x, m);
      for (int side = 0; side < 2; ++side) {
        const Expr &rest = a->args[side], &mask = a->args[1 - side];
        if (rest->type.tensor() != t || mask->type.tensor().dtype != t.dtype) continue;
        Match saved = *m;
        m->mask = mask;
        note(x, m);
        if (match_masks(rest, L, S, m)) return true;
        *m = saved;
      }
      return false;
    }
    return match_scale(x, m);
  }

  // Y = multiply/divide by scalar constants over Z = Q K^T.
  bool match_scale(const Expr& y, Match* m) {
    if (!inner(y)) return false;
    auto* mul = op_call(y, "multiply");
    auto* div = op_call(y, "divide");
    if (mul || div) {
      const CallNode* c = mul ? mul : div;
      double value;
      for (int side = 0; side < (mul ? 2 : 1); ++side) {
        if (!scalar_value(c->args[1 - side], &value) || !(c->args[side]->type == y->type)) continue;
        if (div && value == 0) return false;
        m->scale *= mul ? value : 1.0 / value;
        note(y, m);
        return match_scores(c->args[side], m);
      }
      return false;
    }
    return match_scores(y, m);
  }

  bool match_scores(const Expr& z, Match* m) {
    if (!inner(z)) return false;
    Expr qk = strip(z, m);
    auto* mm = op_call(qk, "nn.batch_matmul");
    if (!mm && (mm = op_call(qk, "nn.matmul")) &&
        (batch_of(mm->args[0]).size() || !m->batch.empty()))
      return false;
    if (!mm || !inner(qk)) return false;
    note(qk, m);
    if (!same_product(batch_of(mm->args[0]), m->batch) ||
        !same_product(batch_of(mm->args[1]), m->batch))
      return false;
    m->q = mm->args[0];
    // K^T through batch reshapes; a transpose of the last two axes gives K itself.
    Expr kt = strip(mm->args[1], m);
    if (auto* tr = op_call(kt, "transpose"); tr && inner(kt)) {
      std::vector<int64_t> axes = tr->attrs.get_ints("axes", {});
      int64_t n = static_cast<int64_t>(axes.size());
      bool swap_last = n >= 2 && axes[n - 1] == n - 2 && axes[n - 2] == n - 1;
      for (int64_t d = 0; swap_last && d < n - 2; ++d) swap_last = axes[d] == d;
      if (swap_last) {
        note(kt, m);
        m->k = tr->args[0];
        return true;
      }
    }
    m->k = mm->args[1];
    m->k_transposed = true;
    return true;
  }

  std::map<const ExprNode*, int> uses_;
};

// `x` ([.., rows, cols], batch flattened or not) with the batch dimensions `batch`. A
// reshape only moves batch boundaries, so its input serves as well as it.
Expr with_batch(const Expr& x, const std::vector<Dim>& batch, const std::string& name) {
  Expr e = x;
  while (auto* r = op_call(e, "reshape")) {
    if (last2(r->args[0]) != last2(e) || r->args[0]->type.tensor().ndim() < 2) break;
    e = r->args[0];
  }
  if (batch_of(e) == batch) return e;
  if (batch_of(x) == batch) return x;
  std::vector<Dim> shape = batch;
  for (const Dim& d : last2(e)) shape.push_back(d);
  return call("reshape", {e}, Attrs().with_dims("newshape", shape), name);
}

}  // namespace

Function recognize_attention(const Function& f) {
  Matcher matcher(f);
  std::map<const ExprNode*, Match> matches;
  for (auto& e : post_order(f->body)) {
    Match m;
    if (matcher.match(e, &m)) {
      matches[e.get()] = m;
    } else if (auto* r = op_call(e, "reshape");
               r && matches.count(r->args[0].get()) && matcher.single_use(r->args[0]) &&
               batch_of(e) == matches[r->args[0].get()].batch && last2(e) == last2(r->args[0])) {
      // The reshape that restores the batch dimensions after batch_matmul: nn.attention
      // produces that shape itself.
      matches[e.get()] = matches[r->args[0].get()];
      matches.erase(r->args[0].get());
    }
  }
  if (matches.empty()) return f;
  std::map<const ExprNode*, Expr> new_of;  // input-graph node -> rewritten node
  return rewrite(f, [&](const Expr& e, const std::vector<Expr>& new_inputs) -> Expr {
    std::vector<Expr> old_inputs = inputs_of(e);
    for (size_t i = 0; i < old_inputs.size() && i < new_inputs.size(); ++i)
      new_of[old_inputs[i].get()] = new_inputs[i];
    auto it = matches.find(e.get());
    if (it == matches.end()) return nullptr;
    const Match& m = it->second;
    auto mapped = [&](const Expr& x) {
      auto n = new_of.find(x.get());
      return n == new_of.end() ? x : n->second;
    };
    std::string name = join_names(m.names);
    Expr q = with_batch(mapped(m.q), m.batch, name);
    Expr k = with_batch(mapped(m.k), m.batch, name);
    if (m.k_transposed) {
      std::vector<int64_t> axes;
      for (size_t d = 0; d < m.batch.size() + 2; ++d) axes.push_back(static_cast<int64_t>(d));
      std::swap(axes[axes.size() - 1], axes[axes.size() - 2]);
      k = call("transpose", {k}, Attrs({{"axes", axes}}), name);
    }
    std::vector<Expr> args = {q, k, with_batch(mapped(m.v), m.batch, name)};
    if (m.mask) {
      Expr mask = mapped(m.mask);
      if (m.drop_mask) mask = call("logical_not", {mask}, {}, name);
      args.push_back(mask);
    }
    Attrs attrs({{"scale", m.scale},
                 {"causal", int64_t{m.causal ? 1 : 0}},
                 {"fusion_pattern", std::string("attention (online softmax)")}});
    Expr out;
    try {
      out = call("nn.attention", args, attrs, name);
    } catch (const Error&) {
      // Operands nn.attention does not take (e.g. batch broadcasting). An InternalError is
      // not an Error: it propagates.
      return nullptr;
    }
    const TensorType& want = e->type.tensor();
    if (out->type.tensor() == want) return out;
    return call("reshape", {out}, Attrs().with_dims("newshape", want.all_dims()), name);
  });
}

}  // namespace ember::passes
