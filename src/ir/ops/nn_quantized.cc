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
  if (x.ndim() < 1) ctx.fail("the input must have at least 1 dimension");
  const int64_t axis = normalize_axis(attr_int(attrs, "axis"), x.ndim(), ctx);
  attrs = attrs.with("axis", axis);
  std::vector<int64_t> shape = x.shape;
  shape[axis] = (shape[axis] + 3) / 4;
  return TensorType{shape, DType::Int32};
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

// x4 [..., K4] and a weight of `rank` dimensions, both int32 words of bytes.
std::pair<const TensorType&, const TensorType&> u8s8_args(const std::vector<Type>& args,
                                                          int64_t rank, const char* what,
                                                          const TypeContext& ctx) {
  check_arity(args, 2, ctx);
  const TensorType& x = tensor_arg(args, 0, "the activations", ctx);
  const TensorType& w = tensor_arg(args, 1, "the weight", ctx);
  for (const TensorType* t : {&x, &w})
    if (t->dtype != DType::Int32)
      ctx.fail(to_string(*t) +
               " is not int32 words of four bytes; pack the uint8 activations "
               "and int8 weights with nn.pack_bytes4");
  check_rank(w, rank, what, ctx);
  if (x.ndim() < 1) ctx.fail("the activations must have at least 1 dimension");
  return {x, w};
}

TensorType u8s8_out(const TensorType& x, int64_t units) {
  std::vector<int64_t> shape(x.shape.begin(), x.shape.end() - 1);
  shape.push_back(units);
  return TensorType{shape, DType::Int32};
}

Type dense_u8s8_rel(const std::vector<Type>& args, Attrs&, const TypeContext& ctx) {
  auto [x, w] = u8s8_args(args, 2, "the weight [N, K/4]", ctx);
  if (x.shape.back() != w.shape[1])
    ctx.fail("the activations have " + std::to_string(x.shape.back()) +
             " words of K but the "
             "weight " +
             std::to_string(w.shape[1]));
  return u8s8_out(x, w.shape[0]);
}

// The sum over words k of dot_u8s8(0, x4[..., k], weight word(n, k)).
Tensor u8s8_sum(const Tensor& x, int64_t words, const TensorType& out,
                const std::function<PrimExpr(PrimExpr n, PrimExpr k)>& weight) {
  IterVar k = reduce_axis(words, "k");
  return compute("dense_u8s8", out.shape, [&](const std::vector<PrimVar>& i) {
    std::vector<PrimExpr> xi(i.begin(), i.end() - 1);
    xi.push_back(k->var);
    return sum(prim_call(Intrinsic::DotU8S8,
                         {make_const(DType::Int32, 0), x(xi), weight(i.back(), k->var)}),
               {k});
  });
}

Tensor dense_u8s8_compute(const std::vector<Tensor>& in, const Attrs&, const TensorType& out) {
  const Tensor &x = in[0], &w = in[1];
  return u8s8_sum(x, w.shape()[1], out, [&](PrimExpr n, PrimExpr k) { return w({n, k}); });
}

// The weight in nn.pack_dense_weight's panels [ceil(N / block), K/4, block].
Type dense_u8s8_packed_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  auto [x, w] = u8s8_args(args, 3, "the packed weight [N / block, K/4, block]", ctx);
  const int64_t units = attr_int(attrs, "units"), block = w.shape[2];
  if (units < 1 || (units + block - 1) / block != w.shape[0])
    ctx.fail("units = " + std::to_string(units) + " does not match the packed weight " +
             ints_str(w.shape) + "; pack the weight with nn.pack_dense_weight");
  if (x.shape.back() != w.shape[1])
    ctx.fail("the activations have " + std::to_string(x.shape.back()) +
             " words of K but the "
             "weight " +
             std::to_string(w.shape[1]));
  return u8s8_out(x, units);
}

Tensor dense_u8s8_packed_compute(const std::vector<Tensor>& in, const Attrs&,
                                 const TensorType& out) {
  const Tensor &x = in[0], &w = in[1];
  const int64_t block = w.shape()[2];
  return u8s8_sum(x, w.shape()[1], out,
                  [&](PrimExpr n, PrimExpr k) { return w({n / idx(block), k, n % idx(block)}); });
}

[[maybe_unused]] const Op* kPackBytes4 = register_op(
    with_attrs({"nn.pack_bytes4", 1, OpPattern::Injective, pack_bytes4_rel, pack_bytes4_compute},
               {int_attr("axis", -1, "the axis whose bytes are packed, four to a word")}));
[[maybe_unused]] const Op* kDenseU8S8 = register_op(family(
    {"nn.dense_u8s8", 2, OpPattern::OutEWiseFusable, dense_u8s8_rel, dense_u8s8_compute}, "dense"));
[[maybe_unused]] const Op* kDenseU8S8Packed = register_op(with_attrs(
    family({"nn.dense_u8s8_packed", 2, OpPattern::OutEWiseFusable, dense_u8s8_packed_rel,
            dense_u8s8_packed_compute},
           "dense"),
    {required_attr("units", AttrKind::Int, "output features, N of the unpacked weight")}));

}  // namespace
}  // namespace ember::ir
