// Dense products of operands packed in 32-bit words along K (issue 45): int8 products
// (nn.dense_u8s8: four bytes a word, dot_u8s8 into int32) and bfloat16 pairs
// (nn.dense_bf16: two values a word, dot_bf16 into float32). One relation and one compute
// rule serve both kinds, plain ([N, K'] weight words) and packed in nn.pack_dense_weight's
// panels ([ceil(N / block), K', block], attr units = N).
#pragma once

#include <string>
#include <vector>

#include "op_util.h"

namespace ember::ir::ops {

// The type of x [..., K, ...] packed `per_word` elements to an int32 word along attr `axis`
// (normalized in place; default the last): ceil(K / per_word) words there. The caller has
// checked x's element type.
inline Type packed_words_type(const TensorType& x, Attrs& attrs, int64_t per_word,
                              const TypeContext& ctx) {
  if (x.ndim() < 1) ctx.fail("the input must have at least 1 dimension");
  const int64_t axis = normalize_axis(attr_int(attrs, "axis"), x.ndim(), ctx);
  attrs = attrs.with("axis", axis);
  std::vector<int64_t> shape = x.shape;
  shape[axis] = (shape[axis] + per_word - 1) / per_word;
  return TensorType{shape, DType::Int32};
}

// The int8 products' attribute activation_bits: 7 says that every activation byte is below
// 128 (Int8Products proved it: PT2E's reduce_range), so that each step is dot_u7s8, which
// runs without VNNI as vpmaddubsw and vpmaddwd (exact for such bytes).
inline AttrSpec activation_bits_attr() {
  return int_attr("activation_bits", 8,
                  "7: every activation byte is below 128 (the steps are dot_u7s8); else 8");
}
inline void check_activation_bits(const Attrs& attrs, const TypeContext& ctx) {
  const int64_t bits = attr_int(attrs, "activation_bits");
  if (bits != 7 && bits != 8)
    ctx.fail("activation_bits must be 7 (bytes below 128) or 8, got " + std::to_string(bits));
}
// The step of a word product: `dot`, or dot_u7s8 for int8 products of 7-bit activations.
inline Intrinsic word_dot(Intrinsic dot, const Attrs& attrs) {
  const bool seven = dot == Intrinsic::DotU8S8 && attrs.get_int("activation_bits", 8) == 7;
  return seven ? Intrinsic::DotU7S8 : dot;
}

struct WordDense {
  const char* name;   // the compute's name
  Intrinsic dot;      // acc + the products of one word pair
  DType acc;          // the sums' type
  const char* words;  // what the words hold and how to pack them, for errors
};

// x [..., K'] and the weight [N, K'] (or its panels) of int32 words; the output [..., N].
inline Type word_dense_rel(const WordDense& kind, const std::vector<Type>& args, const Attrs& attrs,
                           const TypeContext& ctx, bool packed) {
  check_arity(args, 2, ctx);
  if (kind.dot == Intrinsic::DotU8S8) check_activation_bits(attrs, ctx);
  const TensorType& x = tensor_arg(args, 0, "the activations", ctx);
  const TensorType& w = tensor_arg(args, 1, "the weight", ctx);
  for (const TensorType* t : {&x, &w})
    if (t->dtype != DType::Int32) ctx.fail(to_string(*t) + " is not " + kind.words);
  check_rank(w, packed ? 3 : 2,
             packed ? "the packed weight [N / block, K', block]" : "the weight [N, K']", ctx);
  if (x.ndim() < 1) ctx.fail("the activations must have at least 1 dimension");
  if (x.shape.back() != w.shape[1])
    ctx.fail("the activations have " + std::to_string(x.shape.back()) +
             " words of K but the weight " + std::to_string(w.shape[1]));
  int64_t units = w.shape[0];
  if (packed) {
    units = attr_int(attrs, "units");
    if (units < 1 || (units + w.shape[2] - 1) / w.shape[2] != w.shape[0])
      ctx.fail("units = " + std::to_string(units) + " does not match the packed weight " +
               ints_str(w.shape) + "; pack the weight with nn.pack_dense_weight");
  }
  std::vector<int64_t> shape(x.shape.begin(), x.shape.end() - 1);
  shape.push_back(units);
  return TensorType{shape, kind.acc};
}

// The sum over words k of dot(0, x[..., k], the weight's word (n, k)).
inline Tensor word_dense_compute(const WordDense& kind, const std::vector<Tensor>& in,
                                 const Attrs& attrs, const TensorType& out, bool packed) {
  const Tensor &x = in[0], &w = in[1];
  const int64_t block = packed ? w.shape()[2] : 1;
  IterVar k = reduce_axis(w.shape()[1], "k");
  const Intrinsic dot = word_dot(kind.dot, attrs);
  return compute(kind.name, out.shape, [&](const std::vector<PrimVar>& i) {
    std::vector<PrimExpr> xi(i.begin(), i.end() - 1);
    xi.push_back(k->var);
    const PrimExpr n = i.back();
    PrimExpr word = packed ? w({n / idx(block), k->var, n % idx(block)}) : w({n, k->var});
    return sum(prim_call(dot, {make_const(kind.acc, 0), x(xi), word}), {k});
  });
}

}  // namespace ember::ir::ops
