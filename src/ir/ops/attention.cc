// nn.attention(q, k, v[, mask]; scale, causal): softmax(q k^T * scale + mask) v as one op,
// torch.nn.functional.scaled_dot_product_attention's semantics.
//
//   q [..., L, E], k [..., S, E], v [..., S, Ev]  (the same batch dimensions "...")
//   mask (optional) broadcastable to [..., L, S]: bool keeps the True positions (the others
//        score -inf), a float mask is added to the scores
//   causal  query i attends to keys j <= i (top-left aligned, as torch's is_causal)
//   scale   defaults to 1 / sqrt(E)
//   -> [..., L, Ev]
//
// The compute rule below is the reference form (scores, row max, exp, row sum, weighted sum
// of v); it materialises the scores and is what the GPU path uses. On the CPU the op is
// lowered by its own loop nest (src/passes/lower/attention.cc): online softmax over key
// blocks that never holds the L x S score matrix.
#include <cmath>
#include <string>
#include <vector>

#include "ember/ir/prim_math.h"
#include "op_util.h"

namespace ember::ir {
namespace {

using namespace ops;

Type attention_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  if (args.size() != 3 && args.size() != 4)
    ctx.fail("takes 3 inputs (q, k, v) or 4 (q, k, v, mask) but was given " +
             std::to_string(args.size()));
  const TensorType& q = tensor_arg(args, 0, "q", ctx);
  const TensorType& k = tensor_arg(args, 1, "k", ctx);
  const TensorType& v = tensor_arg(args, 2, "v", ctx);
  check_float(q, "q", ctx);
  check_same_dtype(q, "q", k, "k", ctx);
  check_same_dtype(q, "q", v, "v", ctx);
  for (auto* t : {&q, &k, &v})
    if (t->ndim() < 2)
      ctx.fail("q, k and v must be [..., rows, features] but got " + to_string(*t));
  std::vector<int64_t> batch(q.shape.begin(), q.shape.end() - 2);
  for (auto [t, what] : {std::pair{&k, "k"}, std::pair{&v, "v"}})
    if (std::vector<int64_t>(t->shape.begin(), t->shape.end() - 2) != batch)
      ctx.fail(std::string(what) + " is " + to_string(*t) + " but q is " + to_string(q) +
               ": q, k and v must have the same batch dimensions; broadcast them first");
  int64_t L = q.shape[q.ndim() - 2], E = q.shape.back();
  int64_t S = k.shape[k.ndim() - 2];
  if (k.shape.back() != E)
    ctx.fail("k is " + to_string(k) + " but q is " + to_string(q) +
             ": the last dimension (features) of q and k must be equal");
  if (v.shape[v.ndim() - 2] != S)
    ctx.fail("v is " + to_string(v) + " but k is " + to_string(k) +
             ": k and v must have the same number of rows (keys)");
  std::vector<int64_t> scores = batch;
  scores.push_back(L);
  scores.push_back(S);
  if (args.size() == 4) {
    const TensorType& m = tensor_arg(args, 3, "the mask", ctx);
    if (m.dtype != DType::Bool && m.dtype != q.dtype)
      ctx.fail("the mask is " + to_string(m) + " but must be bool or " + dtype_name(q.dtype) +
               " like q; cast it");
    bool fits = m.ndim() <= static_cast<int64_t>(scores.size());
    for (int64_t d = 0; fits && d < m.ndim(); ++d) {
      int64_t target = scores[scores.size() - m.ndim() + d];
      fits = m.shape[d] == 1 || m.shape[d] == target;
    }
    if (!fits)
      ctx.fail("the mask " + to_string(m) + " does not broadcast to the scores " +
               ints_str(scores) + " (batch..., queries, keys)");
  }
  double scale = attrs.get_float("scale", 1.0 / std::sqrt(static_cast<double>(E)));
  if (!std::isfinite(scale))
    ctx.fail("scale must be a finite number, got " + std::to_string(scale));
  int64_t causal = attrs.get_int("causal", 0);
  if (causal != 0 && causal != 1) ctx.fail("causal must be 0 or 1, got " + std::to_string(causal));
  attrs = attrs.with("scale", scale).with("causal", causal);
  std::vector<int64_t> out = batch;
  out.push_back(L);
  out.push_back(v.shape.back());
  return TensorType{out, q.dtype};
}

Tensor attention_compute(const std::vector<Tensor>& in, const Attrs& attrs, const TensorType& out) {
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  DType t = q.dtype();
  size_t nb = out.shape.size() - 2;  // batch dimensions
  int64_t S = k.shape()[nb];
  std::vector<int64_t> scores_shape(out.shape.begin(), out.shape.end() - 1);  // [..., L, S]
  scores_shape.push_back(S);
  std::vector<int64_t> rows(out.shape.begin(), out.shape.end() - 1);  // [..., L]
  PrimExpr scale = make_const(t, attrs.get_float("scale", 1.0));
  bool causal = attrs.get_int("causal", 0) != 0;
  // The first n indices of i followed by `extra`.
  auto prefix = [](const std::vector<PrimVar>& i, size_t n, std::vector<PrimExpr> extra) {
    std::vector<PrimExpr> r(i.begin(), i.begin() + n);
    r.insert(r.end(), extra.begin(), extra.end());
    return r;
  };

  IterVar e = reduce_axis(q.shape().back(), "e");
  Tensor dots = compute("attention_dots", scores_shape, [&](const std::vector<PrimVar>& i) {
    return sum(q(prefix(i, nb + 1, {e->var})) * k(prefix(i, nb, {i[nb + 1], e->var})), {e});
  });
  Tensor logits = compute("attention_logits", scores_shape, [&](const std::vector<PrimVar>& i) {
    PrimExpr x = dots(as_exprs(i)) * scale;
    if (in.size() == 4) {
      const Tensor& m = in[3];
      PrimExpr mv = m(broadcast_index(m, i));
      x = m.dtype() == DType::Bool ? select(mv, x, make_const(t, -INFINITY)) : x + mv;
    }
    if (causal) x = select(i[nb + 1] <= i[nb], x, make_const(t, -INFINITY));
    return x;
  });
  IterVar j1 = reduce_axis(S, "j");
  Tensor mx = compute("attention_max", rows, [&](const std::vector<PrimVar>& i) {
    return max_reduce(logits(prefix(i, nb + 1, {j1->var})), {j1});
  });
  Tensor ex = compute("attention_exp", scores_shape, [&](const std::vector<PrimVar>& i) {
    return exp(logits(as_exprs(i)) - mx(prefix(i, nb + 1, {})));
  });
  IterVar j2 = reduce_axis(S, "j");
  Tensor total = compute("attention_sum", rows, [&](const std::vector<PrimVar>& i) {
    return sum(ex(prefix(i, nb + 1, {j2->var})), {j2});
  });
  IterVar j3 = reduce_axis(S, "j");
  Tensor weighted = compute("attention_pv", out.shape, [&](const std::vector<PrimVar>& i) {
    return sum(ex(prefix(i, nb + 1, {j3->var})) * v(prefix(i, nb, {j3->var, i[nb + 1]})), {j3});
  });
  return compute("attention", out.shape, [&](const std::vector<PrimVar>& i) {
    return weighted(as_exprs(i)) / total(prefix(i, nb + 1, {}));
  });
}

[[maybe_unused]] const Op* kAttention =
    register_op({"nn.attention", -1, OpPattern::Opaque, attention_rel, attention_compute});

}  // namespace
}  // namespace ember::ir
