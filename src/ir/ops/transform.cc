// Layout and indexing ops: reshape, flatten, transpose, concatenate, strided_slice,
// expand_dims, squeeze, broadcast_to, take. Each output element reads one input element
// (Injective; broadcast_to is Broadcast); reshape, flatten, expand_dims and squeeze are
// views of their input.
#include <algorithm>
#include <string>
#include <vector>

#include "op_util.h"

namespace ember::ir {
namespace {

using namespace ops;

// Output element `idx` of a tensor with `out_shape` reads the input element at the same
// row-major position: flatten the index, then unflatten it in the input's shape.
Tensor row_major_copy(const std::string& name, const Tensor& x,
                      const std::vector<int64_t>& out_shape) {
  return compute(name, out_shape, [&](const std::vector<PrimVar>& idx) {
    PrimExpr flat = PrimExpr(int64_t{0});
    for (size_t d = 0; d < idx.size(); ++d) flat = flat * PrimExpr(out_shape[d]) + idx[d];
    std::vector<PrimExpr> in_idx(x.shape().size());
    int64_t stride = 1;
    for (size_t d = x.shape().size(); d-- > 0;) {
      PrimExpr i = flat / PrimExpr(stride);
      in_idx[d] = d == 0 ? i : i % PrimExpr(x.shape()[d]);
      stride *= x.shape()[d];
    }
    return x(in_idx);
  });
}

// ---------------------------------------------------------------- reshape

Type reshape_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 1, ctx);
  const TensorType& x = tensor_arg(args, 0, "data", ctx);
  std::vector<int64_t> shape = attr_ints(attrs, "newshape");
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) ctx.fail("newshape " + ints_str(shape) + " has more than one -1");
      infer = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      ctx.fail("newshape " + ints_str(shape) +
               " has a negative size; use sizes >= 0 and at most one -1");
    } else {
      known *= shape[i];
    }
  }
  int64_t total = numel(x.shape);
  if (infer >= 0) {
    if (known == 0 || total % known != 0)
      ctx.fail("cannot reshape " + to_string(x) + " (" + std::to_string(total) + " elements) to " +
               ints_str(shape) + ": no size for -1 gives that many elements");
    shape[infer] = total / known;
  } else if (known != total) {
    ctx.fail("cannot reshape " + to_string(x) + " (" + std::to_string(total) + " elements) to " +
             ints_str(shape) + " (" + std::to_string(known) +
             " elements); the new shape must have the same number of elements");
  }
  attrs = attrs.with("newshape", shape);
  return TensorType{shape, x.dtype};
}

Tensor reshape_compute(const std::vector<Tensor>& in, const Attrs&, const TensorType& out) {
  return row_major_copy("reshape", in[0], out.shape);
}

// ---------------------------------------------------------------- flatten

Type flatten_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 1, ctx);
  const TensorType& x = tensor_arg(args, 0, "data", ctx);
  if (x.ndim() == 0) return TensorType{{1}, x.dtype};  // torch.flatten of a scalar
  int64_t start = normalize_axis(attr_int(attrs, "start_dim"), x.ndim(), ctx);
  int64_t end = normalize_axis(attr_int(attrs, "end_dim"), x.ndim(), ctx);
  if (start > end)
    ctx.fail("start_dim (" + std::to_string(start) + ") comes after end_dim (" +
             std::to_string(end) + "); give start_dim <= end_dim");
  attrs = attrs.with("start_dim", start).with("end_dim", end);
  std::vector<int64_t> shape(x.shape.begin(), x.shape.begin() + start);
  int64_t merged = 1;
  for (int64_t d = start; d <= end; ++d) merged *= x.shape[d];
  shape.push_back(merged);
  shape.insert(shape.end(), x.shape.begin() + end + 1, x.shape.end());
  return TensorType{shape, x.dtype};
}

Tensor flatten_compute(const std::vector<Tensor>& in, const Attrs&, const TensorType& out) {
  return row_major_copy("flatten", in[0], out.shape);
}

// ---------------------------------------------------------------- transpose

Type transpose_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 1, ctx);
  const TensorType& x = tensor_arg(args, 0, "data", ctx);
  std::vector<int64_t> axes = attr_ints(attrs, "axes");
  if (axes.empty()) {
    for (int64_t d = x.ndim(); d-- > 0;) axes.push_back(d);
  } else if (static_cast<int64_t>(axes.size()) != x.ndim()) {
    ctx.fail("axes " + ints_str(axes) + " has " + std::to_string(axes.size()) +
             " entries but the input is " + to_string(x) + "; give one axis per dimension");
  }
  std::vector<bool> seen(x.ndim(), false);
  std::vector<int64_t> shape;
  for (int64_t& a : axes) {
    a = normalize_axis(a, x.ndim(), ctx);
    if (seen[a])
      ctx.fail("axes " + ints_str(axes) + " repeats axis " + std::to_string(a) +
               "; give a permutation of the input's axes");
    seen[a] = true;
    shape.push_back(x.shape[a]);
  }
  attrs = attrs.with("axes", axes);
  return TensorType{shape, x.dtype};
}

Tensor transpose_compute(const std::vector<Tensor>& in, const Attrs& attrs, const TensorType& out) {
  const Tensor& x = in[0];
  std::vector<int64_t> axes = attr_ints(attrs, "axes");
  return compute("transpose", out.shape, [&](const std::vector<PrimVar>& idx) {
    std::vector<PrimExpr> in_idx(idx.size());
    for (size_t k = 0; k < axes.size(); ++k) in_idx[axes[k]] = idx[k];
    return x(in_idx);
  });
}

// ---------------------------------------------------------------- blocked layouts

// to_blocked: NCHW [N, C, H, W] -> NCHW[c]c [N, ceil(C/c), H, W, c] (attr block = c); a
// block that does not divide C pads the last block with zero channels. from_blocked is its
// inverse, and drops the pad channels (attr channels = C, default all of them).
// AlterOpLayout puts them where a blocked conv meets an op that needs the plain layout.
Type to_blocked_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 1, ctx);
  const TensorType& x = tensor_arg(args, 0, "data", ctx);
  check_rank(x, 4, "data (NCHW)", ctx);
  int64_t c = attr_int(attrs, "block");
  if (c < 1) ctx.fail("block = " + std::to_string(c) + " must be >= 1");
  return TensorType{{x.shape[0], (x.shape[1] + c - 1) / c, x.shape[2], x.shape[3], c}, x.dtype};
}

Tensor to_blocked_compute(const std::vector<Tensor>& in, const Attrs&, const TensorType& out) {
  const Tensor& x = in[0];
  int64_t c = out.shape[4], channels = x.shape()[1];
  return compute("to_blocked", out.shape, [&](const std::vector<PrimVar>& i) {
    PrimExpr ch = i[1] * idx(c) + i[4];
    if (channels % c == 0) return x({i[0], ch, i[2], i[3]});
    // The clamp keeps the load in bounds; the condition implies it (a masked vector load).
    return select(ch < idx(channels), x({i[0], min(ch, idx(channels - 1)), i[2], i[3]}),
                  make_const(x.dtype(), 0.0));
  });
}

Type from_blocked_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 1, ctx);
  const TensorType& x = tensor_arg(args, 0, "data", ctx);
  check_rank(x, 5, "data (NCHW[c]c)", ctx);
  const int64_t padded = x.shape[1] * x.shape[4];
  // Declared without a default: all of the blocks' channels, which depends on the input.
  const int64_t channels = attr_has(attrs, "channels") ? attr_int(attrs, "channels") : padded;
  if (channels > padded || channels <= padded - x.shape[4])
    ctx.fail("channels = " + std::to_string(channels) + " must be in the last block of " +
             to_string(x) + " (" + std::to_string(padded - x.shape[4] + 1) + " to " +
             std::to_string(padded) + ")");
  return TensorType{{x.shape[0], channels, x.shape[2], x.shape[3]}, x.dtype};
}

Tensor from_blocked_compute(const std::vector<Tensor>& in, const Attrs&, const TensorType& out) {
  const Tensor& x = in[0];
  int64_t c = x.shape()[4];
  return compute("from_blocked", out.shape, [&](const std::vector<PrimVar>& i) {
    return x({i[0], i[1] / idx(c), i[2], i[3], i[1] % idx(c)});
  });
}

// ---------------------------------------------------------------- concatenate

Type concatenate_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  if (args.empty()) ctx.fail("needs at least one input tensor");
  const TensorType& first = tensor_arg(args, 0, "input 0", ctx);
  if (first.ndim() == 0) ctx.fail("cannot concatenate rank-0 tensors; reshape them to [1]");
  int64_t axis = normalize_axis(attr_int(attrs, "axis"), first.ndim(), ctx);
  std::vector<int64_t> shape = first.shape;
  shape[axis] = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string what = "input " + std::to_string(i);
    const TensorType& t = tensor_arg(args, i, what.c_str(), ctx);
    if (t.dtype != first.dtype)
      ctx.fail(what + " is " + to_string(t) + " but input 0 is " + to_string(first) +
               "; cast the inputs to one dtype");
    bool ok = t.ndim() == first.ndim();
    for (int64_t d = 0; ok && d < t.ndim(); ++d) ok = d == axis || t.shape[d] == first.shape[d];
    if (!ok)
      ctx.fail(what + " is " + to_string(t) + " but input 0 is " + to_string(first) +
               "; all inputs must have the same rank and sizes except along axis " +
               std::to_string(axis));
    shape[axis] += t.shape[axis];
  }
  attrs = attrs.with("axis", axis);
  return TensorType{shape, first.dtype};
}

// A chain of selects on the axis index; Select evaluates both sides, so every input's
// index along the axis is clamped into its own range.
Tensor concatenate_compute(const std::vector<Tensor>& in, const Attrs& attrs,
                           const TensorType& out) {
  size_t axis = static_cast<size_t>(attr_int(attrs, "axis"));
  return compute("concatenate", out.shape, [&](const std::vector<PrimVar>& idx) {
    std::vector<int64_t> offsets{0};
    for (const Tensor& t : in) offsets.push_back(offsets.back() + t.shape()[axis]);
    auto read = [&](size_t k) {
      std::vector<PrimExpr> i = as_exprs(idx);
      PrimExpr local = idx[axis] - PrimExpr(offsets[k]);
      if (k > 0) local = max(local, PrimExpr(int64_t{0}));
      if (k + 1 < in.size()) local = min(local, PrimExpr(in[k]->shape[axis] - 1));
      i[axis] = local;
      return in[k](i);
    };
    PrimExpr value = read(in.size() - 1);
    for (size_t k = in.size() - 1; k-- > 0;)
      value = select(idx[axis] < PrimExpr(offsets[k + 1]), read(k), value);
    return value;
  });
}

// ---------------------------------------------------------------- strided_slice

// begin/end/strides per entry of `axes` (default: the leading axes). Negative begin and
// end count from the end and both are clamped into [0, size], as Python slices are; after
// the relation every list has one normalised entry per sliced axis.
Type strided_slice_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 1, ctx);
  const TensorType& x = tensor_arg(args, 0, "data", ctx);
  std::vector<int64_t> begin = attr_ints(attrs, "begin"), end = attr_ints(attrs, "end");
  size_t n = begin.size();
  std::vector<int64_t> strides = attr_ints(attrs, "strides");
  if (strides.empty()) strides.assign(n, 1);
  std::vector<int64_t> axes = attr_ints(attrs, "axes");
  if (axes.empty())
    for (size_t k = 0; k < n; ++k) axes.push_back(static_cast<int64_t>(k));
  if (end.size() != n || strides.size() != n || axes.size() != n)
    ctx.fail("begin " + ints_str(begin) + ", end " + ints_str(end) + ", strides " +
             ints_str(attr_ints(attrs, "strides")) + " and axes " +
             ints_str(attr_ints(attrs, "axes")) +
             " must have one entry per sliced axis (strides and axes may be empty)");
  std::vector<int64_t> shape = x.shape;
  std::vector<bool> seen(x.ndim(), false);
  for (size_t k = 0; k < n; ++k) {
    int64_t a = axes[k] = normalize_axis(axes[k], x.ndim(), ctx);
    if (seen[a])
      ctx.fail("axes " + ints_str(attr_ints(attrs, "axes")) + " repeats axis " + std::to_string(a));
    seen[a] = true;
    if (strides[k] < 1)
      ctx.fail("strides " + ints_str(strides) + " must be positive (reverse with a flip instead)");
    int64_t size = x.shape[a];
    auto clamp = [size](int64_t v) { return std::clamp(v < 0 ? v + size : v, int64_t{0}, size); };
    begin[k] = clamp(begin[k]);
    end[k] = clamp(end[k]);
    shape[a] = end[k] > begin[k] ? (end[k] - begin[k] + strides[k] - 1) / strides[k] : 0;
  }
  attrs = attrs.with("begin", begin).with("end", end).with("strides", strides).with("axes", axes);
  return TensorType{shape, x.dtype};
}

Tensor strided_slice_compute(const std::vector<Tensor>& in, const Attrs& attrs,
                             const TensorType& out) {
  auto begin = attr_ints(attrs, "begin"), strides = attr_ints(attrs, "strides");
  auto axes = attr_ints(attrs, "axes");
  return compute("strided_slice", out.shape, [&](const std::vector<PrimVar>& i) {
    std::vector<PrimExpr> xi = as_exprs(i);
    for (size_t k = 0; k < axes.size(); ++k)
      xi[axes[k]] = idx(begin[k]) + i[axes[k]] * idx(strides[k]);
    return in[0](xi);
  });
}

// ---------------------------------------------------------------- expand_dims, squeeze

Type expand_dims_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 1, ctx);
  const TensorType& x = tensor_arg(args, 0, "data", ctx);
  // The new axes go before input axis `axis`; axis == ndim appends them.
  int64_t axis = normalize_axis(attr_int(attrs, "axis"), x.ndim() + 1, ctx);
  int64_t count = attr_int(attrs, "num_newaxis");
  if (count < 0) ctx.fail("num_newaxis = " + std::to_string(count) + " must be >= 0");
  attrs = attrs.with("axis", axis).with("num_newaxis", count);
  std::vector<int64_t> shape = x.shape;
  shape.insert(shape.begin() + axis, count, 1);
  return TensorType{shape, x.dtype};
}

Tensor expand_dims_compute(const std::vector<Tensor>& in, const Attrs& attrs,
                           const TensorType& out) {
  int64_t axis = attr_int(attrs, "axis"), count = attr_int(attrs, "num_newaxis");
  return compute("expand_dims", out.shape, [&](const std::vector<PrimVar>& i) {
    std::vector<PrimExpr> xi = as_exprs(i);
    xi.erase(xi.begin() + axis, xi.begin() + axis + count);
    return in[0](xi);
  });
}

Type squeeze_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 1, ctx);
  const TensorType& x = tensor_arg(args, 0, "data", ctx);
  std::vector<int64_t> axes = attr_ints(attrs, "axis");
  if (axes.empty()) {
    for (int64_t d = 0; d < x.ndim(); ++d)
      if (x.shape[d] == 1) axes.push_back(d);
  }
  for (int64_t& a : axes) {
    a = normalize_axis(a, x.ndim(), ctx);
    if (x.shape[a] != 1)
      ctx.fail("axis " + std::to_string(a) + " of " + to_string(x) + " has size " +
               std::to_string(x.shape[a]) + "; only size-1 axes can be squeezed");
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  attrs = attrs.with("axis", axes);
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < x.ndim(); ++d)
    if (!std::binary_search(axes.begin(), axes.end(), d)) shape.push_back(x.shape[d]);
  return TensorType{shape, x.dtype};
}

Tensor squeeze_compute(const std::vector<Tensor>& in, const Attrs& attrs, const TensorType& out) {
  auto axes = attr_ints(attrs, "axis");
  const Tensor& x = in[0];
  return compute("squeeze", out.shape, [&](const std::vector<PrimVar>& i) {
    std::vector<PrimExpr> xi;
    size_t next = 0;
    for (int64_t d = 0; d < x.ndim(); ++d)
      xi.push_back(std::binary_search(axes.begin(), axes.end(), d) ? idx(0) : PrimExpr(i[next++]));
    return x(xi);
  });
}

// ---------------------------------------------------------------- broadcast_to

// NumPy rules; a -1 in `shape` keeps the input's size there (torch.Tensor.expand).
Type broadcast_to_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 1, ctx);
  const TensorType& x = tensor_arg(args, 0, "data", ctx);
  std::vector<int64_t> shape = attr_ints(attrs, "shape");
  int64_t lead = static_cast<int64_t>(shape.size()) - x.ndim();
  if (lead < 0)
    ctx.fail("cannot broadcast " + to_string(x) + " to " + ints_str(shape) +
             ", which has fewer dimensions");
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    int64_t from = d < lead ? 1 : x.shape[d - lead];
    if (shape[d] == -1 && d >= lead) shape[d] = from;
    if (shape[d] < 0 || (from != 1 && from != shape[d]))
      ctx.fail("cannot broadcast " + to_string(x) + " to " + ints_str(attr_ints(attrs, "shape")) +
               ": dimension " + std::to_string(d) + " has size " + std::to_string(from) +
               ", which must be 1 or " + (shape[d] < 0 ? "a size >= 0" : std::to_string(shape[d])));
  }
  attrs = attrs.with("shape", shape);
  return TensorType{shape, x.dtype};
}

Tensor broadcast_to_compute(const std::vector<Tensor>& in, const Attrs&, const TensorType& out) {
  const Tensor& x = in[0];
  return compute("broadcast_to", out.shape,
                 [&](const std::vector<PrimVar>& i) { return x(broadcast_index(x, i)); });
}

// ---------------------------------------------------------------- take

// Attributes: axis, and allow_negative (1, the default: -1 is the last row, as x[idx] in
// PyTorch; 0: negative indices are errors, as torch's index_select and embedding).
Type take_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 2, ctx);
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  const TensorType& indices = index_arg(args, 1, "indices", ctx);
  int64_t axis = normalize_axis(attr_int(attrs, "axis"), data.ndim(), ctx);
  if (data.shape[axis] == 0)
    ctx.fail("data " + to_string(data) + " is empty along axis " + std::to_string(axis) +
             "; there is nothing to take");
  attrs = attrs.with("axis", axis)
              .with("allow_negative", int64_t{attr_int(attrs, "allow_negative") != 0});
  std::vector<int64_t> shape(data.shape.begin(), data.shape.begin() + axis);
  shape.insert(shape.end(), indices.shape.begin(), indices.shape.end());
  shape.insert(shape.end(), data.shape.begin() + axis + 1, data.shape.end());
  return TensorType{shape, data.dtype};
}

void take_check_constants(const std::vector<Expr>& args, const Attrs& attrs,
                          const TypeContext& ctx) {
  check_constant_indices(args[0], args[1], attr_int(attrs, "axis"),
                         attr_int(attrs, "allow_negative") != 0, ctx);
}

// Each index is checked in the kernel (Intrinsic::CheckIndex): a negative one wraps when
// allowed, and one still out of range is reported to the runtime, which raises an error
// naming the kernel; the kernel meanwhile reads row 0, never memory outside the tensor.
Tensor take_compute(const std::vector<Tensor>& in, const Attrs& attrs, const TensorType& out) {
  const Tensor &data = in[0], &indices = in[1];
  size_t axis = static_cast<size_t>(attr_int(attrs, "axis"));
  int64_t allow_negative = attr_int(attrs, "allow_negative") != 0;
  size_t k = indices.shape().size();
  return compute("take", out.shape, [&](const std::vector<PrimVar>& i) {
    std::vector<PrimExpr> ii(i.begin() + axis, i.begin() + axis + k);
    PrimExpr at =
        prim_call(Intrinsic::CheckIndex, {cast(DType::Int64, indices(ii)), idx(data.shape()[axis]),
                                          idx(static_cast<int64_t>(axis)), idx(allow_negative)});
    std::vector<PrimExpr> di(i.begin(), i.begin() + axis);
    di.push_back(at);
    di.insert(di.end(), i.begin() + axis + k, i.end());
    return data(di);
  });
}

// ---------------------------------------------------------------- gather

// torch.gather: out[i] = data[i with its `axis` coordinate replaced by indices[i]]. The
// indices have data's rank and are no larger than it along the other axes; the output has
// their shape. Negative indices are errors, as in torch.
Type gather_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 2, ctx);
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  const TensorType& indices = index_arg(args, 1, "indices", ctx);
  if (indices.ndim() != data.ndim())
    ctx.fail("indices " + to_string(indices) + " must have as many dimensions as data " +
             to_string(data));
  const int64_t axis = indexed_axis(data, indices, attrs, "gathered", ctx);
  attrs = attrs.with("axis", axis);
  return TensorType{indices.shape, data.dtype};
}

void gather_check_constants(const std::vector<Expr>& args, const Attrs& attrs,
                            const TypeContext& ctx) {
  check_constant_indices(args[0], args[1], attr_int(attrs, "axis"), false, ctx);
}

// Each index is checked in the kernel, as take's (Intrinsic::CheckIndex).
Tensor gather_compute(const std::vector<Tensor>& in, const Attrs& attrs, const TensorType& out) {
  const Tensor &data = in[0], &indices = in[1];
  const size_t axis = static_cast<size_t>(attr_int(attrs, "axis"));
  return compute("gather", out.shape, [&](const std::vector<PrimVar>& i) {
    std::vector<PrimExpr> at(i.begin(), i.end());
    at[axis] = prim_call(Intrinsic::CheckIndex,
                         {cast(DType::Int64, indices(std::vector<PrimExpr>(i.begin(), i.end()))),
                          idx(data.shape()[axis]), idx(static_cast<int64_t>(axis)), idx(0)});
    return data(at);
  });
}

// ---------------------------------------------------------------- adv_index

// PyTorch's advanced indexing by several index tensors, on adjacent axes from `axis`:
// x[:, i, j] is adv_index(x, i, j, axis=1). The index tensors broadcast together, and their
// broadcast shape replaces the indexed axes. Negative indices count from the end.
Type adv_index_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  if (args.size() < 2) ctx.fail("takes data and at least one index tensor");
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  const int64_t k = static_cast<int64_t>(args.size()) - 1;
  const int64_t axis = normalize_axis(attr_int(attrs, "axis"), data.ndim(), ctx);
  if (axis + k > data.ndim())
    ctx.fail(std::to_string(k) + " index tensors from axis " + std::to_string(axis) +
             " index more axes than data " + to_string(data) + " has");
  std::vector<int64_t> indexed;
  for (int64_t j = 0; j < k; ++j) {
    const TensorType& ix = index_arg(args, j + 1, "index " + std::to_string(j), ctx);
    if (data.shape[axis + j] == 0)
      ctx.fail("data " + to_string(data) + " is empty along axis " + std::to_string(axis + j));
    indexed = broadcast_shapes(indexed, ix.shape, ctx);
  }
  attrs = attrs.with("axis", axis);
  std::vector<int64_t> shape(data.shape.begin(), data.shape.begin() + axis);
  shape.insert(shape.end(), indexed.begin(), indexed.end());
  shape.insert(shape.end(), data.shape.begin() + axis + k, data.shape.end());
  return TensorType{shape, data.dtype};
}

void adv_index_check_constants(const std::vector<Expr>& args, const Attrs& attrs,
                               const TypeContext& ctx) {
  for (size_t j = 1; j < args.size(); ++j)
    check_constant_indices(args[0], args[j], attr_int(attrs, "axis") + int64_t(j) - 1, true, ctx);
}

Tensor adv_index_compute(const std::vector<Tensor>& in, const Attrs& attrs, const TensorType& out) {
  const Tensor& data = in[0];
  const size_t axis = static_cast<size_t>(attr_int(attrs, "axis")), k = in.size() - 1;
  const size_t indexed = out.shape.size() - (data.shape().size() - k);  // broadcast rank
  return compute("adv_index", out.shape, [&](const std::vector<PrimVar>& i) {
    const std::vector<PrimExpr> all = as_exprs(i);
    const std::vector<PrimExpr> b(all.begin() + axis, all.begin() + axis + indexed);
    std::vector<PrimExpr> at(all.begin(), all.begin() + axis);
    for (size_t j = 0; j < k; ++j)
      at.push_back(
          prim_call(Intrinsic::CheckIndex,
                    {cast(DType::Int64, in[j + 1](broadcast_index(in[j + 1].shape(), b))),
                     idx(data.shape()[axis + j]), idx(static_cast<int64_t>(axis + j)), idx(1)}));
    at.insert(at.end(), all.begin() + axis + indexed, all.end());
    return data(at);
  });
}

// ---------------------------------------------------------------- registration

[[maybe_unused]] const Op* kReshape = register_op(with_attrs(
    view_op({"reshape", 1, OpPattern::Injective, reshape_rel, reshape_compute}),
    {required_attr("newshape", AttrKind::Ints, "the new shape; -1 infers one dimension")}));
[[maybe_unused]] const Op* kFlatten = register_op(
    with_attrs(view_op({"flatten", 1, OpPattern::Injective, flatten_rel, flatten_compute}),
               {int_attr("start_dim", 1, "the first axis to flatten"),
                int_attr("end_dim", -1, "the last axis to flatten")}));
[[maybe_unused]] const Op* kTranspose =
    register_op(with_attrs({"transpose", 1, OpPattern::Injective, transpose_rel, transpose_compute},
                           {ints_attr("axes", {}, "the permutation; [] reverses the axes")}));
[[maybe_unused]] const Op* kToBlocked = register_op(
    with_attrs({"to_blocked", 1, OpPattern::Injective, to_blocked_rel, to_blocked_compute},
               {required_attr("block", AttrKind::Int, "channels per block, the c of NCHW[c]c")}));
[[maybe_unused]] const Op* kFromBlocked = register_op(
    with_attrs({"from_blocked", 1, OpPattern::Injective, from_blocked_rel, from_blocked_compute},
               {AttrSpec{"channels", AttrKind::Int, std::nullopt,
                         "the channels to keep, dropping the pad channels of the "
                         "last block (default: all of the blocks' channels)"}}));
[[maybe_unused]] const Op* kConcatenate = register_op(
    with_attrs({"concatenate", -1, OpPattern::Injective, concatenate_rel, concatenate_compute},
               {int_attr("axis", 0, "the axis to join along")}));
[[maybe_unused]] const Op* kStridedSlice = register_op(
    with_attrs({"strided_slice", 1, OpPattern::Injective, strided_slice_rel, strided_slice_compute},
               {required_attr("begin", AttrKind::Ints, "the first index along each sliced axis"),
                required_attr("end", AttrKind::Ints, "the end (exclusive) along each sliced axis"),
                ints_attr("strides", {}, "the step along each sliced axis; [] steps by 1"),
                ints_attr("axes", {}, "the sliced axes; [] slices the leading ones")}));
[[maybe_unused]] const Op* kExpandDims = register_op(with_attrs(
    view_op({"expand_dims", 1, OpPattern::Injective, expand_dims_rel, expand_dims_compute}),
    {int_attr("axis", 0, "where the new axes go"),
     int_attr("num_newaxis", 1, "how many axes of size 1 to insert")}));
[[maybe_unused]] const Op* kSqueeze = register_op(
    with_attrs(view_op({"squeeze", 1, OpPattern::Injective, squeeze_rel, squeeze_compute}),
               {ints_attr("axis", {}, "the axes of size 1 to drop; [] drops every one")}));
[[maybe_unused]] const Op* kBroadcastTo = register_op(
    with_attrs({"broadcast_to", 1, OpPattern::Broadcast, broadcast_to_rel, broadcast_to_compute},
               {required_attr("shape", AttrKind::Ints, "the shape to broadcast to")}));
[[maybe_unused]] const Op* kTake = register_op(with_attrs(
    {"take", 2, OpPattern::Injective, take_rel, take_compute, false, take_check_constants},
    {int_attr("axis", 0, "the axis the indices select along"),
     int_attr("allow_negative", 1, "1: negative indices count from the end")}));
[[maybe_unused]] const Op* kAdvIndex = register_op(
    with_attrs({"adv_index", -1, OpPattern::Injective, adv_index_rel, adv_index_compute, false,
                adv_index_check_constants},
               {int_attr("axis", 0, "the first of the adjacent axes the index tensors index")}));
[[maybe_unused]] const Op* kGather = register_op(with_attrs(
    {"gather", 2, OpPattern::Injective, gather_rel, gather_compute, false, gather_check_constants},
    {int_attr("axis", 0, "the axis whose coordinate the indices give (torch.gather's dim)")}));

}  // namespace
}  // namespace ember::ir
