// The scatter family: writes at data-dependent positions, the inverses of gather and
// adv_index. Both ops return a new tensor: data with some elements replaced or combined.
//
// scatter(data, indices, updates; axis, reduce, include_self): torch.scatter, scatter_add and
// scatter_reduce. For every position i of `indices` (data's rank; no larger than `updates`
// anywhere, nor than data off `axis`), out[i with its `axis` coordinate replaced by
// indices[i]] becomes updates[i] (reduce "none") or combines with it: "sum", "prod",
// "amax", "amin" (NaN propagates, as in torch). include_self=0 starts every written element
// from the reduction's identity instead of data's value (torch's include_self=False). The
// frontend builds "mean" from two sums. Negative indices are errors, as in torch.
//
// index_put(data, values, index 0, ..., index k-1; axis, accumulate, allow_negative): the
// writing form of adv_index, x[:, i, j] = values (axis 1) or += with accumulate=1: the index
// tensors broadcast together to a shape B, and `values` broadcasts to the indexed shape
// data.shape[:axis] + B + data.shape[axis + k:]. Also torch's index_add, index_copy and
// index_fill (one index tensor; those refuse negative indices: allow_negative=0).
//
// Updates may collide (equal indices). Accumulating ones all combine, in row-major order of
// the indices (index_put: of B), so integers match torch exactly and a float sum may round
// differently from torch's order; for assignments torch leaves the winner undefined, and
// Ember's is the last in that order, deterministically, on the CPU and the GPU alike.
//
// Neither op has a tensor expression (a write at a computed position is not one), so both
// are Opaque (FuseOps leaves them alone) and lower through their own loop nest: the kernel
// copies data to the output, then applies the updates. The updates are split into rows that
// never write the same element: scatter's rows are the positions of `indices` off the axis
// (they write different off-axis coordinates), each walking the axis in order; index_put's
// are the positions of data off the indexed axes, each walking B in order. Rows run in
// parallel on the CPU; a GPU kernel is one block whose threads share the copy, meet at a
// barrier, then share the rows. Every index is checked in the kernel (Intrinsic::CheckIndex,
// as gather's): one out of range is reported and the write goes to index 0 of that axis,
// never outside the tensor; the executor then raises an error naming the kernel.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ember/support/error.h"
#include "op_util.h"

namespace ember::ir {
namespace {

using namespace ops;

constexpr int64_t kGpuThreads = 128;              // the GPU kernel's one block
constexpr int64_t kCopyChunk = int64_t{1} << 14;  // elements per parallel task of the CPU copy

// ---------------------------------------------------------------- type relations

Type scatter_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 3, ctx);
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  const TensorType& indices = index_arg(args, 1, "indices", ctx);
  const TensorType& updates = tensor_arg(args, 2, "updates", ctx);
  if (data.ndim() == 0) ctx.fail("data is a scalar (" + to_string(data) + "); reshape it to [1]");
  check_same_dtype(data, "data", updates, "updates", ctx);
  if (indices.ndim() != data.ndim() || updates.ndim() != data.ndim())
    ctx.fail("indices " + to_string(indices) + " and updates " + to_string(updates) +
             " must have as many dimensions as data " + to_string(data));
  for (int64_t d = 0; d < data.ndim(); ++d)
    if (indices.shape[d] > updates.shape[d])
      ctx.fail("indices " + to_string(indices) + " are larger than updates " + to_string(updates) +
               " along axis " + std::to_string(d));
  const int64_t axis = indexed_axis(data, indices, attrs, "scattered", ctx);
  const std::string reduce = attr_str(attrs, "reduce");
  if (reduce != "none" && reduce != "sum" && reduce != "prod" && reduce != "amax" &&
      reduce != "amin")
    ctx.fail("reduce = '" + reduce + "' is not supported; use 'none', 'sum', 'prod', 'amax' or " +
             "'amin' ('mean' is a sum divided by a count of scatters)");
  if (reduce != "none" && data.dtype == DType::Bool)
    ctx.fail("data is " + to_string(data) + "; reduce = '" + reduce +
             "' needs numbers, cast it to int64");
  attrs = attrs.with("axis", axis).with("include_self", attr_flag(attrs, "include_self", ctx));
  return data;
}

void scatter_check_constants(const std::vector<Expr>& args, const Attrs& attrs,
                             const TypeContext& ctx) {
  check_constant_indices(args[0], args[1], attr_int(attrs, "axis"), false, ctx);
}

// The shape that index_put's `values` broadcast to: data's with the k indexed axes from
// `axis` replaced by the index tensors' broadcast shape.
std::vector<int64_t> indexed_shape(const std::vector<int64_t>& data, int64_t axis, int64_t k,
                                   const std::vector<int64_t>& b) {
  std::vector<int64_t> shape(data.begin(), data.begin() + axis);
  shape.insert(shape.end(), b.begin(), b.end());
  shape.insert(shape.end(), data.begin() + axis + k, data.end());
  return shape;
}

Type index_put_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  if (args.size() < 3) ctx.fail("takes data, values and at least one index tensor");
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  const TensorType& values = tensor_arg(args, 1, "values", ctx);
  check_same_dtype(data, "data", values, "values", ctx);
  const int64_t k = static_cast<int64_t>(args.size()) - 2;
  const int64_t axis =
      normalize_axis(attr_int(attrs, "axis"), std::max<int64_t>(data.ndim(), 1), ctx);
  if (axis + k > data.ndim())
    ctx.fail(std::to_string(k) + " index tensors from axis " + std::to_string(axis) +
             " index more axes than data " + to_string(data) + " has");
  std::vector<int64_t> b;
  for (int64_t j = 0; j < k; ++j) {
    const TensorType& ix = index_arg(args, j + 2, "index " + std::to_string(j), ctx);
    if (data.shape[axis + j] == 0 && numel(ix.shape) > 0)
      ctx.fail("data " + to_string(data) + " is empty along axis " + std::to_string(axis + j));
    b = broadcast_shapes(b, ix.shape, ctx);
  }
  const std::vector<int64_t> target = indexed_shape(data.shape, axis, k, b);
  const int64_t lead = static_cast<int64_t>(target.size()) - values.ndim();
  bool fits = lead >= 0;
  for (int64_t d = 0; fits && d < values.ndim(); ++d)
    fits = values.shape[d] == 1 || values.shape[d] == target[lead + d];
  if (!fits)
    ctx.fail("values " + to_string(values) + " do not broadcast to the indexed shape " +
             ints_str(target));
  const int64_t accumulate = attr_flag(attrs, "accumulate", ctx);
  if (accumulate && data.dtype == DType::Bool)
    ctx.fail("data is " + to_string(data) + "; accumulate needs numbers, cast it to int64");
  attrs = attrs.with("axis", axis)
              .with("accumulate", accumulate)
              .with("allow_negative", attr_flag(attrs, "allow_negative", ctx));
  return data;
}

void index_put_check_constants(const std::vector<Expr>& args, const Attrs& attrs,
                               const TypeContext& ctx) {
  for (size_t j = 2; j < args.size(); ++j)
    check_constant_indices(args[0], args[j], attr_int(attrs, "axis") + int64_t(j) - 2,
                           attr_int(attrs, "allow_negative") != 0, ctx);
}

// ---------------------------------------------------------------- the kernels

std::vector<PrimExpr> unravel(PrimExpr flat, const std::vector<int64_t>& shape) {
  std::vector<PrimExpr> at(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    at[d] = d == 0 ? flat : flat % PrimExpr(shape[d]);
    flat = flat / PrimExpr(shape[d]);
  }
  return at;
}

Stmt loop(const std::string& name, int64_t extent, ForKind kind,
          const std::function<Stmt(PrimExpr)>& body) {
  PrimVar v(name);
  return for_loop(v, 0, extent, kind, body(v));
}

// `body(i)` for i in [0, n): i = s * kGpuThreads + thread, guarded where it passes n.
Stmt thread_strided(int64_t n, const std::function<Stmt(PrimExpr)>& body) {
  return loop("thread", kGpuThreads, ForKind::GpuThreadX, [&](PrimExpr t) {
    return loop("s", (n + kGpuThreads - 1) / kGpuThreads, ForKind::Serial, [&](PrimExpr s) {
      PrimExpr i = s * kGpuThreads + t;
      return n % kGpuThreads ? if_then_else(i < PrimExpr(n), body(i)) : body(i);
    });
  });
}

// The kernel's buffers: its parameters (the group's, then the output) and the call.
struct Kernel {
  Kernel(const Function& group, const std::string& func_name, const std::string& op) {
    call = as<CallNode>(group->body);
    EMBER_CHECK(call && call->op && call->op->name == op, "group ", group->name,
                " is not a single ", op, " call");
    f.name = func_name;
    in = single_call_buffers(group, call, f);
    const TensorType& t = call->type.tensor();
    out = make_buffer(op, t.dtype, t.shape);
    f.params.push_back(out);
  }

  // out = data, then `row(r)` for every r in [0, rows); rows never write the same element.
  PrimFunc copy_then_rows(int64_t rows, const std::function<Stmt(PrimExpr)>& row, bool gpu) {
    const Buffer& data = in[0];
    const int64_t n = data->numel();
    auto copy = [&](PrimExpr e) { return store(out, e, load(data, e)); };
    if (gpu) {
      Stmt body = seq({thread_strided(n, copy), evaluate(barrier()), thread_strided(rows, row)});
      f.body = loop("block", 1, ForKind::GpuBlockX, [&](PrimExpr) { return body; });
    } else {
      const int64_t chunks = (n + kCopyChunk - 1) / kCopyChunk;
      Stmt copy_all = loop("chunk", chunks, ForKind::Parallel, [&](PrimExpr c) {
        PrimVar e("e");
        PrimExpr begin = c * kCopyChunk;
        PrimExpr size =
            n % kCopyChunk ? min(PrimExpr(kCopyChunk), PrimExpr(n) - begin) : PrimExpr(kCopyChunk);
        return for_loop(e, begin, size, ForKind::Serial, copy(e));
      });
      f.body = seq({copy_all, loop("row", rows, ForKind::Parallel, row)});
    }
    verify(f);
    return f;
  }

  const CallNode* call = nullptr;
  PrimFunc f;
  std::vector<Buffer> in;  // the call's inputs, in order
  Buffer out;
};

// The index at `at` of `indices` checked against axis `axis` of `out` (Intrinsic::CheckIndex).
PrimExpr checked(const Buffer& indices, PrimExpr at, const Buffer& out, int64_t axis,
                 bool allow_negative) {
  return prim_call(Intrinsic::CheckIndex,
                   {cast(DType::Int64, load(indices, at)), PrimExpr(out->shape[axis]),
                    PrimExpr(axis), PrimExpr(int64_t{allow_negative})});
}

// Row r of scatter is position (o, i) of `indices` off the axis (o over the axes before it, i
// over those after); it walks the axis j = 0 .. n-1 in order.
PrimFunc lower_scatter(const Function& group, const std::string& func_name,
                       const passes::MachineModel&, bool gpu) {
  Kernel k(group, func_name, "scatter");
  const Buffer &indices = k.in[1], &updates = k.in[2], &out = k.out;
  const int64_t axis = attr_int(k.call->attrs, "axis");
  const std::string reduce = attr_str(k.call->attrs, "reduce");
  const bool include_self = attr_int(k.call->attrs, "include_self") != 0;
  const std::vector<int64_t>& ishape = indices->shape;
  const std::vector<int64_t> before(ishape.begin(), ishape.begin() + axis);
  const std::vector<int64_t> after(ishape.begin() + axis + 1, ishape.end());
  const int64_t n = ishape[axis], inner = numel(after), rows = numel(before) * inner;
  const DType t = out->dtype;

  auto row = [&](PrimExpr r) {
    // The row's coordinates, with the axis coordinate j (or the index there) in between.
    std::vector<PrimExpr> lo = unravel(inner == 1 ? r : r / inner, before);
    std::vector<PrimExpr> hi = unravel(inner == 1 ? PrimExpr(int64_t{0}) : r % inner, after);
    auto at = [&](const Buffer& b, PrimExpr j) {
      std::vector<PrimExpr> i = lo;
      i.push_back(j);
      i.insert(i.end(), hi.begin(), hi.end());
      return flat_index(b, i);
    };
    auto target = [&](PrimExpr j) {
      return at(out, checked(indices, at(indices, j), out, axis, false));
    };
    PrimVar pos("pos");
    auto each = [&](const std::function<Stmt(PrimExpr j)>& body) {
      return loop("j", n, ForKind::Serial, body);
    };
    Stmt apply = each([&](PrimExpr j) {
      PrimExpr u = load(updates, at(updates, j)), old = load(out, pos);
      PrimExpr v = reduce == "sum"    ? old + u
                   : reduce == "prod" ? old * u
                   : reduce == "amax" ? max(old, u)
                   : reduce == "amin" ? min(old, u)
                                      : u;
      return let_stmt(pos, target(j), store(out, pos, v));
    });
    if (reduce == "none" || include_self) return apply;
    // Every element the row writes starts from the reduction's identity.
    const double identity = reduce == "sum"    ? 0.0
                            : reduce == "prod" ? 1.0
                            : reduce == "amax" ? -INFINITY
                                               : INFINITY;  // saturates to the int's min/max
    Stmt init = each([&](PrimExpr j) { return store(out, target(j), make_const(t, identity)); });
    return seq({init, apply});
  };
  return k.copy_then_rows(rows, row, gpu);
}

// Row r of index_put is position (p, q) of data off the indexed axes (p before them, q after);
// it walks the index tensors' broadcast shape B in row-major order.
PrimFunc lower_index_put(const Function& group, const std::string& func_name,
                         const passes::MachineModel&, bool gpu) {
  Kernel k(group, func_name, "index_put");
  const Buffer &values = k.in[1], &out = k.out;
  const std::vector<Buffer> index(k.in.begin() + 2, k.in.end());
  const int64_t axis = attr_int(k.call->attrs, "axis");
  const int64_t count = static_cast<int64_t>(index.size());
  const bool accumulate = attr_int(k.call->attrs, "accumulate") != 0;
  const bool allow_negative = attr_int(k.call->attrs, "allow_negative") != 0;
  const std::vector<int64_t>& shape = out->shape;
  const std::vector<int64_t> before(shape.begin(), shape.begin() + axis);
  const std::vector<int64_t> after(shape.begin() + axis + count, shape.end());
  const TypeContext ctx{k.call->op->name, k.call->name};  // the relation checked the shapes
  std::vector<int64_t> b;
  for (const Buffer& ix : index) b = broadcast_shapes(b, ix->shape, ctx);
  const int64_t inner = numel(after), rows = numel(before) * inner;

  auto row = [&](PrimExpr r) {
    std::vector<PrimExpr> lo = unravel(inner == 1 ? r : r / inner, before);
    std::vector<PrimExpr> hi = unravel(inner == 1 ? PrimExpr(int64_t{0}) : r % inner, after);
    PrimVar pos("pos");
    return loop("b", numel(b), ForKind::Serial, [&](PrimExpr flat) {
      const std::vector<PrimExpr> bi = unravel(flat, b);
      std::vector<PrimExpr> o = lo, v = lo;
      for (int64_t j = 0; j < count; ++j)
        o.push_back(checked(index[j], flat_index(index[j], broadcast_index(index[j]->shape, bi)),
                            out, axis + j, allow_negative));
      o.insert(o.end(), hi.begin(), hi.end());
      v.insert(v.end(), bi.begin(), bi.end());
      v.insert(v.end(), hi.begin(), hi.end());
      PrimExpr u = load(values, flat_index(values, broadcast_index(values->shape, v)));
      return let_stmt(pos, flat_index(out, o),
                      store(out, pos, accumulate ? load(out, pos) + u : u));
    });
  };
  return k.copy_then_rows(rows, row, gpu);
}

// ---------------------------------------------------------------- registration

const Op* register_scatter() {
  Op op{"scatter", 3, OpPattern::Opaque, scatter_rel, nullptr, false, scatter_check_constants};
  op.lower = lower_scatter;
  op.attrs = {int_attr("axis", 0, "the axis whose coordinate the indices give (torch's dim)"),
              str_attr("reduce", "none", "'none' (assign), 'sum', 'prod', 'amax' or 'amin'"),
              int_attr("include_self", 1, "0: written elements start from the identity")};
  return register_op(std::move(op));
}
[[maybe_unused]] const Op* kScatter = register_scatter();

const Op* register_index_put() {
  Op op{"index_put", -1,    OpPattern::Opaque,        index_put_rel,
        nullptr,     false, index_put_check_constants};
  op.lower = lower_index_put;
  op.attrs = {int_attr("axis", 0, "the first of the adjacent axes the index tensors index"),
              int_attr("accumulate", 0, "1: add the values instead of assigning them"),
              int_attr("allow_negative", 1, "1: negative indices count from the end")};
  return register_op(std::move(op));
}
[[maybe_unused]] const Op* kIndexPut = register_index_put();

}  // namespace
}  // namespace ember::ir
