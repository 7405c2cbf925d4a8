// AlterOpLayout: see alter_op_layout.h.
#include "ember/passes/alter_op_layout.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "ember/ir/op.h"
#include "ember/passes/fuse_ops.h"

namespace ember::passes {

using namespace ir;

namespace {

// nn.dense_u8s8 (nn.dense_bf16, nn.dense_int4) by a constant weight [N, K/4] ([N, K/2],
// [N, K/8]) of int32 words, input `at`, packed in panels as a float dense's: each k step of
// its register tile then loads a vector of contiguous words.
Expr pack_word_dense(const CallNode* c, const std::vector<Expr>& in, const MachineModel& machine,
                     size_t at = 1) {
  if (!as<ConstantNode>(in[at])) return nullptr;
  const int64_t n = in[at]->type.tensor().shape[0];
  int64_t block = vector_lanes_for(machine, n, DType::Int32);
  if (n % block != 0 && n <= 4 * machine.lanes(DType::Int32)) block = n;
  std::vector<Expr> args = in;
  args[at] = call("nn.pack_dense_weight", {in[at]}, Attrs().with("block", block), in[at]->name);
  return call(c->op->name + "_packed", args, c->attrs.with("units", n), c->name);
}

// nn.dense, and nn.matmul by a constant [K, N] matrix (x @ W in a hand-written module), with
// the weight packed in panels: the matmul's weight rows are N apart, so every k step of its
// register tile would touch a new cache line and page (calibration: dense weight panels).
Expr pack_dense(const CallNode* c, const std::vector<Expr>& in, const MachineModel& machine) {
  if (c->op && c->op->name == "nn.dense_int4") return pack_word_dense(c, in, machine, 2);
  if (!c->op || in.size() != 2) return nullptr;
  // nn.dense_bf16's weight words (two bfloat16 along K) pack as the int8 words do.
  if (c->op->name == "nn.dense_u8s8" || c->op->name == "nn.dense_bf16")
    return pack_word_dense(c, in, machine);
  const bool matmul = c->op->name == "nn.matmul";
  if (!matmul && c->op->name != "nn.dense") return nullptr;
  auto* w = as<ConstantNode>(in[1]);
  if (!w || w->type.is_tuple) return nullptr;
  const TensorType& wt = w->type.tensor();
  // Lanes and blocks count output (float) values: an 8-bit weight packs in the same panels.
  const DType t = c->type.tensor().dtype;
  if (wt.ndim() != 2 || !is_float(t)) return nullptr;
  if (matmul && in[0]->type.tensor().ndim() < 2) return nullptr;
  Expr weight = matmul ? call("transpose", {in[1]},
                              Attrs().with("axes", std::vector<int64_t>{1, 0}), in[1]->name)
                       : in[1];
  int64_t n = wt.shape[matmul ? 1 : 0];
  // A GEMV (one row of activations) whose outputs no vector divides (a classifier's 10 or
  // 1000 logits on AVX-512) keeps its weights as [N, K] rows: each output is then a dot
  // product along K, vectorized over the contiguous row, where panels of N would run
  // narrow or partial vectors (where a vector divides the outputs, the panels are as fast
  // or faster; calibration: GEMV weight rows).
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < in[0]->type.tensor().ndim(); ++d)
    rows *= in[0]->type.tensor().shape[d];
  const int64_t lanes = machine.lanes(t), k = wt.shape[matmul ? 0 : 1];
  if (rows == 1 && n % lanes != 0) {
    // Where one row alone falls behind the L2 (256 bits), a block of rows reads its vectors
    // together; packed in lanes, a short row's outputs (one tile of the schedule's) are one
    // stream, where [N, K] rows read 5 at once fall behind the prefetchers. Longer rows
    // keep [N, K]: tiles of 8 rows would each read a 256-byte piece of every 3.2 KB
    // (calibration: GEMV lanes).
    if (!gemv_row_keeps_pace(machine, t) && k % lanes == 0 && n <= 2 * lanes) {
      Expr packed =
          call("nn.pack_dense_lanes", {weight}, Attrs().with("lanes", lanes), in[1]->name);
      return call("nn.dense_lanes", {in[0], packed}, Attrs(), c->name);
    }
    return matmul ? call("nn.dense", {in[0], weight}, Attrs(), c->name) : nullptr;
  }
  int64_t block = vector_lanes_for(machine, n, t);
  // A short row that no vector divides is one vector of its own length in the register tile
  // (choose_register_tile): one panel of all of it, so that vector is one contiguous load
  // rather than a gather across two panels (calibration: short-row panel).
  if (n % block != 0 && n <= 4 * machine.lanes(t)) block = n;
  Expr packed = call("nn.pack_dense_weight", {weight}, Attrs().with("block", block), in[1]->name);
  return call("nn.dense_packed", {in[0], packed}, c->attrs.with("units", n), c->name);
}

// nn.grouped_matmul by a constant weight [G, K, N] (a mixture-of-experts layer's experts),
// packed in panels [G, N / B, K, B] of the kernel's column tile (grouped_matmul_tile_vectors;
// fewer vectors where N takes no such tile): each k step of a
// register tile then reads B contiguous columns and a panel is one stream, where the plain
// weight's rows are N apart, every one in a new page (Mixtral's gate_up, N = 7168: 28 KB
// apart). A row that takes no whole vectors keeps the plain layout (its last tile shifts).
Expr pack_grouped(const CallNode* c, const std::vector<Expr>& in, const MachineModel& machine) {
  if (!c->op || c->op->name != "nn.grouped_matmul" || in.size() != 3) return nullptr;
  if (c->attrs.get_int("weight_block", 0) != 0) return nullptr;
  auto* w = as<ConstantNode>(in[1]);
  if (!w || w->type.is_tuple) return nullptr;
  const TensorType& wt = w->type.tensor();
  if (wt.ndim() != 3 || !is_float(wt.dtype)) return nullptr;
  const int64_t groups = wt.shape[0], k = wt.shape[1], n = wt.shape[2];
  const int64_t lanes = machine.lanes(wt.dtype);
  if (n == 0) return nullptr;
  int64_t block = 0;
  for (int64_t v = grouped_matmul_tile_vectors(machine); v >= 1 && block == 0; --v)
    if (n % (v * lanes) == 0) block = v * lanes;
  if (block == 0) return nullptr;
  using V = std::vector<int64_t>;
  Expr panels = call("reshape", {in[1]}, Attrs().with("newshape", V{groups, k, n / block, block}));
  panels = call("transpose", {panels}, Attrs().with("axes", V{0, 2, 1, 3}), in[1]->name);
  return call("nn.grouped_matmul", {in[0], panels, in[2]}, c->attrs.with("weight_block", block),
              c->name);
}

// The blocked value a from_blocked call converts back, or null.
Expr blocked_source(const Expr& e) {
  auto* c = as<CallNode>(e);
  return c && c->op && c->op->name == "from_blocked" ? c->args[0] : nullptr;
}

int64_t block_of(const Expr& blocked) { return blocked->type.tensor().shape[4]; }

// Whether the blocked value of a plain tensor with `channels` has pad channels.
bool is_padded(const Expr& blocked, int64_t channels) {
  const auto& s = blocked->type.tensor().shape;
  return s[1] * s[4] != channels;
}

// `blocked` back in NCHW with its first `channels` channels (the rest are padding).
Expr from_blocked(Expr blocked, int64_t channels, const std::string& name) {
  Attrs attrs;
  if (is_padded(blocked, channels)) attrs = attrs.with("channels", channels);
  return call("from_blocked", {std::move(blocked)}, attrs, name);
}

int64_t channels_of(const CallNode* c) { return c->type.tensor().shape[1]; }

// `x` [N, C, H, W] in blocks of `block` channels: the value a from_blocked came from when
// it has that block, else a to_blocked of x, one per (x, block) however many readers ask.
class Blocker {
 public:
  Expr operator()(const Expr& x, int64_t block) {
    Expr b = blocked_source(x);
    if (b && block_of(b) == block) return b;
    Expr& memo = memo_[{x.get(), block}];
    if (!memo) memo = call("to_blocked", {x}, Attrs().with("block", block), x->name);
    return memo;
  }

 private:
  std::map<std::pair<const ExprNode*, int64_t>, Expr> memo_;
};

// Whether a conv has one group per input channel and one output channel per group.
bool is_depthwise(const CallNode* c) {
  const int64_t groups = c->attrs.get_int("groups", 1);
  return groups > 1 && groups == c->args[0]->type.tensor().shape[1] &&
         c->args[1]->type.tensor().shape[0] == groups;
}

// The channel blocks (in, out) of a conv that can run blocked, or {0, 0}: a constant weight,
// and channels that channel_block_for gives a block (padded where it does not divide them).
// A grouped conv (not depthwise) needs blocks that divide each group's channels, so that no
// block straddles two groups (RegNet's and ResNeXt's groups of 64 or 32 channels do); none
// of them is padded.
std::pair<int64_t, int64_t> conv_blocks(const CallNode* c, const MachineModel& machine) {
  if (!c->op || c->op->name != "nn.conv2d" || c->args.size() != 2) return {0, 0};
  const Expr &data = c->args[0], &weight = c->args[1];
  if (!as<ConstantNode>(weight) || data->type.is_tuple) return {0, 0};
  const TensorType& x = data->type.tensor();
  const TensorType& w = weight->type.tensor();
  if (x.ndim() != 4 || w.ndim() != 4 || !is_float(x.dtype)) return {0, 0};
  const int64_t groups = c->attrs.get_int("groups", 1);
  const bool depthwise = is_depthwise(c);
  int64_t ci = channel_block_for(machine, x.shape[1], x.dtype);
  int64_t co = channel_block_for(machine, w.shape[0], w.dtype);
  if (groups != 1 && !depthwise) {
    // The channels' own block where it divides each group, else the group's block (wav2vec2's
    // positional conv: groups of 48 of 768 channels, blocks of 32 at 512 bits; 48 fits).
    const int64_t in_group = x.shape[1] / groups, out_group = w.shape[0] / groups;
    auto fits = [](int64_t block, int64_t group) { return block > 1 && group % block == 0; };
    if (!fits(ci, in_group)) ci = channel_block_for(machine, in_group, x.dtype);
    if (!fits(co, out_group)) co = channel_block_for(machine, out_group, w.dtype);
    if (fits(ci, in_group) && fits(co, out_group)) return {ci, co};
    return {0, 0};
  }
  // Fewer channels than a vector (the RGB stem): one block of all of them, so the input
  // is read pixel by pixel (NHWC) and broadcast into the output-channel vectors.
  if (!depthwise && x.shape[1] < machine.lanes(x.dtype)) ci = x.shape[1];
  if (!ci || !co) return {0, 0};
  return {ci, co};
}

// A strided 1x1 conv (ResNet's downsample) reads one input pixel in s*s: its register tiles
// would drag the unread pixels through the caches with every output-channel block. The
// pixels it reads are taken once by a 1x1 pooling of stride s, and the conv runs at stride 1
// on the compact result. Null where the conv is not a plain strided 1x1.
Expr subsample_for_pointwise(const CallNode* c, const Expr& x) {
  const auto& w = c->args[1]->type.tensor().shape;
  auto strides = c->attrs.get_ints("strides", {1, 1});
  auto padding = c->attrs.get_ints("padding", {0, 0, 0, 0});
  bool unit_window = w[2] == 1 && w[3] == 1 && c->attrs.get_int("groups", 1) == 1;
  bool no_pad = std::all_of(padding.begin(), padding.end(), [](int64_t p) { return p == 0; });
  if (!unit_window || !no_pad || strides.size() != 2 || (strides[0] == 1 && strides[1] == 1))
    return nullptr;
  Attrs a = Attrs()
                .with("pool_size", std::vector<int64_t>{1, 1})
                .with("strides", strides)
                .with("padding", std::vector<int64_t>{0, 0, 0, 0});
  return call("nn.max_pool2d", {x}, a, c->name + " subsample");
}

// `op`, a blocked conv, of x and the packed weight with c's attributes, back in NCHW; a
// strided 1x1 reads x subsampled (subsample_for_pointwise).
Expr blocked_conv_call(const std::string& op, const CallNode* c, Expr x, const Expr& packed) {
  Attrs attrs = c->attrs;
  if (Expr sub = subsample_for_pointwise(c, x)) {
    x = sub;
    attrs = attrs.with("strides", std::vector<int64_t>{1, 1});
  }
  return from_blocked(call(op, {x, packed}, attrs, c->name), channels_of(c), c->name);
}

Expr block_conv(const CallNode* c, const std::vector<Expr>& in, const MachineModel& machine,
                Blocker& to_blocked) {
  auto [ci, co] = conv_blocks(c, machine);
  if (!ci) return nullptr;
  // A depthwise weight [C, 1, KH, KW] packs as [C/c, 1, KH, KW, 1, c].
  const bool depthwise = is_depthwise(c);
  Expr packed = call("nn.pack_conv_weight", {in[1]},
                     Attrs().with("in_block", depthwise ? int64_t{1} : ci).with("out_block", co),
                     in[1]->name);
  return blocked_conv_call("nn.conv2d_blocked", c, to_blocked(in[0], ci), packed);
}

// The convs over 32-bit words of channels that the products passes write (Int8Products,
// BF16Products): the op, the op packing its activations' channels into words, the channels
// per word, and its blocked form.
struct WordConvForm {
  const char* op;
  const char* pack;
  int64_t per_word;
  const char* blocked;
};
constexpr WordConvForm kWordConvs[] = {
    {"nn.conv2d_u8s8", "nn.pack_bytes4", 4, "nn.conv2d_u8s8_blocked"},
    {"nn.conv2d_bf16", "nn.pack_bf16_pairs", 2, "nn.conv2d_bf16_blocked"}};

const WordConvForm* word_conv_form(const CallNode* c) {
  for (const WordConvForm& form : kWordConvs)
    if (c->op && c->op->name == form.op) return &form;
  return nullptr;
}

// The input channel block of a blocked word conv (whole words of `per_word` channels), or 0:
// the 32-bit lanes' block, or fewer channels than a vector (the RGB stem) as one block of
// them padded to a word, read pixel by pixel as a float stem is.
int64_t word_conv_in_block(const MachineModel& machine, int64_t channels, int64_t per_word) {
  if (channels < machine.lanes(DType::Int32))
    return (channels + per_word - 1) / per_word * per_word;
  const int64_t block = channel_block_for(machine, channels, DType::Int32);
  return block % per_word == 0 ? block : 0;
}

// The activations whose channels a word conv's words pack (pack(X, axis=1)), or null.
Expr packed_channels(const Expr& words, const WordConvForm& form) {
  const CallNode* pack = op_call(words, form.pack);
  return pack && pack->attrs.get_int("axis", -1) == 1 ? pack->args[0] : nullptr;
}

// A word conv (nn.conv2d_u8s8, nn.conv2d_bf16) of packed channels by constant weight words,
// on the blocked layout: it reads the elements (bytes, bfloat16 values) blocked in 32-bit
// lanes' channel blocks (the block of the conv before it, whose epilogue then stays blocked
// in between), a word at a time, so no packing kernel runs. Wherever the channel block takes
// whole words: the NCHW form's vectors run along the rows, which narrow images leave mostly
// empty (an int8 7 x 7 stage ran at a fifth of the float32 blocked conv's speed on Zen 4).
// The int8 depthwise form (uint8 bytes by one int8 weight per channel and tap) runs blocked
// in the int32 lanes' block of its channels, which the int8 convs around it (MobileNetV2's
// expand and project) take too: their quantizing epilogues stay blocked in between. Its
// weight packs as a float depthwise conv's, widened to float32 (whole numbers) once here
// rather than per tile in the kernel.
Expr block_word_conv(const CallNode* c, const std::vector<Expr>& in, const MachineModel& machine,
                     Blocker& to_blocked) {
  const WordConvForm* form = word_conv_form(c);
  if (!form || !as<ConstantNode>(in[1])) return nullptr;
  if (is_depthwise(c)) {  // only int8 convs are depthwise (Int8Products)
    const int64_t block = channel_block_for(machine, channels_of(c), DType::Int32);
    if (!block) return nullptr;
    Expr widened = call("cast", {in[1]}, Attrs().with("dtype", std::string("float32")));
    Expr packed = call("nn.pack_conv_weight", {widened},
                       Attrs().with("in_block", int64_t{1}).with("out_block", block), in[1]->name);
    return blocked_conv_call(form->blocked, c, to_blocked(in[0], block), packed);
  }
  const Expr x = packed_channels(in[0], *form);
  if (!x) return nullptr;
  const int64_t ci = word_conv_in_block(machine, x->type.tensor().shape[1], form->per_word);
  const int64_t co = channel_block_for(machine, channels_of(c), DType::Int32);
  if (!ci || !co) return nullptr;
  Expr packed =
      call("nn.pack_conv_weight", {in[1]},
           Attrs().with("in_block", ci / form->per_word).with("out_block", co), in[1]->name);
  return blocked_conv_call(form->blocked, c, to_blocked(x, ci), packed);
}

// The other operand of an elementwise op on a blocked value, blocked too: a tensor of the
// output's own shape [N, C, H, W] (a residual), one value per image and channel [N, C, 1, 1]
// (a squeeze-and-excitation scale, itself computed blocked: the activation it scales then
// stays blocked), a per-channel constant [C], [C, 1, 1] or [1, C, 1, 1] as [1, C/c, 1, 1, c],
// or a scalar-shaped constant as it is. Null otherwise, and for a value blocked in another
// block (no conversion between blocks).
Expr blocked_operand(const Expr& e, const TensorType& out, int64_t block, Blocker& to_blocked) {
  if (e->type.is_tuple) return nullptr;
  if (Expr src = blocked_source(e); src && block_of(src) != block) return nullptr;
  const int64_t channels = out.shape[1];
  const auto& shape = e->type.tensor().shape;
  if (e->type.tensor() == out ||
      (shape == std::vector<int64_t>{out.shape[0], channels, 1, 1} && !as<ConstantNode>(e)))
    return to_blocked(e, block);
  if (!as<ConstantNode>(e)) return nullptr;
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (numel == 1) return e;
  bool per_channel =
      (shape.size() == 1 && shape[0] == channels) ||
      (shape.size() == 3 && shape[0] == channels && shape[1] == 1 && shape[2] == 1) ||
      (shape.size() == 4 && shape[0] == 1 && shape[1] == channels && shape[2] == 1 &&
       shape[3] == 1);
  if (!per_channel) return nullptr;
  Expr r = call("reshape", {e}, Attrs().with("newshape", std::vector<int64_t>{1, channels, 1, 1}),
                e->name);
  return to_blocked(r, block);
}

// Pooling keeps the blocked layout: its windows slide over H and W, the block rides along
// (a global average pooling too: a squeeze-and-excitation's squeeze, a classifier's).
bool is_pooling(const CallNode* c) {
  return c->op && (c->op->name == "nn.max_pool2d" || c->op->name == "nn.avg_pool2d" ||
                   c->op->name == "nn.adaptive_avg_pool2d");
}

Expr through_pooling(const CallNode* c, const std::vector<Expr>& in) {
  Expr a = is_pooling(c) ? blocked_source(in[0]) : nullptr;
  return a ? from_blocked(call(c->op, {a}, c->attrs, c->name), channels_of(c), c->name) : nullptr;
}

// Ops that keep the values of pad channels finite (they grow at most linearly) and so may
// run on them: a blocked conv multiplies pad input channels by zero weights, and 0 * inf is
// NaN. Others (divide by a zero-padded constant, log, rsqrt, exp, ...) read the plain
// layout when the blocked value is padded. Rounding keeps a value finite, and so does a
// cast to or from an integer type (integers have no infinity, and float32 holds every
// int64 finitely): a quantize's round and cast to uint8 and a dequantize's cast back keep
// an int8 conv's padded channels blocked (MobileNetV2's 24 in blocks of 16).
bool keeps_pad_finite(const CallNode* c) {
  static const std::set<std::string> ops = {"add",     "subtract",     "multiply",       "maximum",
                                            "minimum", "nn.bias_add",  "negative",       "abs",
                                            "clip",    "nn.relu",      "round",          "floor",
                                            "ceil",    "trunc",        "nn.leaky_relu",  "nn.gelu",
                                            "nn.silu", "nn.hardswish", "nn.hardsigmoid", "sigmoid",
                                            "tanh",    "nn.elu",       "nn.selu",        "nn.celu",
                                            "nn.mish", "nn.softplus"};
  // Every cast: to or from an integer type (no infinity there), or between float types of
  // one range (a bfloat16 model's rounding between its convs).
  if (c->op->name == "cast") return true;
  return ops.count(c->op->name) > 0;
}

// Elementwise ops keep the blocked layout: op(from_blocked(a), ...) = from_blocked(op(a, ...)).
Expr through_elementwise(const CallNode* c, const std::vector<Expr>& in, Blocker& to_blocked) {
  static const std::set<std::string> binary = {"add",    "subtract", "multiply",
                                               "divide", "maximum",  "minimum"};
  if (c->type.is_tuple || c->type.tensor().ndim() != 4) return nullptr;
  const int64_t channels = channels_of(c);
  auto allowed = [&](const Expr& blocked) {
    return !is_padded(blocked, channels) || keeps_pad_finite(c);
  };
  if (c->op->pattern == OpPattern::ElemWise && in.size() == 1) {
    Expr a = blocked_source(in[0]);
    if (!a || !allowed(a)) return nullptr;
    return from_blocked(call(c->op, {a}, c->attrs, c->name), channels, c->name);
  }
  // nn.bias_add along the channels is an add of a per-channel [C] operand.
  const bool bias = c->op->name == "nn.bias_add" && in.size() == 2 &&
                    (c->attrs.get_int("axis", 1) == 1 || c->attrs.get_int("axis", 1) == -3);
  if (!bias && (!binary.count(c->op->name) || in.size() != 2)) return nullptr;
  const TensorType& out = c->type.tensor();
  Expr a = blocked_source(in[0]), b = blocked_source(in[1]);
  if (a && b && a->type == b->type) {
    if (in[0]->type.tensor() != out) return nullptr;
  } else if (a && in[0]->type.tensor() == out) {
    b = blocked_operand(in[1], out, block_of(a), to_blocked);
  } else if (b && in[1]->type.tensor() == out) {
    a = blocked_operand(in[0], out, block_of(b), to_blocked);
  } else {
    return nullptr;
  }
  if (!a || !b || !allowed(a)) return nullptr;
  Expr y = bias ? call("add", {a, b}, {}, c->name) : call(c->op, {a, b}, c->attrs, c->name);
  return from_blocked(y, channels, c->name);
}

constexpr double kLoneConvMacsPerElement = 128;
// NCHW must be estimated this much faster than blocked for an island to keep it.
constexpr double kPlainMargin = 1.1;

// A conv's multiply-adds: each output element's window over its input channels.
double conv_macs(const CallNode* c) {
  double macs = 1;
  for (int64_t d : c->type.tensor().shape) macs *= static_cast<double>(d);
  const auto& w = c->args[1]->type.tensor().shape;
  for (size_t i = 1; i < w.size(); ++i) macs *= static_cast<double>(w[i]);
  return macs;
}

// A conv's multiply-adds per element of its input and output.
double macs_per_converted_element(const CallNode* c) {
  double in = 1, out = 1;
  for (int64_t d : c->args[0]->type.tensor().shape) in *= static_cast<double>(d);
  for (int64_t d : c->type.tensor().shape) out *= static_cast<double>(d);
  return conv_macs(c) / (in + out);
}

// Estimated share of the FMA peak of a conv's register tiles in NCHW (output channels x
// vectors along its rows) and blocked (pixels x its output-channel block, times the share of
// the blocked channels that are not padding). 0 in NCHW for a strided or depthwise conv.
double plain_efficiency(const CallNode* c, const MachineModel& m) {
  const TensorType& y = c->type.tensor();
  const bool unit_stride = c->attrs.get_ints("strides", {1, 1}) == std::vector<int64_t>{1, 1};
  if (!unit_stride || c->attrs.get_int("groups", 1) != 1) return 0;
  return choose_register_tile(m, y.shape[1], y.shape[3], y.dtype, true, false, 0, true).efficiency;
}

double blocked_efficiency(const CallNode* c, const MachineModel& m) {
  auto [ci, co] = conv_blocks(c, m);
  const TensorType& y = c->type.tensor();
  const int64_t channels_in = c->args[0]->type.tensor().shape[1], channels = y.shape[1];
  auto useful = [](int64_t n, int64_t b) {
    return static_cast<double>(n) / static_cast<double>((n + b - 1) / b * b);
  };
  const int64_t h = y.shape[2], w = y.shape[3];
  double tile = std::max(choose_register_tile(m, w, co, y.dtype).efficiency,
                         choose_register_tile(m, h * w, co, y.dtype).efficiency);
  return tile * useful(channels, co) * useful(channels_in, ci);
}

// Whether the convs of an island (convs that would share the blocked layout) run faster in
// NCHW: estimated by their multiply-adds over each layout's tile efficiency, depthwise convs
// (memory-bound) left out. 24 channels pad to 32 on AVX-512, where a 16 -> 24 3x3 conv over
// rows of 16 pixels runs faster in NCHW, whose vectors its rows fill (calibration: NCHW
// islands).
bool island_runs_plain(const std::vector<const CallNode*>& island, const MachineModel& m) {
  double plain = 0, blocked = 0;
  for (const CallNode* c : island) {
    if (c->attrs.get_int("groups", 1) != 1) continue;
    double p = plain_efficiency(c, m), b = blocked_efficiency(c, m);
    if (p <= 0 || b <= 0) return false;
    plain += conv_macs(c) / p;
    blocked += conv_macs(c) / b;
  }
  return plain > 0 && plain * kPlainMargin < blocked;
}

// Whether `c` packs the channels of a word conv that runs blocked (block_word_conv): its
// input is then blocked in the same channel block as a float conv's of as many channels.
bool feeds_blocked_word_conv(const CallNode* c,
                             const std::map<const ExprNode*, std::vector<const CallNode*>>& readers,
                             const MachineModel& machine) {
  auto it = readers.find(c);
  if (it == readers.end()) return false;
  for (const CallNode* r : it->second) {
    const WordConvForm* form = word_conv_form(r);
    if (form && r->args[0].get() == c && packed_channels(r->args[0], *form) &&
        as<ConstantNode>(r->args[1]) &&
        blocks_word_conv(machine, c->args[0]->type.tensor().shape[1], channels_of(r),
                         form->per_word))
      return true;
  }
  return false;
}

// The convs to run blocked: those that can (conv_blocks) and that reach another such conv
// through elementwise ops and poolings (a chain, a residual block, a stem and its max
// pooling). A lone conv keeps NCHW when converting its input and output, two passes over
// memory, would cost about what blocking saves; one with at least kLoneConvMacsPerElement
// multiply-adds per element converted runs blocked (a lone 1x1 conv 2048 -> 512 at 7x7,
// whose 7-pixel rows make 7-lane vectors in NCHW; calibration: lone convs). A depthwise ->
// pointwise pair runs as two blocked kernels rather than FuseOps' NCHW two-anchor kernel,
// which runs MobileNetV2's 28- and 14-pixel rows under lane masks (calibration: depthwise
// and pointwise pairs).
std::set<const ExprNode*> convs_to_block(const Function& f, const MachineModel& machine) {
  std::map<const ExprNode*, std::vector<const CallNode*>> readers;
  for (auto& e : post_order(f->body))
    if (auto* c = as<CallNode>(e))
      for (auto& a : inputs_of(e)) readers[a.get()].push_back(c);
  auto elementwise = [](const CallNode* c) {
    return c->op &&
           (c->op->pattern == OpPattern::ElemWise || c->op->pattern == OpPattern::Broadcast);
  };
  std::set<const ExprNode*> out;
  std::vector<const CallNode*> convs;
  for (auto& e : post_order(f->body))
    if (auto* c = as<CallNode>(e); c && conv_blocks(c, machine).first) convs.push_back(c);
  // Islands: convs joined through the chains below (union-find on their index).
  std::map<const ExprNode*, size_t> index;
  for (size_t i = 0; i < convs.size(); ++i) index[convs[i]] = i;
  std::vector<size_t> parent(convs.size());
  for (size_t i = 0; i < parent.size(); ++i) parent[i] = i;
  auto root = [&](size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  };
  for (const CallNode* first : convs) {
    if (macs_per_converted_element(first) >= kLoneConvMacsPerElement) out.insert(first);
    std::vector<const ExprNode*> todo = {first};
    std::set<const ExprNode*> seen;
    while (!todo.empty()) {
      const ExprNode* at = todo.back();
      todo.pop_back();
      for (const CallNode* r : readers[at]) {
        if (!seen.insert(r).second) continue;
        if (conv_blocks(r, machine).first) {
          out.insert(first);
          out.insert(r);
          parent[root(index[first])] = root(index[r]);
        } else if (feeds_blocked_word_conv(r, readers, machine)) {
          out.insert(first);  // a float depthwise conv between int8 or bfloat16 convs
        } else if (elementwise(r) || is_pooling(r)) {
          todo.push_back(r);
        }
      }
    }
  }
  std::map<size_t, std::vector<const CallNode*>> islands;
  for (const CallNode* c : convs)
    if (out.count(c)) islands[root(index[c])].push_back(c);
  for (auto& [r, island] : islands)
    if (island_runs_plain(island, machine))
      for (const CallNode* c : island) out.erase(c);
  return out;
}

}  // namespace

bool blocks_word_conv(const MachineModel& machine, int64_t channels, int64_t out_channels,
                      int64_t per_word, bool depthwise) {
  const int64_t in_block = depthwise ? channel_block_for(machine, channels, DType::Int32)
                                     : word_conv_in_block(machine, channels, per_word);
  return in_block && channel_block_for(machine, out_channels, DType::Int32);
}

Function alter_op_layout(const Function& f, const MachineModel& machine) {
  Blocker to_blocked;
  const std::set<const ExprNode*> blocked = convs_to_block(f, machine);
  return rewrite(f, [&](const Expr& e, const std::vector<Expr>& in) -> Expr {
    auto* c = as<CallNode>(e);
    if (!c || !c->op) return nullptr;
    if (Expr r = pack_dense(c, in, machine)) return r;
    if (Expr r = pack_grouped(c, in, machine)) return r;
    if (blocked.count(c))
      if (Expr r = block_conv(c, in, machine, to_blocked)) return r;
    if (Expr r = block_word_conv(c, in, machine, to_blocked)) return r;
    if (Expr r = through_pooling(c, in)) return r;
    return through_elementwise(c, in, to_blocked);
  });
}

}  // namespace ember::passes
