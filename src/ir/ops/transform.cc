// Layout ops: reshape, flatten, transpose, concatenate. Each output element reads one
// input element (Injective); reshape and flatten are views of their input.
#include <algorithm>
#include <string>
#include <vector>

#include "ember/ir/op.h"

namespace ember::ir {
namespace {

const TensorType& tensor_arg(const std::vector<Type>& args, size_t i, const char* what,
                             const TypeContext& ctx) {
  if (args[i].is_tuple) ctx.fail(std::string(what) + " must be a tensor, not a tuple");
  return args[i].tensor();
}

void check_arity(const std::vector<Type>& args, size_t n, const TypeContext& ctx) {
  if (args.size() != n)
    ctx.fail("takes " + std::to_string(n) + " input(s) but was given " +
             std::to_string(args.size()));
}

std::string ints_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<PrimExpr> as_exprs(const std::vector<PrimVar>& v) {
  return std::vector<PrimExpr>(v.begin(), v.end());
}

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
  if (!attrs.has("newshape")) ctx.fail("needs the newshape attribute");
  std::vector<int64_t> shape = attrs.get_ints("newshape", {});
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
  int64_t start = normalize_axis(attrs.get_int("start_dim", 1), x.ndim(), ctx);
  int64_t end = normalize_axis(attrs.get_int("end_dim", -1), x.ndim(), ctx);
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
  std::vector<int64_t> axes = attrs.get_ints("axes", {});
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
  std::vector<int64_t> axes = attrs.get_ints("axes", {});
  return compute("transpose", out.shape, [&](const std::vector<PrimVar>& idx) {
    std::vector<PrimExpr> in_idx(idx.size());
    for (size_t k = 0; k < axes.size(); ++k) in_idx[axes[k]] = idx[k];
    return x(in_idx);
  });
}

// ---------------------------------------------------------------- concatenate

Type concatenate_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  if (args.empty()) ctx.fail("needs at least one input tensor");
  const TensorType& first = tensor_arg(args, 0, "input 0", ctx);
  if (first.ndim() == 0) ctx.fail("cannot concatenate rank-0 tensors; reshape them to [1]");
  int64_t axis = normalize_axis(attrs.get_int("axis", 0), first.ndim(), ctx);
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
  size_t axis = static_cast<size_t>(attrs.get_int("axis", 0));
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

Op view_op(Op op) {
  op.is_view = true;
  return op;
}

[[maybe_unused]] const Op* kReshape =
    register_op(view_op({"reshape", 1, OpPattern::Injective, reshape_rel, reshape_compute}));
[[maybe_unused]] const Op* kFlatten =
    register_op(view_op({"flatten", 1, OpPattern::Injective, flatten_rel, flatten_compute}));
[[maybe_unused]] const Op* kTranspose =
    register_op({"transpose", 1, OpPattern::Injective, transpose_rel, transpose_compute});
[[maybe_unused]] const Op* kConcatenate =
    register_op({"concatenate", -1, OpPattern::Injective, concatenate_rel, concatenate_compute});

}  // namespace
}  // namespace ember::ir
