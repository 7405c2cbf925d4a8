// Convolution (NCHW layout, OIHW weights): nn.conv2d, nn.conv2d_blocked on the blocked
// layout NCHW[c]c and nn.pack_conv_weight, which packs its weight; the int8 and bfloat16
// products' convs over words of channels (nn.conv2d_u8s8, nn.conv2d_bf16 and their blocked
// forms). Shapes and numerics follow torch.nn.functional.conv2d.
#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "nn_util.h"
#include "word_dense.h"

namespace ember::ir {
namespace {

using namespace ops;

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

// The data a kh x kw window reads, padded with `fill` (the rows and columns some window
// reads: dims 2 and 3).
Tensor padded_for_windows(const Tensor& data, const ConvAttrs& a, const TensorType& out, int64_t kh,
                          int64_t kw, PrimExpr fill) {
  const auto &s = a.strides, &d = a.dilation, &p = a.padding;
  int64_t hp = (out.shape[2] - 1) * s[0] + d[0] * (kh - 1) + 1;
  int64_t wp = (out.shape[3] - 1) * s[1] + d[1] * (kw - 1) + 1;
  return pad_nchw("conv2d_pad", data, p[0], p[1], hp, wp, std::move(fill));
}

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
  const auto &s = a.strides, &d = a.dilation;
  const int64_t groups = a.groups;
  int64_t group_in = weight.shape()[1], kh = weight.shape()[2], kw = weight.shape()[3];
  int64_t group_out = weight.shape()[0] / groups;
  // Only the rows and columns that some window reads.
  Tensor padded = padded_for_windows(data, a, out, kh, kw, make_const(data.dtype(), 0.0));
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

// ---------------------------------------------------------------- word convs

// Convs of products over 32-bit words of consecutive channels (issue 45): int8 products
// (nn.conv2d_u8s8: four channels' bytes a word, uint8 activations and int8 weights, each
// step one dot_u8s8, vpdpbusd on VNNI CPUs, into exact int32 sums) and bfloat16 pairs
// (nn.conv2d_bf16: two channels' bfloat16 values a word, each step one dot_bf16, vdpbf16ps
// on AVX512_BF16 CPUs, into float32 sums). One relation and compute rule serve both kinds.
struct WordConv {
  const char* name;   // the compute's name; the NCHW op is nn.<name>
  Intrinsic dot;      // acc + the products of one word pair
  DType acc;          // the sums' type
  DType element;      // the blocked form's activations (one channel each)
  int64_t per_word;   // channels per word
  bool pad_attr;      // whether padding reads attr pad_word (else the word 0)
  const char* words;  // what the words hold and how to pack them, for errors
  PrimExpr (*word)(const std::function<PrimExpr(int64_t)>& element);  // the word of elements
};

const WordConv kU8S8{"conv2d_u8s8",
                     Intrinsic::DotU8S8,
                     DType::Int32,
                     DType::UInt8,
                     4,
                     true,
                     "int32 words of four channels' bytes; pack them with nn.pack_bytes4 along "
                     "axis 1",
                     [](const std::function<PrimExpr(int64_t)>& byte) {
                       return word_of_bytes([&](int64_t j) { return cast(DType::Int32, byte(j)); });
                     }};
const WordConv kBF16{
    "conv2d_bf16",
    Intrinsic::DotBF16,
    DType::Float32,
    DType::BFloat16,
    2,
    false,
    "int32 words of two channels' bfloat16 values; pack them with "
    "nn.pack_bf16_pairs along axis 1",
    [](const std::function<PrimExpr(int64_t)>& value) { return word_of_bf16_pair(value); }};

int64_t pad_word(const WordConv& kind, const Attrs& attrs) {
  return kind.pad_attr ? attr_int(attrs, "pad_word") : 0;
}

// The uint8 value that padding reads: the low byte of `pad_word` (the zero point).
PrimExpr pad_byte(const Attrs& attrs) {
  return make_const(DType::UInt8, static_cast<double>(attr_int(attrs, "pad_word") & 255));
}

// The depthwise form of the int8 convs (groups = channels; MobileNetV2's depthwise convs
// between int8 ones): uint8 data bytes by one int8 weight per channel and tap, NCHW (data
// [N, C, H, W], weight [C, 1, KH, KW]) or blocked (data [N, ceil(C/c), H, W, c], weight
// [ceil(C/c), 1, KH, KW, 1, c], nn.pack_conv_weight with in_block 1, as int8 or widened to
// float32 once at build time); padding reads the low byte of `pad_word`. Output: each
// channel's window sum of products, exact, as float32, which holds it exactly (a product is
// at most 255 * 128 in magnitude, so a window of up to kU8S8DepthwiseMaxTaps taps sums below
// 2^24). Each byte is widened once, as the padded rows are computed, and each tap is then
// one FMA per vector, where int32 sums would take a widening and a vpmulld per tap and two
// conversions per output (the float epilogue).
Type u8s8_depthwise_rel(const TensorType& data, const TensorType& weight, Attrs& attrs,
                        bool blocked, const TypeContext& ctx) {
  check_rank(data, blocked ? 5 : 4, blocked ? "data (NCHW[c]c bytes)" : "data (NCHW bytes)", ctx);
  check_rank(weight, blocked ? 6 : 4,
             blocked ? "the packed depthwise weight" : "the depthwise weight (C, 1, KH, KW)", ctx);
  const bool widened = blocked && weight.dtype == DType::Float32;
  if (data.dtype != DType::UInt8 || (weight.dtype != DType::Int8 && !widened))
    ctx.fail(
        "a depthwise int8 conv takes uint8 data and an int8 weight (blocked: or its values "
        "widened to float32), not " +
        to_string(data) + " and " + to_string(weight));
  const int64_t groups = attr_int(attrs, "groups");
  const int64_t block = blocked ? data.shape[4] : 1;
  const bool fits = blocked ? (groups + block - 1) / block == data.shape[1] &&
                                  weight.shape[0] == data.shape[1] && weight.shape[4] == 1 &&
                                  weight.shape[5] == block
                            : groups == data.shape[1] && weight.shape[0] == groups;
  if (!fits || weight.shape[1] != 1)
    ctx.fail("data " + to_string(data) + " and the weight " + ints_str(weight.shape) +
             " with groups=" + std::to_string(groups) +
             " are not a depthwise conv: it takes groups = 1 over words of four channels, or "
             "one group per channel with one weight per channel and tap");
  if (weight.shape[2] * weight.shape[3] > kU8S8DepthwiseMaxTaps)
    ctx.fail("a depthwise int8 conv sums at most " + std::to_string(kU8S8DepthwiseMaxTaps) +
             " taps exactly, not " + std::to_string(weight.shape[2] * weight.shape[3]));
  auto [oh, ow] = conv_out_hw(data, weight.shape[2], weight.shape[3], attrs, ctx);
  std::vector<int64_t> shape = {data.shape[0], data.shape[1], oh, ow};
  if (blocked) shape.push_back(block);
  return TensorType{shape, DType::Float32};
}

Tensor u8s8_depthwise_compute(const Tensor& data, const Tensor& weight, const Attrs& attrs,
                              const TensorType& out) {
  const ConvAttrs a(attrs);
  const auto &s = a.strides, &d = a.dilation;
  const int64_t kh = weight.shape()[2], kw = weight.shape()[3];
  const bool blocked = out.ndim() == 5;
  Tensor widened = compute("conv2d_u8s8_widened", data.shape(), [&](const std::vector<PrimVar>& i) {
    return cast(DType::Float32, data(as_exprs(i)));
  });
  Tensor padded =
      padded_for_windows(widened, a, out, kh, kw, cast(DType::Float32, pad_byte(attrs)));
  IterVar ry = reduce_axis(kh, "ry"), rx = reduce_axis(kw, "rx");
  return compute("conv2d_u8s8", out.shape, [&](const std::vector<PrimVar>& i) {
    std::vector<PrimExpr> at = {i[0], i[1], i[2] * idx(s[0]) + ry->var * idx(d[0]),
                                i[3] * idx(s[1]) + rx->var * idx(d[1])};
    std::vector<PrimExpr> w = {i[1], idx(0), ry->var, rx->var};
    if (blocked) {  // channel i[1] * c + i[4]: vectors along the block
      at.push_back(i[4]);
      w.insert(w.end(), {idx(0), i[4]});
    }
    return sum(padded(at) * cast(DType::Float32, weight(w)), {ry, rx});
  });
}

// data [N, C', H, W] and weight [O, C', KH, KW] of words along the channels -> [N, O, OH, OW]
// sums. Padding reads the word pad_word: for int8 products the activations' zero point in
// each byte, so that a padded tap adds what a tap of the value 0 would (zero point times
// the weight), the same at every position. Groups 1 (int8: or one group per channel, the
// depthwise form above); strides and dilation as nn.conv2d.
Type word_conv_rel(const WordConv& kind, const std::vector<Type>& args, Attrs& attrs,
                   const TypeContext& ctx) {
  check_arity(args, 2, ctx);
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  const TensorType& weight = tensor_arg(args, 1, "weight", ctx);
  if (kind.dot == Intrinsic::DotU8S8) check_activation_bits(attrs, ctx);
  if (attr_int(attrs, "groups") != 1) {  // only the int8 conv has a depthwise form
    if (kind.dot != Intrinsic::DotU8S8)
      ctx.fail("nn." + std::string(kind.name) + " takes groups = 1 only");
    return u8s8_depthwise_rel(data, weight, attrs, false, ctx);
  }
  check_rank(data, 4, "data (N, C', H, W words)", ctx);
  check_rank(weight, 4, "the weight (O, C', KH, KW words)", ctx);
  for (const TensorType* t : {&data, &weight})
    if (t->dtype != DType::Int32) ctx.fail(to_string(*t) + " is not " + kind.words);
  if (data.shape[1] != weight.shape[1])
    ctx.fail("data has " + std::to_string(data.shape[1]) + " channel words but the weight " +
             std::to_string(weight.shape[1]));
  auto [oh, ow] = conv_out_hw(data, weight.shape[2], weight.shape[3], attrs, ctx);
  return TensorType{{data.shape[0], weight.shape[0], oh, ow}, kind.acc};
}

Tensor word_conv_compute(const WordConv& kind, const std::vector<Tensor>& in, const Attrs& attrs,
                         const TensorType& out) {
  const Tensor &data = in[0], &weight = in[1];
  const ConvAttrs a(attrs);
  if (a.groups != 1) return u8s8_depthwise_compute(data, weight, attrs, out);
  const auto &s = a.strides, &d = a.dilation;
  int64_t words = weight.shape()[1], kh = weight.shape()[2], kw = weight.shape()[3];
  Tensor padded = padded_for_windows(
      data, a, out, kh, kw, make_const(DType::Int32, static_cast<double>(pad_word(kind, attrs))));
  IterVar rc = reduce_axis(words, "rc"), ry = reduce_axis(kh, "ry"), rx = reduce_axis(kw, "rx");
  return compute(kind.name, out.shape, [&](const std::vector<PrimVar>& i) {
    PrimExpr y = i[2] * idx(s[0]) + ry->var * idx(d[0]);
    PrimExpr x = i[3] * idx(s[1]) + rx->var * idx(d[1]);
    return sum(prim_call(word_dot(kind.dot, attrs),
                         {make_const(kind.acc, 0), padded({i[0], rc->var, y, x}),
                          weight({i[1], rc->var, ry->var, rx->var})}),
               {rc, ry, rx});
  });
}

// A word conv on the blocked layout (AlterOpLayout): data the NCHW[c]c elements
// [N, ceil(C/c), H, W, c] (c a multiple of the channels per word: uint8 bytes, bfloat16
// values), read a word at a time (one 32-bit load: no packing kernel), weight
// [ceil(O/o), ceil(C/c), KH, KW, c/per_word, o] (nn.pack_conv_weight of the OIHW words),
// output [N, ceil(O/o), OH, OW, o] sums. A vector of o output channels then multiplies o
// contiguous weight words by one broadcast data word (one vpdpbusd or vdpbf16ps), at any
// image width, where the NCHW form's vectors run along the rows. Padding reads the low byte
// of pad_word (int8; bfloat16 pads with zeros); pad channels' weights are zero, so pad
// channels add nothing. Groups 1, or for int8 one group per channel (the depthwise form
// above: groups the real channel count, padded up to the data's blocks, whose pad channels
// sum to 0).
Type word_conv_blocked_rel(const WordConv& kind, const std::vector<Type>& args, Attrs& attrs,
                           const TypeContext& ctx) {
  check_arity(args, 2, ctx);
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  const TensorType& weight = tensor_arg(args, 1, "weight", ctx);
  const std::string op = "nn." + std::string(kind.name) + "_blocked";
  if (kind.dot == Intrinsic::DotU8S8) check_activation_bits(attrs, ctx);
  if (attr_int(attrs, "groups") != 1) {
    if (kind.dot != Intrinsic::DotU8S8) ctx.fail(op + " takes groups = 1 only");
    return u8s8_depthwise_rel(data, weight, attrs, true, ctx);
  }
  check_rank(data, 5, "data (NCHW[c]c)", ctx);
  check_rank(weight, 6, "the packed weight words", ctx);
  if (data.dtype != kind.element)
    ctx.fail("data " + to_string(data) + " is not " + dtype_name(kind.element));
  if (weight.dtype != DType::Int32) ctx.fail(to_string(weight) + " is not " + kind.words);
  if (data.shape[1] != weight.shape[1] || data.shape[4] != kind.per_word * weight.shape[4])
    ctx.fail("data " + to_string(data) + " does not match the packed weight " +
             ints_str(weight.shape) + ": both need the same channel blocks of words");
  auto [oh, ow] = conv_out_hw(data, weight.shape[2], weight.shape[3], attrs, ctx);
  return TensorType{{data.shape[0], weight.shape[0], oh, ow, weight.shape[5]}, kind.acc};
}

Tensor word_conv_blocked_compute(const WordConv& kind, const std::vector<Tensor>& in,
                                 const Attrs& attrs, const TensorType& out) {
  const Tensor &data = in[0], &weight = in[1];
  const ConvAttrs a(attrs);
  if (a.groups != 1) return u8s8_depthwise_compute(data, weight, attrs, out);
  const auto &s = a.strides, &d = a.dilation;
  int64_t kh = weight.shape()[2], kw = weight.shape()[3];
  const auto pad = static_cast<double>(pad_word(kind, attrs) & 255);
  Tensor padded = padded_for_windows(data, a, out, kh, kw, make_const(kind.element, pad));
  IterVar rc = reduce_axis(weight.shape()[1], "rc"), ry = reduce_axis(kh, "ry"),
          rx = reduce_axis(kw, "rx"), rl = reduce_axis(weight.shape()[4], "rl");
  return compute(kind.name, out.shape, [&](const std::vector<PrimVar>& i) {
    PrimExpr y = i[2] * idx(s[0]) + ry->var * idx(d[0]);
    PrimExpr x = i[3] * idx(s[1]) + rx->var * idx(d[1]);
    // Consecutive channels as one word (LLVM loads them as one).
    PrimExpr word = kind.word([&](int64_t j) {
      return padded({i[0], rc->var, y, x, rl->var * idx(kind.per_word) + idx(j)});
    });
    return sum(prim_call(word_dot(kind.dot, attrs),
                         {make_const(kind.acc, 0), word,
                          weight({i[1], rc->var, ry->var, rx->var, rl->var, i[4]})}),
               {rc, ry, rx, rl});
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
  const auto &s = a.strides, &d = a.dilation;
  int64_t kh = weight.shape()[2], kw = weight.shape()[3];
  Tensor padded = padded_for_windows(data, a, out, kh, kw, make_const(data.dtype(), 0.0));
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

[[maybe_unused]] const Op* kConv2d = register_op(conv2d_op());
[[maybe_unused]] const Op* kConv2dBlocked =
    register_op(with_attrs(family({"nn.conv2d_blocked", 2, OpPattern::OutEWiseFusable,
                                   conv2d_blocked_rel, conv2d_blocked_compute},
                                  "conv2d"),
                           kConvAttrs));
// A word conv of `kind`, NCHW and blocked: nn.conv2d's attributes (and the word that
// padding reads).
bool register_word_convs(const WordConv& kind) {
  std::vector<AttrSpec> attrs = kConvAttrs;
  if (kind.pad_attr) {  // the int8 products
    attrs.push_back(int_attr("pad_word", 0, "the int32 word a padded position reads"));
    attrs.push_back(activation_bits_attr());
  }
  const std::string name = "nn." + std::string(kind.name);
  for (const bool blocked : {false, true}) {
    TypeRelation rel = [&kind, blocked](const std::vector<Type>& args, Attrs& a,
                                        const TypeContext& ctx) {
      return blocked ? word_conv_blocked_rel(kind, args, a, ctx)
                     : word_conv_rel(kind, args, a, ctx);
    };
    ComputeRule rule = [&kind, blocked](const std::vector<Tensor>& in, const Attrs& a,
                                        const TensorType& out) {
      return blocked ? word_conv_blocked_compute(kind, in, a, out)
                     : word_conv_compute(kind, in, a, out);
    };
    register_op(with_attrs(
        family({blocked ? name + "_blocked" : name, 2, OpPattern::OutEWiseFusable, rel, rule},
               "conv2d"),
        attrs));
  }
  return true;
}
[[maybe_unused]] const bool kWordConvs = register_word_convs(kU8S8) && register_word_convs(kBF16);
[[maybe_unused]] const Op* kPackConvWeight = register_op(
    with_attrs({"nn.pack_conv_weight", 1, OpPattern::Injective, pack_conv_weight_rel,
                pack_conv_weight_compute},
               {required_attr("in_block", AttrKind::Int, "input channels per block"),
                required_attr("out_block", AttrKind::Int, "output channels per block")}));

}  // namespace
}  // namespace ember::ir
