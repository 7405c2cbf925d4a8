// bfloat16 products (issue 45): nn.pack_bf16_pairs, nn.dense_bf16 and its panel-packed form
// nn.dense_bf16_packed (the conv over words of two channels is nn_conv.cc's nn.conv2d_bf16).
// A bfloat16 GEMM's operands travel as int32 words of two consecutive bfloat16 values along
// K (element 2k in the low half, as one load of the pair would read them), so that one
// dot_bf16 (vdpbf16ps on AVX512_BF16 CPUs) adds two products into each float32 lane: x2
// [..., K/2] holds the activations, w2 [N, K/2] the weights. The result is float32 (the sums
// accumulate in float32, as PyTorch's bfloat16 GEMM); the caller rounds.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "op_util.h"
#include "word_dense.h"

namespace ember::ir {
namespace {

using namespace ops;

// ---------------------------------------------------------------- pack_bf16_pairs

// x (bfloat16) [..., K, ...] -> int32 with ceil(K / 2) along `axis` (default the last): word
// k holds x[2k] in its low half and x[2k + 1] in its high half, zero past K.
Type pack_bf16_pairs_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 1, ctx);
  const TensorType& x = tensor_arg(args, 0, "the input", ctx);
  if (x.dtype != DType::BFloat16)
    ctx.fail("the input is " + to_string(x) + " but nn.pack_bf16_pairs packs bfloat16 values");
  return packed_words_type(x, attrs, 2, ctx);
}

Tensor pack_bf16_pairs_compute(const std::vector<Tensor>& in, const Attrs& attrs,
                               const TensorType& out) {
  const Tensor& x = in[0];
  const auto axis = static_cast<size_t>(attr_int(attrs, "axis"));
  const int64_t k = x.shape()[axis];
  return compute("bf16_pairs", out.shape, [&](const std::vector<PrimVar>& i) {
    std::vector<PrimExpr> xi(i.begin(), i.end());
    return word_of_bf16_pair([&](int64_t j) {
      PrimExpr at = i[axis] * idx(2) + idx(j);
      xi[axis] = min(at, idx(k - 1));
      PrimExpr v = x(xi);
      return k % 2 != 0 && j == 1 ? select(at < idx(k), v, make_const(DType::BFloat16, 0.0)) : v;
    });
  });
}

// ---------------------------------------------------------------- dense_bf16

// x2 [..., K/2] by w2 [N, K/2] (or its panels), words of bfloat16 pairs; float32 sums.
const WordDense kBF16{"dense_bf16", Intrinsic::DotBF16, DType::Float32,
                      "int32 words of two bfloat16 values; pack the bfloat16 activations and "
                      "weights with nn.pack_bf16_pairs"};

Type dense_bf16_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  return word_dense_rel(kBF16, args, attrs, ctx, false);
}
Tensor dense_bf16_compute(const std::vector<Tensor>& in, const Attrs& attrs,
                          const TensorType& out) {
  return word_dense_compute(kBF16, in, attrs, out, false);
}
Type dense_bf16_packed_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  return word_dense_rel(kBF16, args, attrs, ctx, true);
}
Tensor dense_bf16_packed_compute(const std::vector<Tensor>& in, const Attrs& attrs,
                                 const TensorType& out) {
  return word_dense_compute(kBF16, in, attrs, out, true);
}

[[maybe_unused]] const Op* kPackBF16Pairs = register_op(with_attrs(
    {"nn.pack_bf16_pairs", 1, OpPattern::Injective, pack_bf16_pairs_rel, pack_bf16_pairs_compute},
    {int_attr("axis", -1, "the axis whose values are packed, two to a word")}));
[[maybe_unused]] const Op* kDenseBF16 = register_op(family(
    {"nn.dense_bf16", 2, OpPattern::OutEWiseFusable, dense_bf16_rel, dense_bf16_compute}, "dense"));
[[maybe_unused]] const Op* kDenseBF16Packed = register_op(with_attrs(
    family({"nn.dense_bf16_packed", 2, OpPattern::OutEWiseFusable, dense_bf16_packed_rel,
            dense_bf16_packed_compute},
           "dense"),
    {required_attr("units", AttrKind::Int, "output features, N of the unpacked weight")}));

}  // namespace
}  // namespace ember::ir
