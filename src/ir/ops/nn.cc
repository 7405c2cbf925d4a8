// Neural-network ops (NCHW layout, OIHW weights): convolution, dense and matrix products,
// bias, batch and layer norm, pooling, softmax and log_softmax, constant padding. Shapes
// and numerics follow torch.nn.functional.
#include <algorithm>
#include <string>
#include <vector>

#include "ember/ir/prim_math.h"
#include "ember/support/checked_math.h"
#include "op_util.h"

namespace ember::ir {
namespace {

using namespace ops;

// ---------------------------------------------------------------- relation helpers

// A (h, w) attribute given as 1 or 2 values, each >= min_value; written back as 2 values.
std::vector<int64_t> pair_attr(Attrs& attrs, const std::string& key, int64_t min_value,
                               const TypeContext& ctx) {
  std::vector<int64_t> v = attr_ints(attrs, key);
  if (v.size() == 1) v = {v[0], v[0]};
  if (v.size() != 2) ctx.fail(key + " " + ints_str(v) + " must have 1 or 2 values (h, w)");
  for (int64_t x : v)
    if (x < min_value)
      ctx.fail(key + " " + ints_str(v) + " must be >= " + std::to_string(min_value));
  attrs = attrs.with(key, v);
  return v;
}

// Padding as 1 value, 2 (h, w) or 4 (top, left, bottom, right); written back as 4.
std::vector<int64_t> padding_attr(Attrs& attrs, const TypeContext& ctx) {
  std::vector<int64_t> p = attr_ints(attrs, "padding");
  if (p.size() == 1)
    p = {p[0], p[0], p[0], p[0]};
  else if (p.size() == 2)
    p = {p[0], p[1], p[0], p[1]};
  if (p.size() != 4)
    ctx.fail("padding " + ints_str(p) +
             " must have 1, 2 (h, w) or 4 (top, left, bottom, right) values");
  for (int64_t x : p)
    if (x < 0) ctx.fail("padding " + ints_str(p) + " must not be negative");
  attrs = attrs.with("padding", p);
  return p;
}

// Output size of a sliding window along one dimension, as torch computes it: with ceil_mode
// a last window that would start in the end padding is dropped.
int64_t window_out_size(int64_t size, int64_t pad_begin, int64_t pad_end, int64_t kernel,
                        int64_t stride, int64_t dilation, bool ceil_mode, const char* dim,
                        const TypeContext& ctx) {
  int64_t padded, reach, span;
  if (add_overflows(size, pad_begin, &padded) || add_overflows(padded, pad_end, &padded) ||
      mul_overflows(dilation, kernel - 1, &reach) || sub_overflows(padded, reach, &span) ||
      sub_overflows(span, 1, &span))
    ctx.fail(std::string("the padded input ") + dim + " or the window is too large (sizes " +
             "past 64 bits); check the padding, kernel size and dilation");
  if (span < 0)
    ctx.fail(std::string("the window (size ") + std::to_string(kernel) + ", dilation " +
             std::to_string(dilation) + ") is larger than the padded input " + dim + " (" +
             std::to_string(padded) + "); use a smaller window or more padding");
  // Ceiling division without span + stride - 1, which can pass 64 bits; a last window
  // whose start does not fit in 64 bits starts past the input, too.
  int64_t out = span / stride + (ceil_mode && span % stride != 0) + 1, last_start;
  if (ceil_mode && (mul_overflows(out - 1, stride, &last_start) || last_start >= size + pad_begin))
    --out;
  return out;
}

// Output (height, width) of a kh x kw convolution window over dims 2 and 3 of data, with the
// strides, dilation and padding attributes checked and written back.
std::pair<int64_t, int64_t> conv_out_hw(const TensorType& data, int64_t kh, int64_t kw,
                                        Attrs& attrs, const TypeContext& ctx) {
  auto strides = pair_attr(attrs, "strides", 1, ctx);
  auto dilation = pair_attr(attrs, "dilation", 1, ctx);
  auto pad = padding_attr(attrs, ctx);
  int64_t oh = window_out_size(data.shape[2], pad[0], pad[2], kh, strides[0], dilation[0], false,
                               "height", ctx);
  int64_t ow = window_out_size(data.shape[3], pad[1], pad[3], kw, strides[1], dilation[1], false,
                               "width", ctx);
  return {oh, ow};
}

// ---------------------------------------------------------------- compute helpers

// data [N, C, H, W, ...] placed at (top, left) in a [N, C, hp, wp, ...] tensor filled with
// `fill` (the trailing axes of a blocked layout pass through). Returns data itself when
// nothing is padded. Select evaluates both sides, so the guarded load reads clamped (always
// valid) indices.
Tensor pad_nchw(const std::string& name, const Tensor& data, int64_t top, int64_t left, int64_t hp,
                int64_t wp, PrimExpr fill) {
  int64_t h = data.shape()[2], w = data.shape()[3];
  if (top == 0 && left == 0 && hp <= h && wp <= w) return data;
  std::vector<int64_t> shape = data.shape();
  shape[2] = hp;
  shape[3] = wp;
  return compute(name, shape, [&](const std::vector<PrimVar>& i) {
    PrimExpr y = i[2] - idx(top), x = i[3] - idx(left);
    PrimExpr inside = make_const(DType::Bool, 1);
    PrimExpr yc = y, xc = x;
    // Guard and clamp only the sides that have padding.
    if (top > 0) {
      inside = logical_and(inside, y >= idx(0));
      yc = max(yc, idx(0));
    }
    if (hp - top > h) {
      inside = logical_and(inside, y < idx(h));
      yc = min(yc, idx(h - 1));
    }
    if (left > 0) {
      inside = logical_and(inside, x >= idx(0));
      xc = max(xc, idx(0));
    }
    if (wp - left > w) {
      inside = logical_and(inside, x < idx(w));
      xc = min(xc, idx(w - 1));
    }
    std::vector<PrimExpr> at = {i[0], i[1], yc, xc};
    at.insert(at.end(), i.begin() + 4, i.end());
    return select(inside, data(at), fill);
  });
}

// ---------------------------------------------------------------- conv2d

// nn.conv2d's (and nn.conv2d_blocked's) attributes, declared once; the relation writes them
// back normalised (strides and dilation as 2 values, padding as 4).
const std::vector<AttrSpec> kConvAttrs = {
    ints_attr("strides", {1, 1}, "(h, w), or one value for both"),
    ints_attr("padding", {0, 0, 0, 0}, "1, 2 (h, w) or 4 (top, left, bottom, right) values"),
    ints_attr("dilation", {1, 1}, "(h, w), or one value for both"),
    int_attr("groups", 1, "the channels split into this many groups"),
};
struct ConvAttrs {
  std::vector<int64_t> strides, padding, dilation;
  int64_t groups;
  explicit ConvAttrs(const Attrs& a)
      : strides(attr_ints(a, "strides")),
        padding(attr_ints(a, "padding")),
        dilation(attr_ints(a, "dilation")),
        groups(attr_int(a, "groups")) {}
};

Type conv2d_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 2, ctx);
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  const TensorType& weight = tensor_arg(args, 1, "weight", ctx);
  check_rank(data, 4, "data", ctx);
  check_rank(weight, 4, "the weight (OIHW)", ctx);
  check_float(data, "data", ctx);
  check_same_dtype(data, "data", weight, "the weight", ctx);
  int64_t groups = attr_int(attrs, "groups");
  if (groups < 1) ctx.fail("groups = " + std::to_string(groups) + " must be >= 1");
  attrs = attrs.with("groups", groups);
  int64_t channels = data.shape[1], out_channels = weight.shape[0];
  if (channels != weight.shape[1] * groups)
    ctx.fail("data has " + std::to_string(channels) + " channels but the weight expects " +
             std::to_string(weight.shape[1] * groups) + " (weight shape " + ints_str(weight.shape) +
             ", groups=" + std::to_string(groups) + "); check the weight or the groups attribute");
  if (out_channels % groups != 0)
    ctx.fail("the weight has " + std::to_string(out_channels) + " output channels, which groups=" +
             std::to_string(groups) + " does not divide; check the weight or the groups attribute");
  auto [oh, ow] = conv_out_hw(data, weight.shape[2], weight.shape[3], attrs, ctx);
  return TensorType{{data.shape[0], out_channels, oh, ow}, data.dtype};
}

Tensor conv2d_compute(const std::vector<Tensor>& in, const Attrs& attrs, const TensorType& out) {
  const Tensor &data = in[0], &weight = in[1];
  const ConvAttrs a(attrs);
  const auto &s = a.strides, &d = a.dilation, &p = a.padding;
  const int64_t groups = a.groups;
  int64_t group_in = weight.shape()[1], kh = weight.shape()[2], kw = weight.shape()[3];
  int64_t group_out = weight.shape()[0] / groups;
  // Only the rows and columns that some window reads.
  int64_t hp = (out.shape[2] - 1) * s[0] + d[0] * (kh - 1) + 1;
  int64_t wp = (out.shape[3] - 1) * s[1] + d[1] * (kw - 1) + 1;
  Tensor padded = pad_nchw("conv2d_pad", data, p[0], p[1], hp, wp, make_const(data.dtype(), 0.0));
  IterVar rc = reduce_axis(group_in, "rc"), ry = reduce_axis(kh, "ry"), rx = reduce_axis(kw, "rx");
  return compute("conv2d", out.shape, [&](const std::vector<PrimVar>& i) {
    // Output channel o belongs to group o / group_out, which reads input channels
    // [g * group_in, (g + 1) * group_in).
    PrimExpr c =
        groups == 1 ? PrimExpr(rc->var) : (i[1] / idx(group_out)) * idx(group_in) + rc->var;
    PrimExpr y = i[2] * idx(s[0]) + ry->var * idx(d[0]);
    PrimExpr x = i[3] * idx(s[1]) + rx->var * idx(d[1]);
    return sum(padded({i[0], c, y, x}) * weight({i[1], rc->var, ry->var, rx->var}), {rc, ry, rx});
  });
}

// ---------------------------------------------------------------- blocked conv2d

// nn.conv2d on activations in a blocked layout NCHW[c]c (AlterOpLayout): data
// [N, ceil(C/ci), H, W, ci], weight packed [ceil(CO/co), ceil(C/ci), KH, KW, ci, co] by
// nn.pack_conv_weight, output [N, ceil(CO/co), OH, OW, co]. A vector of co output channels
// then loads co contiguous weights and broadcasts one input value, at any image width.
// Attributes as nn.conv2d: groups 1, groups whose channels are whole blocks (each output
// block reads its group's input blocks), or one group per channel (depthwise: weight
// [ceil(C/c), 1, KH, KW, 1, c], a vector of c channels multiplies c contiguous inputs by c
// contiguous weights). Channels that a block does not divide are padded: the packed weight
// is zero for pad input and output channels, so pad input channels (whatever an epilogue
// left there, as long as it is finite) add nothing and pad output channels are zero.
Type pack_conv_weight_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 1, ctx);
  const TensorType& w = tensor_arg(args, 0, "the weight", ctx);
  check_rank(w, 4, "the weight (OIHW)", ctx);
  int64_t ci = attr_int(attrs, "in_block"), co = attr_int(attrs, "out_block");
  if (ci < 1 || co < 1)
    ctx.fail("in_block " + std::to_string(ci) + " and out_block " + std::to_string(co) +
             " must be >= 1");
  return TensorType{
      {(w.shape[0] + co - 1) / co, (w.shape[1] + ci - 1) / ci, w.shape[2], w.shape[3], ci, co},
      w.dtype};
}

Tensor pack_conv_weight_compute(const std::vector<Tensor>& in, const Attrs&,
                                const TensorType& out) {
  const Tensor& w = in[0];
  int64_t ci = out.shape[4], co = out.shape[5], wo = w.shape()[0], wi = w.shape()[1];
  return compute("packed_weight", out.shape, [&](const std::vector<PrimVar>& i) {
    PrimExpr o = i[0] * idx(co) + i[5], c = i[1] * idx(ci) + i[4];
    if (wo % co == 0 && wi % ci == 0) return w({o, c, i[2], i[3]});
    return select(logical_and(o < idx(wo), c < idx(wi)),
                  w({min(o, idx(wo - 1)), min(c, idx(wi - 1)), i[2], i[3]}),
                  make_const(w.dtype(), 0.0));
  });
}

Type conv2d_blocked_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 2, ctx);
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  const TensorType& weight = tensor_arg(args, 1, "weight", ctx);
  check_rank(data, 5, "data (NCHW[c]c)", ctx);
  check_rank(weight, 6, "the packed weight", ctx);
  check_float(data, "data", ctx);
  check_same_dtype(data, "data", weight, "the weight", ctx);
  int64_t groups = attr_int(attrs, "groups");
  // Depthwise (a weight packed with in_block 1): groups is the real channel count, padded up
  // to the data's blocks. Otherwise each of the groups takes whole blocks of the data.
  if (groups > 1 && weight.shape[4] == 1
          ? (groups + data.shape[4] - 1) / data.shape[4] != data.shape[1] ||
                weight.shape[0] != data.shape[1] || weight.shape[1] != 1 ||
                weight.shape[5] != data.shape[4]
          : groups < 1 || data.shape[1] != groups * weight.shape[1] ||
                weight.shape[0] % groups != 0 || data.shape[4] != weight.shape[4])
    ctx.fail("data " + to_string(data) + " does not match the packed weight " +
             ints_str(weight.shape) + " with groups=" + std::to_string(groups) +
             "; a blocked conv2d has groups whose channels are whole blocks, or one group per "
             "channel (depthwise), and its weight packed with the data's channel block");
  auto [oh, ow] = conv_out_hw(data, weight.shape[2], weight.shape[3], attrs, ctx);
  return TensorType{{data.shape[0], weight.shape[0], oh, ow, weight.shape[5]}, data.dtype};
}

Tensor conv2d_blocked_compute(const std::vector<Tensor>& in, const Attrs& attrs,
                              const TensorType& out) {
  const Tensor &data = in[0], &weight = in[1];
  const ConvAttrs a(attrs);
  const auto &s = a.strides, &d = a.dilation, &p = a.padding;
  int64_t kh = weight.shape()[2], kw = weight.shape()[3];
  int64_t hp = (out.shape[2] - 1) * s[0] + d[0] * (kh - 1) + 1;
  int64_t wp = (out.shape[3] - 1) * s[1] + d[1] * (kw - 1) + 1;
  Tensor padded = pad_nchw("conv2d_pad", data, p[0], p[1], hp, wp, make_const(data.dtype(), 0.0));
  IterVar rc = reduce_axis(weight.shape()[1], "rc"), ry = reduce_axis(kh, "ry"),
          rx = reduce_axis(kw, "rx"), rl = reduce_axis(weight.shape()[4], "rl");
  const bool depthwise = a.groups > 1 && weight.shape()[4] == 1;
  // A grouped conv's output block reads its group's input blocks.
  const int64_t out_blocks_per_group = out.shape[1] / a.groups;
  return compute("conv2d", out.shape, [&](const std::vector<PrimVar>& i) {
    PrimExpr y = i[2] * idx(s[0]) + ry->var * idx(d[0]);
    PrimExpr x = i[3] * idx(s[1]) + rx->var * idx(d[1]);
    if (depthwise)  // channel i[1] * c + i[4] reads only itself: vectors along the block
      return sum(
          padded({i[0], i[1], y, x, i[4]}) * weight({i[1], idx(0), ry->var, rx->var, idx(0), i[4]}),
          {ry, rx});
    PrimExpr block = a.groups == 1
                         ? PrimExpr(rc->var)
                         : i[1] / idx(out_blocks_per_group) * idx(weight.shape()[1]) + rc->var;
    return sum(padded({i[0], block, y, x, rl->var}) *
                   weight({i[1], rc->var, ry->var, rx->var, rl->var, i[4]}),
               {rc, ry, rx, rl});
  });
}

// ---------------------------------------------------------------- dense, matmul, bmm

// The data [..., K] and weight of a dense variant, checked: float data, one dtype, a weight
// of `rank` dimensions (`what` names its layout).
std::pair<const TensorType&, const TensorType&> dense_args(const std::vector<Type>& args,
                                                           int64_t rank, const char* what,
                                                           const TypeContext& ctx) {
  check_arity(args, 2, ctx);
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  const TensorType& weight = tensor_arg(args, 1, "weight", ctx);
  check_float(data, "data", ctx);
  check_same_dtype(data, "data", weight, "the weight", ctx);
  check_rank(weight, rank, what, ctx);
  if (data.ndim() < 1) ctx.fail("data must have at least 1 dimension, got " + to_string(data));
  return {data, weight};
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
    return sum(data(di) * weight({i.back(), k->var}), {k});
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
    return sum(data(di) * weight({n / idx(block), k->var, n % idx(block)}), {k});
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
    return sum(data(di) * weight({ko->var, i.back(), f->var}), {ko, f});
  });
}

// a [..., M, K] @ b [K, N] -> [..., M, N], or @ b [K] -> [..., M] (torch.matmul).
Type matmul_rel(const std::vector<Type>& args, Attrs&, const TypeContext& ctx) {
  check_arity(args, 2, ctx);
  const TensorType& a = tensor_arg(args, 0, "the first input", ctx);
  const TensorType& b = tensor_arg(args, 1, "the second input", ctx);
  check_float(a, "the first input", ctx);
  check_same_dtype(a, "the first input", b, "the second input", ctx);
  if (a.ndim() < 2) ctx.fail("the first input must be [..., M, K] but is " + to_string(a));
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
  check_arity(args, 2, ctx);
  const TensorType& a = tensor_arg(args, 0, "the first input", ctx);
  const TensorType& b = tensor_arg(args, 1, "the second input", ctx);
  check_float(a, "the first input", ctx);
  check_same_dtype(a, "the first input", b, "the second input", ctx);
  if (a.ndim() < 2) ctx.fail("the first input must be [..., M, K] but is " + to_string(a));
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

// ---------------------------------------------------------------- bias_add, batch_norm

// A [C] parameter applied along `axis` of data.
void check_channel_param(const TensorType& data, int64_t axis, const TensorType& p,
                         const std::string& what, const TypeContext& ctx) {
  check_same_dtype(data, "data", p, what, ctx);
  if (p.ndim() != 1 || p.shape[0] != data.shape[axis])
    ctx.fail(what + " is " + to_string(p) + " but data " + to_string(data) + " has " +
             std::to_string(data.shape[axis]) + " channels along axis " + std::to_string(axis) +
             "; it must be 1-D with one value per channel");
}

Type bias_add_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 2, ctx);
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  const TensorType& bias = tensor_arg(args, 1, "bias", ctx);
  if (data.dtype == DType::Bool) ctx.fail("data is " + to_string(data) + "; cast it to float32");
  int64_t axis = normalize_axis(attr_int(attrs, "axis"), data.ndim(), ctx);
  attrs = attrs.with("axis", axis);
  check_channel_param(data, axis, bias, "the bias", ctx);
  return data;
}

Tensor bias_add_compute(const std::vector<Tensor>& in, const Attrs& attrs, const TensorType& out) {
  const Tensor &data = in[0], &bias = in[1];
  int64_t axis = attr_int(attrs, "axis");
  return compute("bias_add", out.shape, [&](const std::vector<PrimVar>& i) {
    return data(as_exprs(i)) + bias({i[axis]});
  });
}

Type batch_norm_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 5, ctx);
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  check_float(data, "data", ctx);
  int64_t axis = normalize_axis(attr_int(attrs, "axis"), data.ndim(), ctx);
  double eps = attr_float(attrs, "epsilon");
  if (!(eps >= 0)) ctx.fail("epsilon = " + std::to_string(eps) + " must be >= 0");
  attrs = attrs.with("axis", axis).with("epsilon", eps);
  const char* names[] = {"gamma", "beta", "moving_mean", "moving_var"};
  for (size_t i = 1; i < 5; ++i)
    check_channel_param(data, axis, tensor_arg(args, i, names[i - 1], ctx), names[i - 1], ctx);
  return data;
}

// Inference form, in the data dtype: (x - mean) / sqrt(var + eps) * gamma + beta.
Tensor batch_norm_compute(const std::vector<Tensor>& in, const Attrs& attrs,
                          const TensorType& out) {
  const Tensor &data = in[0], &gamma = in[1], &beta = in[2], &mean = in[3], &var = in[4];
  int64_t axis = attr_int(attrs, "axis");
  PrimExpr eps = make_const(data.dtype(), attr_float(attrs, "epsilon"));
  return compute("batch_norm", out.shape, [&](const std::vector<PrimVar>& i) {
    std::vector<PrimExpr> c{i[axis]};
    return (data(as_exprs(i)) - mean(c)) / sqrt(var(c) + eps) * gamma(c) + beta(c);
  });
}

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

Type pool_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx,
              bool has_dilation) {
  check_arity(args, 1, ctx);
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  // NCHW, or NCHW[c]c (AlterOpLayout's blocked layout: the windows slide over H and W and
  // the channel block rides along).
  if (data.ndim() != 5) check_rank(data, 4, "data", ctx);
  check_float(data, "data", ctx);
  PoolParams p = pool_attrs(attrs, has_dilation, ctx);
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
  check_rank(data, 4, "data", ctx);
  check_float(data, "data", ctx);
  auto size = pair_attr(attrs, "output_size", 1, ctx);
  if (data.shape[2] == 0 || data.shape[3] == 0)
    ctx.fail("data " + to_string(data) + " has an empty spatial dimension");
  return TensorType{{data.shape[0], data.shape[1], size[0], size[1]}, data.dtype};
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
    PrimExpr v = data({i[0], i[1], y, x});
    return sum(select(inside, v, make_const(data.dtype(), 0.0)), {ry, rx});
  });
  return compute("adaptive_avg_pool2d", out.shape, [&](const std::vector<PrimVar>& i) {
    PrimExpr count =
        (end(i[2], h, oh) - start(i[2], h, oh)) * (end(i[3], w, ow) - start(i[3], w, ow));
    return total(as_exprs(i)) / cast(data.dtype(), count);
  });
}

// ---------------------------------------------------------------- softmax

Type softmax_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 1, ctx);
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  check_float(data, "data", ctx);
  if (data.ndim() == 0) ctx.fail("data must have at least 1 dimension, got " + to_string(data));
  attrs = attrs.with("axis", normalize_axis(attr_int(attrs, "axis"), data.ndim(), ctx));
  return data;
}

// Numerically stable like torch: max over the axis, exp(x - max), sum, divide. The
// reduced stages keep the axis with size 1. x - max is never positive, so its exp takes the
// short form (exp_nonpositive: terms under 2^-126 of the row's largest flush to 0).
Tensor softmax_compute(const std::vector<Tensor>& in, const Attrs& attrs, const TensorType& out) {
  const Tensor& x = in[0];
  size_t axis = static_cast<size_t>(attr_int(attrs, "axis"));
  std::vector<int64_t> reduced = out.shape;
  reduced[axis] = 1;
  auto at_axis = [&](const std::vector<PrimVar>& i, PrimExpr v) {
    std::vector<PrimExpr> r = as_exprs(i);
    r[axis] = std::move(v);
    return r;
  };
  IterVar k1 = reduce_axis(out.shape[axis], "k");
  Tensor mx = compute("softmax_max", reduced, [&](const std::vector<PrimVar>& i) {
    return max_reduce(x(at_axis(i, k1->var)), {k1});
  });
  Tensor e = compute("softmax_exp", out.shape, [&](const std::vector<PrimVar>& i) {
    return exp_nonpositive(x(as_exprs(i)) - mx(at_axis(i, idx(0))));
  });
  IterVar k2 = reduce_axis(out.shape[axis], "k");
  Tensor total = compute("softmax_sum", reduced, [&](const std::vector<PrimVar>& i) {
    return sum(e(at_axis(i, k2->var)), {k2});
  });
  return compute("softmax", out.shape, [&](const std::vector<PrimVar>& i) {
    return e(as_exprs(i)) / total(at_axis(i, idx(0)));
  });
}

Tensor log_softmax_compute(const std::vector<Tensor>& in, const Attrs& attrs,
                           const TensorType& out) {
  const Tensor& x = in[0];
  size_t axis = static_cast<size_t>(attr_int(attrs, "axis"));
  std::vector<int64_t> reduced = out.shape;
  reduced[axis] = 1;
  auto at_axis = [&](const std::vector<PrimVar>& i, PrimExpr v) {
    std::vector<PrimExpr> r = as_exprs(i);
    r[axis] = std::move(v);
    return r;
  };
  IterVar k1 = reduce_axis(out.shape[axis], "k");
  Tensor mx = compute("log_softmax_max", reduced, [&](const std::vector<PrimVar>& i) {
    return max_reduce(x(at_axis(i, k1->var)), {k1});
  });
  IterVar k2 = reduce_axis(out.shape[axis], "k");
  Tensor total = compute("log_softmax_sum", reduced, [&](const std::vector<PrimVar>& i) {
    return sum(exp_nonpositive(x(at_axis(i, k2->var)) - mx(at_axis(i, idx(0)))), {k2});
  });
  // torch's order: (x - max) - log(sum(exp(x - max))).
  return compute("log_softmax", out.shape, [&](const std::vector<PrimVar>& i) {
    return x(as_exprs(i)) - mx(at_axis(i, idx(0))) - log(total(at_axis(i, idx(0))));
  });
}

// ---------------------------------------------------------------- layer_norm

// Normalises over the trailing axes from `axis` on (torch's normalized_shape =
// data.shape[axis:]); gamma and beta have exactly that shape.
Type layer_norm_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 3, ctx);
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  check_float(data, "data", ctx);
  if (data.ndim() == 0) ctx.fail("data must have at least 1 dimension, got " + to_string(data));
  int64_t axis = normalize_axis(attr_int(attrs, "axis"), data.ndim(), ctx);
  double eps = attr_float(attrs, "epsilon");
  if (!(eps >= 0)) ctx.fail("epsilon = " + std::to_string(eps) + " must be >= 0");
  attrs = attrs.with("axis", axis).with("epsilon", eps);
  std::vector<int64_t> norm(data.shape.begin() + axis, data.shape.end());
  const char* names[] = {"gamma", "beta"};
  for (size_t i = 1; i < 3; ++i) {
    const TensorType& p = tensor_arg(args, i, names[i - 1], ctx);
    check_same_dtype(data, "data", p, names[i - 1], ctx);
    if (p.shape != norm)
      ctx.fail(std::string(names[i - 1]) + " is " + to_string(p) + " but must have shape " +
               ints_str(norm) + " (data " + to_string(data) + " normalised from axis " +
               std::to_string(axis) + " on)");
  }
  return data;
}

// Mean-variance normalisation over the trailing axes from `axis` on, in five stages in the
// data dtype: the shift s, the row's first element; the sum of the shifted data x - s; the
// correction c, the mean of d = (x - s) - sum / n; the biased variance, the mean of d^2;
// and the output d * rsqrt(var + eps) * gamma + beta - c * scale, where `affine` maps an
// output index to the gamma and beta values. Why the shift: the float32 sum of a constant
// row c is not n * c, so x - sum / n would be a few ulps of c that rsqrt(eps) scales up to
// an error of ~1e-3 where torch gives exactly beta. Shifted, a constant row sums to exactly
// 0, and a row of large offset and small spread (1000 + 1e-3 * noise) keeps its spread's
// digits (x - s is exact). Why the correction: sum / n is rounded at the scale of |x - s|,
// the spread, so without it every output of a row would be off by the same ~1 ulp of the
// spread; the sum of such a row against a long positive vector then grows with its length
// (BiT standardizes its conv weights this way, and its convs read ReLU outputs: 7x
// PyTorch's error on the model). c is summed from terms centred on zero, so d - c is
// centred to within rounding. The stages are named `name`_shift, `name`_sum, `name`_fix,
// `name`_var and `name`.
using Affine = std::function<std::pair<PrimExpr, PrimExpr>(const std::vector<PrimVar>& i)>;

Tensor mean_variance_norm(const std::string& name, const Tensor& x, size_t axis, double epsilon,
                          const TensorType& out, const Affine& affine) {
  std::vector<int64_t> lead(out.shape.begin(), out.shape.begin() + axis);
  std::vector<int64_t> norm(out.shape.begin() + axis, out.shape.end());
  PrimExpr n = make_const(x.dtype(), static_cast<double>(numel(norm)));
  PrimExpr eps = make_const(x.dtype(), epsilon);
  auto reduce_axes = [&]() {
    std::vector<IterVar> r;
    for (size_t d = 0; d < norm.size(); ++d)
      r.push_back(reduce_axis(norm[d], "r" + std::to_string(d)));
    return r;
  };
  // The shift: a one-element reduction, so that it is computed once per row into a local
  // (an inlined x(i, 0) would be recomputed, its producer's epilogue included, at every
  // element of all three stages).
  // An empty row has no first element (and no output): it is not shifted.
  const bool empty = numel(norm) == 0;
  IterVar r0 = reduce_axis(1, "first");
  Tensor shift = compute(name + "_shift", lead, [&](const std::vector<PrimVar>& i) {
    std::vector<PrimExpr> first = as_exprs(i);
    first.push_back(r0->var);
    first.resize(i.size() + norm.size(), make_const(DType::Int64, 0));
    return sum(empty ? make_const(x.dtype(), 0.0) : x(first), {r0});
  });
  // x at leading index `i` and normalised index `r`, minus the shift.
  auto shifted = [&](const std::vector<PrimExpr>& i, const std::vector<PrimExpr>& r) {
    std::vector<PrimExpr> xi = i;
    xi.insert(xi.end(), r.begin(), r.end());
    return x(xi) - shift(i);
  };
  auto vars = [](const std::vector<IterVar>& r) {
    std::vector<PrimExpr> v;
    for (auto& a : r) v.push_back(a->var);
    return v;
  };
  std::vector<IterVar> r1 = reduce_axes();
  Tensor total = compute(name + "_sum", lead, [&](const std::vector<PrimVar>& i) {
    return sum(shifted(as_exprs(i), vars(r1)), r1);
  });
  // x - s minus the shifted mean: what the correction and the variance sum and the output
  // scales, the same rounding in all three.
  auto centred = [&](const std::vector<PrimExpr>& i, const std::vector<PrimExpr>& r) {
    return shifted(i, r) - total(i) / n;
  };
  std::vector<IterVar> r2 = reduce_axes(), r3 = reduce_axes();
  Tensor fix = compute(name + "_fix", lead, [&](const std::vector<PrimVar>& i) {
    return sum(centred(as_exprs(i), vars(r2)), r2);
  });
  Tensor sq = compute(name + "_var", lead, [&](const std::vector<PrimVar>& i) {
    PrimExpr d = centred(as_exprs(i), vars(r3));
    return sum(d * d, r3);
  });
  return compute(name, out.shape, [&](const std::vector<PrimVar>& i) {
    std::vector<PrimExpr> li(i.begin(), i.begin() + axis), ni(i.begin() + axis, i.end());
    // (d - c) * rstd * g + b as one FMA of d: the scale rstd * g and the offset
    // b - c * scale are the row's own where g and b are (instance norm's per channel),
    // computed once per row (an instance norm -> softshrink over 64 x 56 x 56 was
    // compute-bound on AVX2 with the offset per element).
    auto [g, b] = affine(i);
    PrimExpr scale = rsqrt(sq(li) / n + eps) * g;
    return fma(centred(li, ni), scale, b - fix(li) / n * scale);
  });
}

Tensor layer_norm_compute(const std::vector<Tensor>& in, const Attrs& attrs,
                          const TensorType& out) {
  const Tensor &gamma = in[1], &beta = in[2];
  size_t axis = static_cast<size_t>(attr_int(attrs, "axis"));
  return mean_variance_norm("layer_norm", in[0], axis, attr_float(attrs, "epsilon"), out,
                            [&](const std::vector<PrimVar>& i) {
                              std::vector<PrimExpr> ni(i.begin() + axis, i.end());
                              return std::make_pair(gamma(ni), beta(ni));
                            });
}

// ---------------------------------------------------------------- instance_norm

// torch's instance_norm with instance statistics: data [N, C, spatial...] is normalised
// over the spatial axes of each (n, c), then scaled by gamma [C] and shifted by beta [C].
Type instance_norm_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 3, ctx);
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  check_float(data, "data", ctx);
  if (data.ndim() < 3)
    ctx.fail("data must be [N, C, spatial...] with at least one spatial axis, got " +
             to_string(data) + "; add the batch axis with expand_dims");
  double eps = attr_float(attrs, "epsilon");
  if (!(eps >= 0)) ctx.fail("epsilon = " + std::to_string(eps) + " must be >= 0");
  attrs = attrs.with("epsilon", eps);
  const char* names[] = {"gamma", "beta"};
  for (size_t i = 1; i < 3; ++i) {
    const TensorType& p = tensor_arg(args, i, names[i - 1], ctx);
    check_same_dtype(data, "data", p, names[i - 1], ctx);
    if (p.shape != std::vector<int64_t>{data.shape[1]})
      ctx.fail(std::string(names[i - 1]) + " is " + to_string(p) + " but must have shape [" +
               std::to_string(data.shape[1]) + "] (one value per channel of data " +
               to_string(data) + ")");
  }
  return data;
}

Tensor instance_norm_compute(const std::vector<Tensor>& in, const Attrs& attrs,
                             const TensorType& out) {
  const Tensor &gamma = in[1], &beta = in[2];
  return mean_variance_norm(
      "instance_norm", in[0], 2, attr_float(attrs, "epsilon"), out,
      [&](const std::vector<PrimVar>& i) { return std::make_pair(gamma({i[1]}), beta({i[1]})); });
}

// ---------------------------------------------------------------- pad

// pad_width is flat [before_0, after_0, before_1, after_1, ...], one pair per axis;
// negative widths crop (F.pad). Only constant padding.
Type pad_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 1, ctx);
  const TensorType& x = tensor_arg(args, 0, "data", ctx);
  std::string mode = attr_str(attrs, "pad_mode");
  if (mode != "constant")
    ctx.fail("pad_mode '" + mode + "' is not supported; only 'constant' padding is");
  std::vector<int64_t> width = attr_ints(attrs, "pad_width");
  if (static_cast<int64_t>(width.size()) != 2 * x.ndim())
    ctx.fail("pad_width " + ints_str(width) + " has " + std::to_string(width.size()) +
             " values but data " + to_string(x) + " needs " + std::to_string(2 * x.ndim()) +
             " (a before and an after width for each axis)");
  std::vector<int64_t> shape = x.shape;
  for (int64_t d = 0; d < x.ndim(); ++d) {
    shape[d] += width[2 * d] + width[2 * d + 1];
    if (shape[d] < 0)
      ctx.fail("pad_width " + ints_str(width) + " crops axis " + std::to_string(d) + " of " +
               to_string(x) + " to a negative size " + std::to_string(shape[d]));
    if (x.shape[d] == 0 && shape[d] > 0)
      ctx.fail("axis " + std::to_string(d) + " of " + to_string(x) +
               " is empty; padding an empty axis is not supported");
  }
  attrs = attrs.with("pad_width", width)
              .with("pad_value", attr_float(attrs, "pad_value"))
              .with("pad_mode", mode);
  return TensorType{shape, x.dtype};
}

// Select evaluates both sides, so the load reads clamped (always valid) indices; only the
// sides that are padded get a guard.
Tensor pad_compute(const std::vector<Tensor>& in, const Attrs& attrs, const TensorType& out) {
  const Tensor& x = in[0];
  auto width = attr_ints(attrs, "pad_width");
  PrimExpr fill = make_const(x.dtype(), attr_float(attrs, "pad_value"));
  return compute("pad", out.shape, [&](const std::vector<PrimVar>& i) {
    PrimExpr inside = make_const(DType::Bool, 1);
    std::vector<PrimExpr> xi;
    for (size_t d = 0; d < i.size(); ++d) {
      int64_t before = width[2 * d], size = x.shape()[d];
      PrimExpr y = i[d] - idx(before);
      if (before > 0) {
        inside = logical_and(inside, y >= idx(0));
        y = max(y, idx(0));
      }
      if (before + size < out.shape[d]) {
        inside = logical_and(inside, y < idx(size));
        y = min(y, idx(size - 1));
      }
      xi.push_back(y);
    }
    return select(inside, x(xi), fill);
  });
}

// ---------------------------------------------------------------- registration

// conv2d's fusion trait: the anchors one kernel computes after it (schedule_two_anchors in
// cpu_template_two_anchors.cc), a pooling of its output, or a depthwise conv followed by a
// pointwise (1x1, stride 1, unpadded, ungrouped) conv.
std::string conv2d_two_anchor(const CallNode& first, const CallNode& second) {
  const std::string& op = second.op->name;
  if (op == "nn.max_pool2d" || op == "nn.avg_pool2d") return "conv+pooling";
  if (op != "nn.conv2d") return "";
  const auto& w1 = first.args[1]->type.tensor().shape;
  const auto& w2 = second.args[1]->type.tensor().shape;
  const ConvAttrs a1(first.attrs), a2(second.attrs);
  bool depthwise = w1[1] == 1 && a1.groups > 1;
  bool pointwise =
      w2[2] == 1 && w2[3] == 1 && a2.groups == 1 && a2.strides == std::vector<int64_t>{1, 1} &&
      std::all_of(a2.padding.begin(), a2.padding.end(), [](int64_t p) { return p == 0; });
  return depthwise && pointwise ? "depthwise conv -> pointwise conv" : "";
}

Op conv2d_op() {
  Op op{"nn.conv2d", 2, OpPattern::OutEWiseFusable, conv2d_rel, conv2d_compute};
  op.two_anchor = conv2d_two_anchor;
  op.attrs = kConvAttrs;
  return op;
}

// A weight-layout variant keeps its family's name in fusion patterns ("conv2d+activation").
Op family(Op op, const std::string& name) {
  op.family = name;
  return op;
}

[[maybe_unused]] const Op* kConv2d = register_op(conv2d_op());
[[maybe_unused]] const Op* kConv2dBlocked =
    register_op(with_attrs(family({"nn.conv2d_blocked", 2, OpPattern::OutEWiseFusable,
                                   conv2d_blocked_rel, conv2d_blocked_compute},
                                  "conv2d"),
                           kConvAttrs));
[[maybe_unused]] const Op* kPackConvWeight = register_op(
    with_attrs({"nn.pack_conv_weight", 1, OpPattern::Injective, pack_conv_weight_rel,
                pack_conv_weight_compute},
               {required_attr("in_block", AttrKind::Int, "input channels per block"),
                required_attr("out_block", AttrKind::Int, "output channels per block")}));
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
[[maybe_unused]] const Op* kBiasAdd =
    register_op(with_attrs({"nn.bias_add", 2, OpPattern::Broadcast, bias_add_rel, bias_add_compute},
                           {int_attr("axis", 1, "the channel axis of data")}));
[[maybe_unused]] const Op* kBatchNorm = register_op(
    with_attrs({"nn.batch_norm", 5, OpPattern::Broadcast, batch_norm_rel, batch_norm_compute},
               {int_attr("axis", 1, "the channel axis of data"),
                float_attr("epsilon", 1e-5, "added to the variance")}));
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
const AttrSpec kSoftmaxAxis = int_attr("axis", -1, "the axis the probabilities sum along");
[[maybe_unused]] const Op* kSoftmax = register_op(
    with_attrs({"nn.softmax", 1, OpPattern::Opaque, softmax_rel, softmax_compute}, {kSoftmaxAxis}));
[[maybe_unused]] const Op* kLogSoftmax = register_op(with_attrs(
    {"nn.log_softmax", 1, OpPattern::Opaque, softmax_rel, log_softmax_compute}, {kSoftmaxAxis}));
// Normalisations are reductions to FuseOps: elementwise epilogues fuse into them, and the
// default schedule computes the statistics at the output's row loop.
[[maybe_unused]] const Op* kLayerNorm = register_op(
    with_attrs({"nn.layer_norm", 3, OpPattern::CommReduce, layer_norm_rel, layer_norm_compute},
               {int_attr("axis", -1, "normalise over the axes from this one on"),
                float_attr("epsilon", 1e-5, "added to the variance")}));
[[maybe_unused]] const Op* kInstanceNorm = register_op(with_attrs(
    {"nn.instance_norm", 3, OpPattern::CommReduce, instance_norm_rel, instance_norm_compute},
    {float_attr("epsilon", 1e-5, "added to the variance")}));
[[maybe_unused]] const Op* kPad = register_op(
    with_attrs({"nn.pad", 1, OpPattern::Injective, pad_rel, pad_compute},
               {required_attr("pad_width", AttrKind::Ints,
                              "[before_0, after_0, before_1, after_1, ...], one pair per axis"),
                float_attr("pad_value", 0.0, "the fill value"),
                str_attr("pad_mode", "constant", "only \"constant\"")}));

}  // namespace
}  // namespace ember::ir
