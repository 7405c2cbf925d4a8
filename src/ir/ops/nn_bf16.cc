// bfloat16 products (issue 45): nn.pack_bf16_pairs, nn.dense_bf16 and its panel-packed form
// nn.dense_bf16_packed. A bfloat16 GEMM's operands travel as int32 words of two consecutive
// bfloat16 values along K (element 2k in the low half, as one load of the pair would read
// them), so that one dot_bf16 (vdpbf16ps on AVX512_BF16 CPUs) adds two products into each
// float32 lane: x2 [..., K/2] holds the activations, w2 [N, K/2] the weights. The result is
// float32 (the sums accumulate in float32, as PyTorch's bfloat16 GEMM); the caller rounds.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "op_util.h"

namespace ember::ir {
namespace {

using namespace ops;

// ---------------------------------------------------------------- pack_bf16_pairs

// x (bfloat16) [..., K] -> int32 [..., ceil(K / 2)]: word k holds x[2k] in its low half and
// x[2k + 1] in its high half, zero past K.
Type pack_bf16_pairs_rel(const std::vector<Type>& args, Attrs&, const TypeContext& ctx) {
  check_arity(args, 1, ctx);
  const TensorType& x = tensor_arg(args, 0, "the input", ctx);
  if (x.dtype != DType::BFloat16)
    ctx.fail("the input is " + to_string(x) + " but nn.pack_bf16_pairs packs bfloat16 values");
  if (x.ndim() < 1) ctx.fail("the input must have at least 1 dimension");
  std::vector<int64_t> shape = x.shape;
  shape.back() = (shape.back() + 1) / 2;
  return TensorType{shape, DType::Int32};
}

Tensor pack_bf16_pairs_compute(const std::vector<Tensor>& in, const Attrs&, const TensorType& out) {
  const Tensor& x = in[0];
  const int64_t k = x.shape().back();
  return compute("bf16_pairs", out.shape, [&](const std::vector<PrimVar>& i) {
    std::vector<PrimExpr> xi(i.begin(), i.end());
    // A bfloat16 value's bits are the upper half of its float32 (whose lower half is zero).
    auto bits = [&](int64_t j) {
      PrimExpr at = i.back() * idx(2) + idx(j);
      xi.back() = min(at, idx(k - 1));
      PrimExpr word = reinterpret(DType::Int32, cast(DType::Float32, x(xi)));
      if (k % 2 != 0 && j == 1) word = select(at < idx(k), word, make_const(DType::Int32, 0));
      return word;
    };
    PrimExpr low =
        binary(BinaryOp::BitAnd, binary(BinaryOp::Shr, bits(0), make_const(DType::Int32, 16)),
               make_const(DType::Int32, 0xFFFF));
    PrimExpr high = binary(BinaryOp::BitAnd, bits(1), make_const(DType::Int32, -65536));
    return binary(BinaryOp::BitOr, low, high);
  });
}

// ---------------------------------------------------------------- dense_bf16

// x2 [..., K2] and a weight of `rank` dimensions, both int32 words of bfloat16 pairs.
std::pair<const TensorType&, const TensorType&> pair_args(const std::vector<Type>& args,
                                                          int64_t rank, const char* what,
                                                          const TypeContext& ctx) {
  check_arity(args, 2, ctx);
  const TensorType& x = tensor_arg(args, 0, "the activations", ctx);
  const TensorType& w = tensor_arg(args, 1, "the weight", ctx);
  for (const TensorType* t : {&x, &w})
    if (t->dtype != DType::Int32)
      ctx.fail(to_string(*t) +
               " is not int32 words of two bfloat16 values; pack the bfloat16 activations "
               "and weights with nn.pack_bf16_pairs");
  check_rank(w, rank, what, ctx);
  if (x.ndim() < 1) ctx.fail("the activations must have at least 1 dimension");
  return {x, w};
}

TensorType pair_out(const TensorType& x, int64_t units) {
  std::vector<int64_t> shape(x.shape.begin(), x.shape.end() - 1);
  shape.push_back(units);
  return TensorType{shape, DType::Float32};
}

void check_words(const TensorType& x, int64_t words, const TypeContext& ctx) {
  if (x.shape.back() != words)
    ctx.fail("the activations have " + std::to_string(x.shape.back()) +
             " words of K but the weight " + std::to_string(words));
}

Type dense_bf16_rel(const std::vector<Type>& args, Attrs&, const TypeContext& ctx) {
  auto [x, w] = pair_args(args, 2, "the weight [N, K/2]", ctx);
  check_words(x, w.shape[1], ctx);
  return pair_out(x, w.shape[0]);
}

// The float32 sum over words k of dot_bf16(0, x2[..., k], weight word(n, k)).
Tensor pair_sum(const Tensor& x, int64_t words, const TensorType& out,
                const std::function<PrimExpr(PrimExpr n, PrimExpr k)>& weight) {
  IterVar k = reduce_axis(words, "k");
  return compute("dense_bf16", out.shape, [&](const std::vector<PrimVar>& i) {
    std::vector<PrimExpr> xi(i.begin(), i.end() - 1);
    xi.push_back(k->var);
    return sum(prim_call(Intrinsic::DotBF16,
                         {make_const(DType::Float32, 0), x(xi), weight(i.back(), k->var)}),
               {k});
  });
}

Tensor dense_bf16_compute(const std::vector<Tensor>& in, const Attrs&, const TensorType& out) {
  const Tensor &x = in[0], &w = in[1];
  return pair_sum(x, w.shape()[1], out, [&](PrimExpr n, PrimExpr k) { return w({n, k}); });
}

// The weight in nn.pack_dense_weight's panels [ceil(N / block), K/2, block].
Type dense_bf16_packed_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  auto [x, w] = pair_args(args, 3, "the packed weight [N / block, K/2, block]", ctx);
  const int64_t units = attr_int(attrs, "units"), block = w.shape[2];
  if (units < 1 || (units + block - 1) / block != w.shape[0])
    ctx.fail("units = " + std::to_string(units) + " does not match the packed weight " +
             ints_str(w.shape) + "; pack the weight with nn.pack_dense_weight");
  check_words(x, w.shape[1], ctx);
  return pair_out(x, units);
}

Tensor dense_bf16_packed_compute(const std::vector<Tensor>& in, const Attrs&,
                                 const TensorType& out) {
  const Tensor &x = in[0], &w = in[1];
  const int64_t block = w.shape()[2];
  return pair_sum(x, w.shape()[1], out,
                  [&](PrimExpr n, PrimExpr k) { return w({n / idx(block), k, n % idx(block)}); });
}

[[maybe_unused]] const Op* kPackBF16Pairs = register_op(
    {"nn.pack_bf16_pairs", 1, OpPattern::Injective, pack_bf16_pairs_rel, pack_bf16_pairs_compute});
[[maybe_unused]] const Op* kDenseBF16 = register_op(family(
    {"nn.dense_bf16", 2, OpPattern::OutEWiseFusable, dense_bf16_rel, dense_bf16_compute}, "dense"));
[[maybe_unused]] const Op* kDenseBF16Packed = register_op(with_attrs(
    family({"nn.dense_bf16_packed", 2, OpPattern::OutEWiseFusable, dense_bf16_packed_rel,
            dense_bf16_packed_compute},
           "dense"),
    {required_attr("units", AttrKind::Int, "output features, N of the unpacked weight")}));

}  // namespace
}  // namespace ember::ir
