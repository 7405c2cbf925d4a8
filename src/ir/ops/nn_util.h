#pragma once
// Helpers shared by the NCHW neural-network ops (nn_conv.cc, nn_pool.cc, nn_norm.cc, nn.cc):
// window attributes and output sizes, per-channel parameter checks, and the padded input a
// window reads. Internal to src/ir/ops.
#include <string>
#include <vector>

#include "ember/support/checked_math.h"
#include "op_util.h"

namespace ember::ir::ops {

// ---------------------------------------------------------------- relation helpers

// A (h, w) attribute given as 1 or 2 values, each >= min_value; written back as 2 values.
inline std::vector<int64_t> pair_attr(Attrs& attrs, const std::string& key, int64_t min_value,
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
inline std::vector<int64_t> padding_attr(Attrs& attrs, const TypeContext& ctx) {
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
inline int64_t window_out_size(int64_t size, int64_t pad_begin, int64_t pad_end, int64_t kernel,
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

// A [C] parameter applied along `axis` of data.
inline void check_channel_param(const TensorType& data, int64_t axis, const TensorType& p,
                                const std::string& what, const TypeContext& ctx) {
  check_same_dtype(data, "data", p, what, ctx);
  if (p.ndim() != 1 || p.shape[0] != data.shape[axis])
    ctx.fail(what + " is " + to_string(p) + " but data " + to_string(data) + " has " +
             std::to_string(data.shape[axis]) + " channels along axis " + std::to_string(axis) +
             "; it must be 1-D with one value per channel");
}

// ---------------------------------------------------------------- compute helpers

// data [N, C, H, W, ...] placed at (top, left) in a [N, C, hp, wp, ...] tensor filled with
// `fill` (the trailing axes of a blocked layout pass through). Returns data itself when
// nothing is padded. Select evaluates both sides, so the guarded load reads clamped (always
// valid) indices.
inline Tensor pad_nchw(const std::string& name, const Tensor& data, int64_t top, int64_t left,
                       int64_t hp, int64_t wp, PrimExpr fill) {
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

}  // namespace ember::ir::ops
