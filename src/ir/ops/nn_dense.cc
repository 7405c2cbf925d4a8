// Dense and matrix products: nn.dense, its packed-weight variants (nn.dense_packed with
// nn.pack_dense_weight, nn.dense_lanes with nn.pack_dense_lanes), nn.matmul and
// nn.batch_matmul. Shapes and numerics follow torch.nn.functional.linear and torch.matmul.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "op_util.h"

namespace ember::ir {
namespace {

using namespace ops;

// ---------------------------------------------------------------- dense, matmul, bmm

// The data [..., K] and weight of a dense variant, checked: float data, a weight of its dtype
// or of an 8-bit integer type (weight-only quantization: converted as it is read; its scale
// is a multiply after the dense), of `rank` dimensions (`what` names its layout).
std::pair<const TensorType&, const TensorType&> dense_args(const std::vector<Type>& args,
                                                           int64_t rank, const char* what,
                                                           const TypeContext& ctx) {
  check_arity(args, 2, ctx);
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  const TensorType& weight = tensor_arg(args, 1, "weight", ctx);
  check_float(data, "data", ctx);
  if (!is_int(weight.dtype) || dtype_bytes(weight.dtype) != 1)
    check_same_dtype(data, "data", weight, "the weight", ctx);
  check_rank(weight, rank, what, ctx);
  if (data.ndim() < 1) ctx.fail("data must have at least 1 dimension, got " + to_string(data));
  return {data, weight};
}

// Weight element `index` in the data's dtype (an 8-bit weight converted).
PrimExpr weight_at(const Tensor& weight, const std::vector<PrimExpr>& index, DType data) {
  return cast(data, weight(index));
}

// data's type with its last dimension (the input features) replaced by `units` outputs.
TensorType dense_out(const TensorType& data, int64_t units) {
  std::vector<int64_t> shape(data.shape.begin(), data.shape.end() - 1);
  shape.push_back(units);
  return TensorType{shape, data.dtype};
}

Type dense_rel(const std::vector<Type>& args, Attrs&, const TypeContext& ctx) {
  auto [data, weight] = dense_args(args, 2, "the weight [N, K]", ctx);
  int64_t k = data.shape.back();
  if (k != weight.shape[1])
    ctx.fail("data has " + std::to_string(k) + " features (last dimension of " + to_string(data) +
             ") but the weight expects " + std::to_string(weight.shape[1]) + " (weight shape " +
             ints_str(weight.shape) + "); check the weight");
  return dense_out(data, weight.shape[0]);
}

Tensor dense_compute(const std::vector<Tensor>& in, const Attrs&, const TensorType& out) {
  const Tensor &data = in[0], &weight = in[1];
  IterVar k = reduce_axis(weight.shape()[1], "k");
  return compute("dense", out.shape, [&](const std::vector<PrimVar>& i) {
    std::vector<PrimExpr> di(i.begin(), i.end() - 1);
    di.push_back(k->var);
    return sum(data(di) * weight_at(weight, {i.back(), k->var}, data.dtype()), {k});
  });
}

// nn.dense with its weight packed in panels of `block` output features (AlterOpLayout packs
// a constant weight once at build time): weight [ceil(N / block), K, block], zero padded,
// attr `units` = N. A vector of `block` outputs then loads `block` contiguous weights per k,
// where the [N, K] layout needs a gather.
Type pack_dense_weight_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 1, ctx);
  const TensorType& w = tensor_arg(args, 0, "the weight", ctx);
  check_rank(w, 2, "the weight [N, K]", ctx);
  int64_t block = attr_int(attrs, "block");
  if (block < 1) ctx.fail("block = " + std::to_string(block) + " must be >= 1");
  return TensorType{{(w.shape[0] + block - 1) / block, w.shape[1], block}, w.dtype};
}

Tensor pack_dense_weight_compute(const std::vector<Tensor>& in, const Attrs& attrs,
                                 const TensorType& out) {
  const Tensor& w = in[0];
  int64_t block = attr_int(attrs, "block"), n = w.shape()[0];
  return compute("packed_weight", out.shape, [&](const std::vector<PrimVar>& i) {
    PrimExpr row = i[0] * idx(block) + i[2];
    if (n % block == 0) return w({row, i[1]});
    return select(row < idx(n), w({min(row, idx(n - 1)), i[1]}), make_const(w.dtype(), 0.0));
  });
}

Type dense_packed_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  auto [data, weight] = dense_args(args, 3, "the packed weight [N / block, K, block]", ctx);
  int64_t units = attr_int(attrs, "units"), block = weight.shape[2];
  if (units < 1 || (units + block - 1) / block != weight.shape[0])
    ctx.fail("units = " + std::to_string(units) + " does not match the packed weight " +
             ints_str(weight.shape) + "; pack the weight with nn.pack_dense_weight");
  if (data.shape.back() != weight.shape[1])
    ctx.fail("data has " + std::to_string(data.shape.back()) + " features but the weight " +
             "expects " + std::to_string(weight.shape[1]));
  return dense_out(data, units);
}

Tensor dense_packed_compute(const std::vector<Tensor>& in, const Attrs&, const TensorType& out) {
  const Tensor &data = in[0], &weight = in[1];
  int64_t block = weight.shape()[2];
  IterVar k = reduce_axis(weight.shape()[1], "k");
  return compute("dense", out.shape, [&](const std::vector<PrimVar>& i) {
    std::vector<PrimExpr> di(i.begin(), i.end() - 1);
    di.push_back(k->var);
    PrimExpr n = i.back();
    return sum(data(di) * weight_at(weight, {n / idx(block), k->var, n % idx(block)}, data.dtype()),
               {k});
  });
}

// nn.dense with its weight packed in lanes (AlterOpLayout, for a GEMV at 256 bits):
// weight [K / lanes, N, lanes] holds W[n, ko * lanes + f] at [ko, n, f]. A block of rows
// then reads, for each lane vector of K, its rows' vectors one after another: one stream
// through memory, where [N, K] rows read together are one stream each.
Type pack_dense_lanes_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 1, ctx);
  const TensorType& w = tensor_arg(args, 0, "the weight", ctx);
  check_rank(w, 2, "the weight [N, K]", ctx);
  int64_t lanes = attr_int(attrs, "lanes");
  if (lanes < 1 || w.shape[1] % lanes != 0)
    ctx.fail("lanes = " + std::to_string(lanes) + " must divide the weight's " +
             std::to_string(w.shape[1]) + " input features");
  return TensorType{{w.shape[1] / lanes, w.shape[0], lanes}, w.dtype};
}

Tensor pack_dense_lanes_compute(const std::vector<Tensor>& in, const Attrs& attrs,
                                const TensorType& out) {
  const Tensor& w = in[0];
  const int64_t lanes = attr_int(attrs, "lanes");
  return compute("lane_weight", out.shape, [&](const std::vector<PrimVar>& i) {
    return w({i[1], i[0] * idx(lanes) + i[2]});
  });
}

Type dense_lanes_rel(const std::vector<Type>& args, Attrs&, const TypeContext& ctx) {
  auto [data, weight] = dense_args(args, 3, "the lane-packed weight [K / lanes, N, lanes]", ctx);
  if (data.shape.back() != weight.shape[0] * weight.shape[2])
    ctx.fail("data has " + std::to_string(data.shape.back()) + " features but the weight " +
             ints_str(weight.shape) + " holds " +
             std::to_string(weight.shape[0] * weight.shape[2]) +
             "; pack the weight with nn.pack_dense_lanes");
  return dense_out(data, weight.shape[1]);
}

Tensor dense_lanes_compute(const std::vector<Tensor>& in, const Attrs&, const TensorType& out) {
  const Tensor &data = in[0], &weight = in[1];
  const int64_t lanes = weight.shape()[2];
  IterVar ko = reduce_axis(weight.shape()[0], "k"), f = reduce_axis(lanes, "kf");
  return compute("dense", out.shape, [&](const std::vector<PrimVar>& i) {
    std::vector<PrimExpr> di(i.begin(), i.end() - 1);
    di.push_back(ko->var * idx(lanes) + f->var);
    return sum(data(di) * weight_at(weight, {ko->var, i.back(), f->var}, data.dtype()), {ko, f});
  });
}

// The operands of matmul and batch_matmul: two float tensors of one dtype, the first
// [..., M, K].
std::pair<const TensorType&, const TensorType&> product_operands(const std::vector<Type>& args,
                                                                 const TypeContext& ctx) {
  check_arity(args, 2, ctx);
  const TensorType& a = tensor_arg(args, 0, "the first input", ctx);
  const TensorType& b = tensor_arg(args, 1, "the second input", ctx);
  check_float(a, "the first input", ctx);
  check_same_dtype(a, "the first input", b, "the second input", ctx);
  if (a.ndim() < 2) ctx.fail("the first input must be [..., M, K] but is " + to_string(a));
  return {a, b};
}

// a [..., M, K] @ b [K, N] -> [..., M, N], or @ b [K] -> [..., M] (torch.matmul).
Type matmul_rel(const std::vector<Type>& args, Attrs&, const TypeContext& ctx) {
  const auto [a, b] = product_operands(args, ctx);
  if (b.ndim() != 1 && b.ndim() != 2)
    ctx.fail("the second input must be [K, N] or [K] but is " + to_string(b) +
             "; use nn.batch_matmul for batched operands");
  if (a.shape.back() != b.shape[0])
    ctx.fail("cannot multiply " + to_string(a) + " by " + to_string(b) + ": K is " +
             std::to_string(a.shape.back()) + " vs " + std::to_string(b.shape[0]) +
             "; the last dimension of the first input must equal the first of the second");
  std::vector<int64_t> shape(a.shape.begin(), a.shape.end() - 1);
  if (b.ndim() == 2) shape.push_back(b.shape[1]);
  return TensorType{shape, a.dtype};
}

Tensor matmul_compute(const std::vector<Tensor>& in, const Attrs&, const TensorType& out) {
  const Tensor &a = in[0], &b = in[1];
  bool vector_b = b.ndim() == 1;
  IterVar k = reduce_axis(b.shape()[0], "k");
  return compute("matmul", out.shape, [&](const std::vector<PrimVar>& i) {
    std::vector<PrimExpr> ai(i.begin(), vector_b ? i.end() : i.end() - 1);
    ai.push_back(k->var);
    return sum(a(ai) * (vector_b ? b({k->var}) : b({k->var, i.back()})), {k});
  });
}

// a [..., M, K] @ b [..., K, N] with NumPy broadcasting of the batch dimensions (torch.matmul
// for operands of rank >= 2).
Type batch_matmul_rel(const std::vector<Type>& args, Attrs&, const TypeContext& ctx) {
  const auto [a, b] = product_operands(args, ctx);
  if (b.ndim() < 2) ctx.fail("the second input must be [..., K, N] but is " + to_string(b));
  int64_t k = a.shape.back();
  if (k != b.shape[b.ndim() - 2])
    ctx.fail("cannot batch-multiply " + to_string(a) + " by " + to_string(b) + ": K is " +
             std::to_string(k) + " vs " + std::to_string(b.shape[b.ndim() - 2]) +
             "; the last dimension of the first input must equal the second-to-last of the "
             "second");
  std::vector<int64_t> batch_a(a.shape.begin(), a.shape.end() - 2);
  std::vector<int64_t> batch_b(b.shape.begin(), b.shape.end() - 2);
  size_t nb = std::max(batch_a.size(), batch_b.size());
  std::vector<int64_t> shape(nb);
  for (size_t d = 0; d < nb; ++d) {
    int64_t da = d < nb - batch_a.size() ? 1 : batch_a[d - (nb - batch_a.size())];
    int64_t db = d < nb - batch_b.size() ? 1 : batch_b[d - (nb - batch_b.size())];
    if (da != db && da != 1 && db != 1)
      ctx.fail("cannot batch-multiply " + to_string(a) + " by " + to_string(b) +
               ": the batch sizes " + ints_str(batch_a) + " and " + ints_str(batch_b) +
               " do not broadcast (sizes must be equal or 1)");
    shape[d] = da == 1 ? db : da;
  }
  shape.push_back(a.shape[a.ndim() - 2]);
  shape.push_back(b.shape.back());
  return TensorType{shape, a.dtype};
}

Tensor batch_matmul_compute(const std::vector<Tensor>& in, const Attrs&, const TensorType& out) {
  const Tensor &a = in[0], &b = in[1];
  IterVar k = reduce_axis(a.shape().back(), "k");
  // Batch index of an operand: its batch dimensions broadcast against the output's.
  auto operand_index = [](const Tensor& t, const std::vector<PrimExpr>& batch, PrimExpr row,
                          PrimExpr col) {
    std::vector<int64_t> tb(t.shape().begin(), t.shape().end() - 2);
    std::vector<PrimExpr> ti = broadcast_index(tb, batch);
    ti.push_back(std::move(row));
    ti.push_back(std::move(col));
    return ti;
  };
  return compute("batch_matmul", out.shape, [&](const std::vector<PrimVar>& i) {
    std::vector<PrimExpr> batch(i.begin(), i.end() - 2);
    PrimExpr m = i[i.size() - 2], n = i.back();
    return sum(a(operand_index(a, batch, m, k->var)) * b(operand_index(b, batch, k->var, n)), {k});
  });
}

// ---------------------------------------------------------------- registration

[[maybe_unused]] const Op* kDense =
    register_op({"nn.dense", 2, OpPattern::OutEWiseFusable, dense_rel, dense_compute});
[[maybe_unused]] const Op* kDensePacked = register_op(with_attrs(
    family(
        {"nn.dense_packed", 2, OpPattern::OutEWiseFusable, dense_packed_rel, dense_packed_compute},
        "dense"),
    {required_attr("units", AttrKind::Int, "output features, N of the unpacked [N, K] weight")}));
[[maybe_unused]] const Op* kPackDenseWeight =
    register_op(with_attrs({"nn.pack_dense_weight", 1, OpPattern::Injective, pack_dense_weight_rel,
                            pack_dense_weight_compute},
                           {required_attr("block", AttrKind::Int, "output features per panel")}));
[[maybe_unused]] const Op* kDenseLanes = register_op(
    family({"nn.dense_lanes", 2, OpPattern::OutEWiseFusable, dense_lanes_rel, dense_lanes_compute},
           "dense"));
[[maybe_unused]] const Op* kPackDenseLanes =
    register_op(with_attrs({"nn.pack_dense_lanes", 1, OpPattern::Injective, pack_dense_lanes_rel,
                            pack_dense_lanes_compute},
                           {required_attr("lanes", AttrKind::Int, "input features per vector")}));
[[maybe_unused]] const Op* kMatmul =
    register_op({"nn.matmul", 2, OpPattern::OutEWiseFusable, matmul_rel, matmul_compute});
[[maybe_unused]] const Op* kBatchMatmul = register_op(
    {"nn.batch_matmul", 2, OpPattern::OutEWiseFusable, batch_matmul_rel, batch_matmul_compute});

}  // namespace
}  // namespace ember::ir
