// Weight-only int4 (issue 45): nn.dense_int4 and its panel-packed form nn.dense_int4_packed,
// a batch-1 dense by 4-bit weights with one scale per group of K (torchao's
// IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(g)), symmetric).
//
// The weights travel as int32 words of eight nibbles u = q + 8 in [0, 15]: word j of an
// output holds k = 8j .. 8j + 3 in its bytes' low nibbles and 8j + 4 .. 8j + 7 in their high
// nibbles, so that masking (and shifting) a word gives four bytes that one dot_u8s8 takes.
// The activations are Int8Products' 16-bit row in two byte rows, x4 [2, K/4] (row 0 the low
// bytes, unsigned; row 1 the high ones, signed) and t [G], the sum of the 16-bit values of
// each group. For each group g the exact int32
//   sum_k (u - 8) (256 hi + lo) = 256 sum u hi + sum lo u - 8 t[g]
// (u as the unsigned operand of the first product, the signed one of the second) is scaled
// by the group's float scale and summed over the groups in float32:
//   out[0, n] = sum_g scale[g, n] * float(that)
// The caller multiplies by the row's scale.
#include <string>
#include <vector>

#include "op_util.h"

namespace ember::ir {
namespace {

using namespace ops;

Type dense_int4_rel_of(const std::vector<Type>& args, const Attrs& attrs, const TypeContext& ctx,
                       bool packed) {
  check_arity(args, 4, ctx);
  const TensorType& x = tensor_arg(args, 0, "the activations' byte words", ctx);
  const TensorType& t = tensor_arg(args, 1, "the groups' sums", ctx);
  const TensorType& w = tensor_arg(args, 2, "the weight's nibble words", ctx);
  const TensorType& s = tensor_arg(args, 3, "the groups' scales", ctx);
  for (const TensorType* a : {&x, &t, &w})
    if (a->dtype != DType::Int32)
      ctx.fail(to_string(*a) + " is not int32 words; Int8Products writes nn.dense_int4's operands");
  if (s.dtype != DType::Float32) ctx.fail("the scales are " + to_string(s) + ", not float32");
  check_rank(x, 2, "the activations [2, K / 4] (low and high bytes)", ctx);
  check_rank(t, 1, "the groups' sums [G]", ctx);
  check_rank(w, packed ? 3 : 2,
             packed ? "the packed weight [N / block, K / 8, block]" : "the weight [N, K / 8]", ctx);
  check_rank(s, 2, "the scales [G, N]", ctx);
  const int64_t group = attr_int(attrs, "group"), groups = t.shape[0];
  const int64_t units = packed ? attr_int(attrs, "units") : w.shape[0];
  if (group < 8 || group % 8 != 0)
    ctx.fail("group = " + std::to_string(group) + " is not a multiple of 8");
  if (x.shape[0] != 2 || x.shape[1] * 4 != group * groups || w.shape[1] * 8 != group * groups)
    ctx.fail("the activations " + ints_str(x.shape) + ", groups' sums " + ints_str(t.shape) +
             " and weight " + ints_str(w.shape) + " do not hold " + std::to_string(groups) +
             " groups of " + std::to_string(group));
  if (packed && (units < 1 || (units + w.shape[2] - 1) / w.shape[2] != w.shape[0]))
    ctx.fail("units = " + std::to_string(units) + " does not match the packed weight " +
             ints_str(w.shape) + "; pack the weight with nn.pack_dense_weight");
  if (s.shape != std::vector<int64_t>{groups, units})
    ctx.fail("the scales " + ints_str(s.shape) + " are not [" + std::to_string(groups) + ", " +
             std::to_string(units) + "]");
  return TensorType{{1, units}, DType::Float32};
}

Type dense_int4_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  return dense_int4_rel_of(args, attrs, ctx, false);
}
Type dense_int4_packed_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  return dense_int4_rel_of(args, attrs, ctx, true);
}

PrimExpr i32(int64_t v) { return make_const(DType::Int32, v); }

Tensor dense_int4_compute_of(const std::vector<Tensor>& in, const Attrs& attrs,
                             const TensorType& out, bool packed) {
  const Tensor &x = in[0], &t = in[1], &w = in[2], &scale = in[3];
  const int64_t words = attr_int(attrs, "group") / 8, block = packed ? w.shape()[2] : 1;
  IterVar g = reduce_axis(t.shape()[0], "g");
  return compute("dense_int4", out.shape, [&](const std::vector<PrimVar>& i) {
    const PrimExpr n = i.back();
    PrimExpr z1 = i32(0), z0 = i32(0);
    for (int64_t j = 0; j < words; ++j) {
      PrimExpr k = g->var * idx(words) + idx(j);  // the weight word; x words 2k, 2k + 1
      PrimExpr word = packed ? w({n / idx(block), k, n % idx(block)}) : w({n, k});
      PrimExpr low = binary(BinaryOp::BitAnd, word, i32(0x0F0F0F0F));
      PrimExpr high =
          binary(BinaryOp::BitAnd, binary(BinaryOp::Shr, word, i32(4)), i32(0x0F0F0F0F));
      PrimExpr k2 = k * idx(2);
      z1 = prim_call(Intrinsic::DotU8S8, {z1, low, x({idx(1), k2})});
      z1 = prim_call(Intrinsic::DotU8S8, {z1, high, x({idx(1), k2 + idx(1)})});
      z0 = prim_call(Intrinsic::DotU8S8, {z0, x({idx(0), k2}), low});
      z0 = prim_call(Intrinsic::DotU8S8, {z0, x({idx(0), k2 + idx(1)}), high});
    }
    PrimExpr exact = z1 * i32(256) + z0 - t({g->var}) * i32(8);
    return sum(scale({g->var, n}) * cast(DType::Float32, exact), {g});
  });
}

Tensor dense_int4_compute(const std::vector<Tensor>& in, const Attrs& attrs,
                          const TensorType& out) {
  return dense_int4_compute_of(in, attrs, out, false);
}
Tensor dense_int4_packed_compute(const std::vector<Tensor>& in, const Attrs& attrs,
                                 const TensorType& out) {
  return dense_int4_compute_of(in, attrs, out, true);
}

const AttrSpec kGroup =
    required_attr("group", AttrKind::Int, "K's values per scale, a multiple of 8");

[[maybe_unused]] const Op* kDenseInt4 = register_op(with_attrs(
    family({"nn.dense_int4", 4, OpPattern::OutEWiseFusable, dense_int4_rel, dense_int4_compute},
           "dense"),
    {kGroup}));
[[maybe_unused]] const Op* kDenseInt4Packed = register_op(with_attrs(
    family({"nn.dense_int4_packed", 4, OpPattern::OutEWiseFusable, dense_int4_packed_rel,
            dense_int4_packed_compute},
           "dense"),
    {kGroup, required_attr("units", AttrKind::Int, "output features, N of the unpacked weight")}));

}  // namespace
}  // namespace ember::ir
