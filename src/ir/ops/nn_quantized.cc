// Int8 products (issue 45): nn.pack_bytes4, nn.dense_u8s8 and its panel-packed form
// nn.dense_u8s8_packed. An int8 GEMM's operands travel as int32 words of four consecutive
// bytes along K, so that one dot_u8s8 (vpdpbusd on VNNI CPUs) adds four products into each
// int32 lane: x4 [..., K/4] holds the uint8 activations, w4 [N, K/4] the int8 weights. The
// result is the exact int32 sum; scales and zero points are the caller's float epilogue.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "op_util.h"
#include "word_dense.h"

namespace ember::ir {
namespace {

using namespace ops;

// ---------------------------------------------------------------- pack_bytes4

// x (int8 or uint8) [..., K, ...] -> int32 with ceil(K / 4) along `axis` (default the last):
// word k holds x[4k + j] as byte j (little-endian, as one load of the four bytes would), zero
// past K.
Type pack_bytes4_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 1, ctx);
  const TensorType& x = tensor_arg(args, 0, "the input", ctx);
  if (x.dtype != DType::Int8 && x.dtype != DType::UInt8)
    ctx.fail("the input is " + to_string(x) + " but nn.pack_bytes4 packs int8 or uint8 bytes");
  return packed_words_type(x, attrs, 4, ctx);
}

Tensor pack_bytes4_compute(const std::vector<Tensor>& in, const Attrs& attrs,
                           const TensorType& out) {
  const Tensor& x = in[0];
  const auto axis = static_cast<size_t>(attr_int(attrs, "axis"));
  const int64_t k = x.shape()[axis];
  return compute("bytes4", out.shape, [&](const std::vector<PrimVar>& i) {
    std::vector<PrimExpr> xi(i.begin(), i.end());
    return word_of_bytes([&](int64_t j) {
      PrimExpr at = i[axis] * idx(4) + idx(j);
      xi[axis] = min(at, idx(k - 1));
      PrimExpr byte =
          binary(BinaryOp::BitAnd, cast(DType::Int32, x(xi)), make_const(DType::Int32, 255));
      return k % 4 != 0 ? select(at < idx(k), byte, make_const(DType::Int32, 0)) : byte;
    });
  });
}

// ---------------------------------------------------------------- dense_u8s8

// x4 [..., K/4] by w4 [N, K/4] (or its panels), words of uint8 activations and int8 weights.
const WordDense kU8S8{"dense_u8s8", Intrinsic::DotU8S8, DType::Int32,
                      "int32 words of four bytes; pack the uint8 activations and int8 weights "
                      "with nn.pack_bytes4"};

Type dense_u8s8_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  return word_dense_rel(kU8S8, args, attrs, ctx, false);
}
Tensor dense_u8s8_compute(const std::vector<Tensor>& in, const Attrs& attrs,
                          const TensorType& out) {
  return word_dense_compute(kU8S8, in, attrs, out, false);
}
Type dense_u8s8_packed_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  return word_dense_rel(kU8S8, args, attrs, ctx, true);
}
Tensor dense_u8s8_packed_compute(const std::vector<Tensor>& in, const Attrs& attrs,
                                 const TensorType& out) {
  return word_dense_compute(kU8S8, in, attrs, out, true);
}

[[maybe_unused]] const Op* kPackBytes4 = register_op(
    with_attrs({"nn.pack_bytes4", 1, OpPattern::Injective, pack_bytes4_rel, pack_bytes4_compute},
               {int_attr("axis", -1, "the axis whose bytes are packed, four to a word")}));
[[maybe_unused]] const Op* kDenseU8S8 = register_op(with_attrs(
    family({"nn.dense_u8s8", 2, OpPattern::OutEWiseFusable, dense_u8s8_rel, dense_u8s8_compute},
           "dense"),
    {activation_bits_attr()}));
[[maybe_unused]] const Op* kDenseU8S8Packed = register_op(
    with_attrs(family({"nn.dense_u8s8_packed", 2, OpPattern::OutEWiseFusable, dense_u8s8_packed_rel,
                       dense_u8s8_packed_compute},
                      "dense"),
               {required_attr("units", AttrKind::Int, "output features, N of the unpacked weight"),
                activation_bits_attr()}));

}  // namespace
}  // namespace ember::ir
