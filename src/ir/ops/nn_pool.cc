// Pooling (NCHW, or the blocked layout NCHW[c]c): nn.max_pool2d, nn.avg_pool2d and
// nn.adaptive_avg_pool2d. Shapes and numerics follow torch.nn.functional.
#include <algorithm>
#include <string>
#include <vector>

#include "ember/support/checked_math.h"
#include "nn_util.h"

namespace ember::ir {
namespace {

using namespace ops;

// ---------------------------------------------------------------- pooling

// Pooling attributes, declared once (nn.avg_pool2d has no dilation, and count_include_pad).
std::vector<AttrSpec> pool_attr_specs(bool max_pool) {
  std::vector<AttrSpec> specs = {
      required_attr("pool_size", AttrKind::Ints, "the window (h, w), or one value for both"),
      ints_attr("strides", {1, 1}, "(h, w), or one value for both"),
      ints_attr("padding", {0, 0, 0, 0}, "1, 2 (h, w) or 4 (top, left, bottom, right) values"),
      int_attr("ceil_mode", 0, "1: a last partial window counts (torch's ceil_mode)"),
  };
  if (max_pool)
    specs.push_back(ints_attr("dilation", {1, 1}, "(h, w), or one value for both"));
  else
    specs.push_back(int_attr("count_include_pad", 1, "1: the divisor counts padding"));
  return specs;
}

struct PoolParams {
  std::vector<int64_t> kernel, strides, dilation, pad;
  bool ceil_mode;
};

PoolParams pool_attrs(Attrs& attrs, bool has_dilation, const TypeContext& ctx) {
  PoolParams p;
  p.kernel = pair_attr(attrs, "pool_size", 1, ctx);
  p.strides = pair_attr(attrs, "strides", 1, ctx);
  p.dilation = has_dilation ? pair_attr(attrs, "dilation", 1, ctx) : std::vector<int64_t>{1, 1};
  p.pad = padding_attr(attrs, ctx);
  p.ceil_mode = attr_int(attrs, "ceil_mode") != 0;
  attrs = attrs.with("ceil_mode", int64_t{p.ceil_mode});
  // A window that saw only padding would have no defined value (max of nothing, average
  // over no elements); torch is stricter still (pad <= kernel / 2).
  for (int dim = 0; dim < 2; ++dim) {
    int64_t window;
    if (mul_overflows(p.dilation[dim], p.kernel[dim] - 1, &window) ||
        add_overflows(window, 1, &window))
      ctx.fail("the pool window (size " + std::to_string(p.kernel[dim]) + ", dilation " +
               std::to_string(p.dilation[dim]) + ") does not fit in 64 bits; check them");
    if (p.pad[dim] >= window || p.pad[dim + 2] >= window)
      ctx.fail("padding " + ints_str(p.pad) + " must be smaller than the pool window (" +
               std::to_string(window) + " along " + (dim == 0 ? "height" : "width") +
               "); reduce the padding");
  }
  return p;
}

// With ceil_mode, torch defines a pool whose window is larger than the padded input when the
// window's one start fits (size + padding - kernel + stride - 1 >= 0): one window, clipped to
// the padded input for its divisor and its elements (EfficientNet's head pools a 7x7 map
// with a 2560-wide window). That window is the padded input itself: the kernel is written
// back as its size, so the loops run over the input and not over the kernel asked for.
void clip_windows_past_the_input(const TensorType& data, PoolParams& p, Attrs& attrs) {
  if (!p.ceil_mode) return;
  bool clipped = false;
  for (int dim = 0; dim < 2; ++dim) {
    const int64_t padded = data.shape[2 + dim] + p.pad[dim] + p.pad[dim + 2];
    if (p.dilation[dim] != 1 || p.kernel[dim] <= padded) continue;
    if (padded - p.kernel[dim] + p.strides[dim] - 1 < 0) continue;  // no window: an error below
    p.kernel[dim] = padded;
    clipped = true;
  }
  if (clipped) attrs = attrs.with("pool_size", p.kernel);
}

// Max pooling takes integers too (exact; AlterOpLayout subsamples an int8 conv's words by a
// 1 x 1 max pooling); an average needs floats.
Type pool_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx, bool is_max) {
  check_arity(args, 1, ctx);
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  // NCHW, or NCHW[c]c (AlterOpLayout's blocked layout: the windows slide over H and W and
  // the channel block rides along).
  if (data.ndim() != 5) check_rank(data, 4, "data", ctx);
  if (!is_max || data.dtype == DType::Bool) check_float(data, "data", ctx);
  PoolParams p = pool_attrs(attrs, is_max, ctx);
  clip_windows_past_the_input(data, p, attrs);
  int64_t oh = window_out_size(data.shape[2], p.pad[0], p.pad[2], p.kernel[0], p.strides[0],
                               p.dilation[0], p.ceil_mode, "height", ctx);
  int64_t ow = window_out_size(data.shape[3], p.pad[1], p.pad[3], p.kernel[1], p.strides[1],
                               p.dilation[1], p.ceil_mode, "width", ctx);
  std::vector<int64_t> shape = data.shape;
  shape[2] = oh;
  shape[3] = ow;
  return TensorType{shape, data.dtype};
}

Type max_pool2d_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  return pool_rel(args, attrs, ctx, true);
}

Type avg_pool2d_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  attrs = attrs.with("count_include_pad", int64_t{attr_int(attrs, "count_include_pad") != 0});
  return pool_rel(args, attrs, ctx, false);
}

// The input element at row y, column x for output index i (NCHW, or NCHW[c]c: the channel
// block axis is i[4]).
std::vector<PrimExpr> window_index(const std::vector<PrimVar>& i, PrimExpr y, PrimExpr x) {
  std::vector<PrimExpr> at = {i[0], i[1], std::move(y), std::move(x)};
  at.insert(at.end(), i.begin() + 4, i.end());
  return at;
}

// The padded input the windows read (it may extend past the padding in ceil mode).
Tensor pool_input(const std::string& name, const Tensor& data, const Attrs& attrs,
                  const std::vector<int64_t>& d, const TensorType& out, PrimExpr fill) {
  auto k = attr_ints(attrs, "pool_size");
  auto s = attr_ints(attrs, "strides");
  auto p = attr_ints(attrs, "padding");
  int64_t hp = (out.shape[2] - 1) * s[0] + d[0] * (k[0] - 1) + 1;
  int64_t wp = (out.shape[3] - 1) * s[1] + d[1] * (k[1] - 1) + 1;
  return pad_nchw(name, data, p[0], p[1], hp, wp, std::move(fill));
}

Tensor max_pool2d_compute(const std::vector<Tensor>& in, const Attrs& attrs,
                          const TensorType& out) {
  auto k = attr_ints(attrs, "pool_size");
  auto s = attr_ints(attrs, "strides");
  auto d = attr_ints(attrs, "dilation");
  Tensor padded = pool_input("max_pool2d_pad", in[0], attrs, d, out,
                             reduce_identity(ReduceOp::Max, in[0].dtype()));
  IterVar ry = reduce_axis(k[0], "ry"), rx = reduce_axis(k[1], "rx");
  return compute("max_pool2d", out.shape, [&](const std::vector<PrimVar>& i) {
    PrimExpr y = i[2] * idx(s[0]) + ry->var * idx(d[0]);
    PrimExpr x = i[3] * idx(s[1]) + rx->var * idx(d[1]);
    return max_reduce(padded(window_index(i, y, x)), {ry, rx});
  });
}

// torch's divisor: the window clipped to the padded input (count_include_pad) or to the
// input itself; a ceil-mode window hanging past the padding counts only what it covers.
PrimExpr avg_window_size(const PrimExpr& o, int64_t stride, int64_t kernel, int64_t size,
                         int64_t pad_begin, int64_t pad_end, bool count_include_pad) {
  PrimExpr start = o * idx(stride) - idx(pad_begin);
  PrimExpr end = min(start + idx(kernel), idx(size + pad_end));
  if (count_include_pad) return end - start;
  return min(end, idx(size)) - max(start, idx(0));
}

Tensor avg_pool2d_compute(const std::vector<Tensor>& in, const Attrs& attrs,
                          const TensorType& out) {
  const Tensor& data = in[0];
  auto k = attr_ints(attrs, "pool_size");
  auto s = attr_ints(attrs, "strides");
  auto p = attr_ints(attrs, "padding");
  bool include_pad = attr_int(attrs, "count_include_pad") != 0;
  Tensor padded =
      pool_input("avg_pool2d_pad", data, attrs, {1, 1}, out, make_const(data.dtype(), 0.0));
  IterVar ry = reduce_axis(k[0], "ry"), rx = reduce_axis(k[1], "rx");
  Tensor total = compute("avg_pool2d_sum", out.shape, [&](const std::vector<PrimVar>& i) {
    PrimExpr y = i[2] * idx(s[0]) + ry->var, x = i[3] * idx(s[1]) + rx->var;
    return sum(padded(window_index(i, y, x)), {ry, rx});
  });
  return compute("avg_pool2d", out.shape, [&](const std::vector<PrimVar>& i) {
    PrimExpr wh = avg_window_size(i[2], s[0], k[0], data.shape()[2], p[0], p[2], include_pad);
    PrimExpr ww = avg_window_size(i[3], s[1], k[1], data.shape()[3], p[1], p[3], include_pad);
    return total(as_exprs(i)) / cast(data.dtype(), wh * ww);
  });
}

Type adaptive_avg_pool2d_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 1, ctx);
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  // NCHW, or NCHW[c]c (the channel block rides along, as in pool_rel).
  if (data.ndim() != 5) check_rank(data, 4, "data", ctx);
  check_float(data, "data", ctx);
  auto size = pair_attr(attrs, "output_size", 1, ctx);
  if (data.shape[2] == 0 || data.shape[3] == 0)
    ctx.fail("data " + to_string(data) + " has an empty spatial dimension");
  std::vector<int64_t> shape = data.shape;
  shape[2] = size[0];
  shape[3] = size[1];
  return TensorType{shape, data.dtype};
}

// Window i of n over `size` is [floor(i * size / n), ceil((i + 1) * size / n)).
int64_t adaptive_max_window(int64_t size, int64_t n) {
  int64_t widest = 0;
  for (int64_t i = 0; i < n; ++i)
    widest = std::max(widest, ((i + 1) * size + n - 1) / n - (i * size) / n);
  return widest;
}

Tensor adaptive_avg_pool2d_compute(const std::vector<Tensor>& in, const Attrs&,
                                   const TensorType& out) {
  const Tensor& data = in[0];
  int64_t h = data.shape()[2], w = data.shape()[3], oh = out.shape[2], ow = out.shape[3];
  int64_t kh = adaptive_max_window(h, oh), kw = adaptive_max_window(w, ow);
  // When the sizes divide, every window is full and needs no guard.
  bool guard_h = h % oh != 0, guard_w = w % ow != 0;
  auto start = [](const PrimExpr& i, int64_t size, int64_t n) { return i * idx(size) / idx(n); };
  auto end = [](const PrimExpr& i, int64_t size, int64_t n) {
    return ((i + idx(1)) * idx(size) + idx(n - 1)) / idx(n);
  };
  IterVar ry = reduce_axis(kh, "ry"), rx = reduce_axis(kw, "rx");
  Tensor total = compute("adaptive_avg_pool2d_sum", out.shape, [&](const std::vector<PrimVar>& i) {
    PrimExpr y = start(i[2], h, oh) + ry->var, x = start(i[3], w, ow) + rx->var;
    PrimExpr inside = make_const(DType::Bool, 1);
    if (guard_h) {
      inside = logical_and(inside, y < end(i[2], h, oh));
      y = min(y, idx(h - 1));
    }
    if (guard_w) {
      inside = logical_and(inside, x < end(i[3], w, ow));
      x = min(x, idx(w - 1));
    }
    std::vector<PrimExpr> at = as_exprs(i);  // a blocked layout's block index passes through
    at[2] = y;
    at[3] = x;
    PrimExpr v = data(at);
    return sum(select(inside, v, make_const(data.dtype(), 0.0)), {ry, rx});
  });
  return compute("adaptive_avg_pool2d", out.shape, [&](const std::vector<PrimVar>& i) {
    PrimExpr count =
        (end(i[2], h, oh) - start(i[2], h, oh)) * (end(i[3], w, ow) - start(i[3], w, ow));
    return total(as_exprs(i)) / cast(data.dtype(), count);
  });
}

// ---------------------------------------------------------------- registration

[[maybe_unused]] const Op* kMaxPool2d = register_op(
    with_attrs({"nn.max_pool2d", 1, OpPattern::OutEWiseFusable, max_pool2d_rel, max_pool2d_compute},
               pool_attr_specs(true)));
[[maybe_unused]] const Op* kAvgPool2d = register_op(
    with_attrs({"nn.avg_pool2d", 1, OpPattern::OutEWiseFusable, avg_pool2d_rel, avg_pool2d_compute},
               pool_attr_specs(false)));
[[maybe_unused]] const Op* kAdaptiveAvgPool2d = register_op(
    with_attrs({"nn.adaptive_avg_pool2d", 1, OpPattern::OutEWiseFusable, adaptive_avg_pool2d_rel,
                adaptive_avg_pool2d_compute},
               {required_attr("output_size", AttrKind::Ints, "(h, w), or one value for both")}));

}  // namespace
}  // namespace ember::ir
