// Int8Products: see int8_products.h.
#include "ember/passes/int8_products.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ember/ir/op.h"
#include "ember/passes/alter_op_layout.h"

namespace ember::passes {

using namespace ir;

namespace {

// `e` without the reshapes and casts around it.
Expr peel(Expr e) {
  while (auto* c = as<CallNode>(e)) {
    if (!c->op || (c->op->name != "reshape" && c->op->name != "cast")) break;
    e = c->args[0];
  }
  return e;
}

// The 8-bit tensor `e` widens to float32 (cast(Q)), or null.
Expr widened(const Expr& e, DType from) {
  auto* c = op_call(e, "cast");
  if (!c || e->type.tensor().dtype != DType::Float32) return nullptr;
  return c->args[0]->type.tensor().dtype == from ? c->args[0] : nullptr;
}

struct Activations {
  Expr q;        // uint8 [..., K]
  int64_t zero;  // the zero point
  double scale;
};

// The values `e` can hold, [lo, hi], from how it was made (else all numbers): a clip's range
// (a quantize clamps to [quant_min, quant_max]), through casts that keep it (one to an
// integer type out of its range wraps: that type's whole range), reshapes, transposes, max
// pools and concatenations of such, and constants.
std::pair<double, double> value_range(const Expr& e) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (auto* c = as<ConstantNode>(e)) {
    std::pair<double, double> r{kInf, -kInf};
    for (int64_t i = 0; i < c->value.numel(); ++i)
      r = {std::min(r.first, c->value.element(i)), std::max(r.second, c->value.element(i))};
    return r;
  }
  auto* c = as<CallNode>(e);
  if (!c || !c->op) return {-kInf, kInf};
  const std::string& op = c->op->name;
  if (op == "clip") {
    auto [lo, hi] = value_range(c->args[0]);
    return {std::max(lo, c->attrs.get_float("a_min", -kInf)),
            std::min(hi, c->attrs.get_float("a_max", kInf))};
  }
  if (op == "cast") {
    const DType to = c->type.tensor().dtype;
    auto r = value_range(c->args[0]);
    if (!is_int(to)) return r;
    const auto lo = static_cast<double>(int_min(to)), hi = static_cast<double>(int_max(to));
    return r.first >= lo && r.second <= hi ? r : std::pair<double, double>{lo, hi};
  }
  if (op == "concatenate") {
    std::pair<double, double> r{kInf, -kInf};
    for (const Expr& a : c->args) {
      auto [lo, hi] = value_range(a);
      r = {std::min(r.first, lo), std::max(r.second, hi)};
    }
    return r;
  }
  for (const char* keeps : {"reshape", "transpose", "nn.max_pool2d", "expand_dims", "squeeze"})
    if (op == keeps) return value_range(c->args[0]);
  return {-kInf, kInf};
}

// Whether every byte of the uint8 activations (and the zero point that padding reads) is
// below 128: the products' steps are then dot_u7s8 (activation_bits 7).
bool seven_bits(const Activations& x) {
  auto [lo, hi] = value_range(x.q);
  return x.zero >= 0 && x.zero < 128 && lo >= 0 && hi < 128;
}

// (cast(Q) - zx) * sx with numbers zx (a whole one) and sx, or cast(Q) * sx (SimplifyExpr
// erases a zero point of 0).
std::optional<Activations> dequantized_activations(const Expr& e) {
  auto* mul = op_call(e, "multiply");
  auto scale = mul ? scalar_constant(mul->args[1]) : std::nullopt;
  if (!scale) return std::nullopt;
  if (Expr q = widened(mul->args[0], DType::UInt8)) return Activations{q, 0, *scale};
  auto* sub = op_call(mul->args[0], "subtract");
  Expr q = sub ? widened(sub->args[0], DType::UInt8) : nullptr;
  auto zero = q ? scalar_constant(sub->args[1]) : std::nullopt;
  if (!zero || *zero != std::floor(*zero)) return std::nullopt;
  return Activations{q, static_cast<int64_t>(*zero), *scale};
}

struct Weights {
  Expr w;      // a constant int8 [N, K] (dense) or [O, C, KH, KW] (conv)
  Expr scale;  // [N, 1] or [O, 1, 1, 1]
};

// Whether `e` is a constant (behind reshapes and casts) of zeros only.
bool zeros(const Expr& e) {
  auto* c = as<ConstantNode>(peel(e));
  if (!c) return false;
  for (int64_t i = 0; i < c->value.numel(); ++i)
    if (c->value.element(i) != 0) return false;
  return true;
}

// (cast(W) - zw) * sw or cast(W) * sw, with W a constant int8 of `rank` dimensions, zw
// zeros, sw one value per output channel (the first axis), shaped to broadcast.
std::optional<Weights> dequantized_weights(const Expr& e, size_t rank) {
  auto* mul = op_call(e, "multiply");
  if (!mul) return std::nullopt;
  Expr centered = mul->args[0];
  if (auto* sub = op_call(centered, "subtract")) {
    if (!zeros(sub->args[1])) return std::nullopt;
    centered = sub->args[0];
  }
  Expr w = widened(centered, DType::Int8);
  if (!w || !as<ConstantNode>(w) || w->type.tensor().ndim() != rank) return std::nullopt;
  std::vector<int64_t> per_channel(rank, 1);
  per_channel[0] = w->type.tensor().shape[0];
  if (mul->args[1]->type.tensor().shape != per_channel) return std::nullopt;
  return Weights{w, mul->args[1]};
}

Expr scalar(DType t, double v) {
  runtime::NDArray a = runtime::NDArray::empty({}, t);
  if (t == DType::Int32)
    *a.data_as<int32_t>() = static_cast<int32_t>(v);
  else
    *a.data_as<float>() = static_cast<float>(v);
  return constant(a);
}

// The float result of an exact product `acc` of `x` and `w` (int32 sums, or float32 ones
// holding whole numbers exactly: a depthwise conv's): (acc - zx * the sum of each output
// channel's weights) * (sx * sw), per channel shaped as `channel` (the output's channel
// axis and the axes after it).
Expr scaled(Expr acc, const Activations& x, const Weights& w, const std::vector<int64_t>& channel,
            const std::string& name) {
  const size_t rank = w.w->type.tensor().ndim();
  const DType sums_type = acc->type.tensor().dtype;
  if (x.zero != 0) {
    std::vector<int64_t> axes;
    for (size_t d = 1; d < rank; ++d) axes.push_back(static_cast<int64_t>(d));
    Expr sums = call(
        "sum", {call("cast", {w.w}, Attrs().with("dtype", std::string(dtype_name(sums_type))))},
        Attrs({{"axis", axes}, {"keepdims", int64_t{0}}}), name);
    sums = call("reshape", {sums}, Attrs().with("newshape", channel), name);
    Expr correction = call("multiply", {sums, scalar(sums_type, double(x.zero))}, {}, name);
    acc = call("subtract", {acc, correction}, {}, name);
  }
  Expr scale = call("multiply",
                    {call("reshape", {w.scale}, Attrs().with("newshape", channel)),
                     scalar(DType::Float32, x.scale)},
                    {}, name);
  if (sums_type != DType::Float32)
    acc = call("cast", {acc}, Attrs().with("dtype", std::string("float32")), name);
  return call("multiply", {acc, scale}, Attrs(), name);
}

// The int8 product's attributes: activation_bits 7 where x's bytes are below 128. Null
// where neither the target's int8_dot nor (for such bytes) its int8_dot_7bit takes it.
std::optional<Attrs> product_attrs(const Activations& x, bool int8_dot, Attrs attrs = {}) {
  if (!seven_bits(x)) return int8_dot ? std::optional<Attrs>(attrs) : std::nullopt;
  return attrs.with("activation_bits", int64_t{7});
}

Expr int8_dense(const CallNode* dense, bool int8_dot) {
  auto x = dequantized_activations(dense->args[0]);
  auto w = dequantized_weights(dense->args[1], 2);
  if (!x || !w) return nullptr;
  auto attrs = product_attrs(*x, int8_dot);
  if (!attrs) return nullptr;
  const std::string& name = dense->name;
  Expr acc =
      call("nn.dense_u8s8",
           {call("nn.pack_bytes4", {x->q}, {}, name), call("nn.pack_bytes4", {w->w}, {}, name)},
           *attrs, name);
  return scaled(acc, *x, *w, {w->w->type.tensor().shape[0]}, name);
}

// A conv over words of four channels, where AlterOpLayout blocks it (any image size) or
// its NCHW vectors, which run along the output's rows, fill (narrower rows waste most lanes:
// a 7 x 7 stage ran at a fifth of the float32 blocked conv's speed on Zen 4). A depthwise
// conv (one group per channel) reads the bytes themselves, one weight per channel and tap,
// where AlterOpLayout blocks it and its window sums exactly (kU8S8DepthwiseMaxTaps).
Expr int8_conv(const CallNode* conv, bool int8_dot, const MachineModel& machine) {
  const TensorType& out = conv->type.tensor();
  const auto& w_shape = conv->args[1]->type.tensor().shape;
  const int64_t channels = conv->args[0]->type.tensor().shape[1];
  const int64_t groups = conv->attrs.get_int("groups", 1);
  const bool depthwise = groups > 1 && groups == channels && w_shape[0] == groups;
  if (depthwise) {
    if (!blocks_word_conv(machine, channels, channels, 4, true) ||
        w_shape[2] * w_shape[3] > kU8S8DepthwiseMaxTaps)
      return nullptr;
  } else if (groups != 1 || (!blocks_word_conv(machine, channels, out.shape[1], 4) &&
                             out.shape[3] < machine.lanes(DType::Int32))) {
    return nullptr;
  }
  auto x = dequantized_activations(conv->args[0]);
  auto w = dequantized_weights(conv->args[1], 4);
  if (!x || !w) return nullptr;
  // The zero point in each byte: a padded position adds what the value 0 would.
  const auto zero = static_cast<uint32_t>(x->zero) * 0x01010101u;
  auto attrs = product_attrs(*x, int8_dot,
                             conv->attrs.with("pad_word", int64_t{static_cast<int32_t>(zero)}));
  if (!attrs) return nullptr;
  const std::string& name = conv->name;
  Attrs channel_axis = Attrs().with("axis", int64_t{1});
  auto words = [&](const Expr& bytes) {
    return depthwise ? bytes : call("nn.pack_bytes4", {bytes}, channel_axis, name);
  };
  Expr acc = call("nn.conv2d_u8s8", {words(x->q), words(w->w)}, *attrs, name);
  return scaled(acc, *x, *w, {w->w->type.tensor().shape[0], 1, 1}, name);
}

// Calls named after the layer they replace.
struct Calls {
  const std::string& name;
  Expr operator()(const char* op, std::vector<Expr> args, Attrs attrs = {}) const {
    return call(op, std::move(args), std::move(attrs), name);
  }
};

// A batch-1 row x float32 [1, K] (any rank, leading sizes 1) as integers q = round(x / s),
// s = max|x| / top (the row's largest magnitude to the integer's), and the two bytes of
// u = q + offset, u = base hi + lo (float32 values, all exact):
//   16 bits (VNNI): top 32767, base 256, offset 0: lo in [0, 255], hi in [-128, 127], which
//     the unsigned row holds as hi + 128 (hi_shift);
//   14 bits (vpmaddubsw's 7-bit bytes): top 8191, base 128, offset 8192: lo, hi in [0, 127].
// x's rounding is at most s / 2 an element, 2^-16 (2^-14) of its largest magnitude.
struct RowForm {
  double top;
  int64_t base, offset, hi_shift, activation_bits;
};
constexpr RowForm kSixteenBits{32767, 256, 0, 128, 8}, kFourteenBits{8191, 128, 8192, 0, 7};

struct RowBytes {
  Expr s, q, hi, lo;
};

RowBytes row_bytes(const Expr& x, const RowForm& form, const std::string& name) {
  const auto rank = static_cast<int64_t>(x->type.tensor().ndim());
  auto number = [&](double v) { return scalar(DType::Float32, v); };
  const Calls with{name};
  Expr amax = with("max", {with("abs", {x})},
                   Attrs({{"axis", std::vector<int64_t>{rank - 1}}, {"keepdims", int64_t{1}}}));
  // An all-zero row keeps a positive scale (its q is 0). A row holding a NaN or an infinity
  // gets the scale NaN (0 * inf), so every output is NaN: its 16 bits would be garbage, and
  // an infinity's products would take wrong signs.
  Expr s = with("add",
                {with("multiply", {with("maximum", {amax, number(1e-30)}), number(1.0 / form.top)}),
                 with("multiply", {amax, number(0)})});
  Expr q = with("round", {with("divide", {x, s})});
  Expr u = form.offset ? with("add", {q, number(static_cast<double>(form.offset))}) : q;
  const auto base = static_cast<double>(form.base);
  Expr hi = with("floor", {with("multiply", {u, number(1.0 / base)})});
  return {s, q, hi, with("subtract", {u, with("multiply", {hi, number(base)})})};
}

// Whether x is one static float32 row (a GEMV, bound by reading the weights). With more
// rows the float32 GEMM was as fast or faster (Zen 5: 0.9x at 3 rows, 0.73x at 128; the
// register tile's rows of bytes re-read the weights).
bool one_row(const Expr& x) {
  const TensorType& t = x->type.tensor();
  if (t.dtype != DType::Float32 || t.ndim() < 1 || t.symbolic()) return false;
  for (size_t d = 0; d + 1 < t.ndim(); ++d)
    if (t.shape[d] != 1) return false;
  return true;
}

// A weight-only batch-1 dense: x float32 [1, K] by a constant int8 W [N, K], each weight
// converted to float as the kernel reads it, three instructions a vector of weights where
// vpdpbusd takes four bytes of 16 weights in one. With x as 16 bits in two rows of bytes
// [lo, hi + 128], the dense by W reads each weight word once for both rows, and
//   x W^T ~ s q W^T = s (256 (z_hi - 128 sum_k W[n, k]) + z_lo).
// 14 bits in two rows of 7-bit bytes [lo, hi] (activation_bits 7: vpmaddubsw without VNNI):
//   x W^T ~ s (u - 8192) W^T = s (128 (z_hi - 64 sum_k W[n, k]) + z_lo).
Expr weight_only_dense(const CallNode* dense, const RowForm& form) {
  const Expr &x = dense->args[0], &w = dense->args[1];
  auto* wc = as<ConstantNode>(w);
  if (!wc || w->type.tensor().dtype != DType::Int8 || !one_row(x) ||
      w->type.tensor().shape[1] > 65536)  // z_hi < 2^31
    return nullptr;
  const std::string& name = dense->name;
  const auto rank = static_cast<int64_t>(x->type.tensor().ndim());
  const Calls with{name};
  const RowBytes r = row_bytes(x, form, name);
  auto row = [&](Expr v) {
    return with("expand_dims", {with("cast", {v}, Attrs().with("dtype", std::string("uint8")))},
                Attrs().with("axis", rank - 1));
  };
  Expr hi =
      form.hi_shift ? with("add", {r.hi, scalar(DType::Float32, double(form.hi_shift))}) : r.hi;
  Expr bytes = with("concatenate", {row(r.lo), row(hi)}, Attrs().with("axis", rank - 1));
  Expr z = with("nn.dense_u8s8", {with("nn.pack_bytes4", {bytes}), with("nn.pack_bytes4", {w})},
                Attrs().with("activation_bits", form.activation_bits));
  // z_hi's correction: hi_shift, and the offset over base, times each output's weight sum.
  const int64_t n = w->type.tensor().shape[0], k = w->type.tensor().shape[1];
  runtime::NDArray correction = runtime::NDArray::empty({2, n}, DType::Int32);
  const auto* wv = wc->value.data_as<int8_t>();
  int32_t* cv = correction.data_as<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    int32_t total = 0;
    for (int64_t j = 0; j < k; ++j) total += wv[i * k + j];
    cv[i] = 0;
    cv[n + i] = static_cast<int32_t>(form.hi_shift + form.offset / form.base) * total;
  }
  runtime::NDArray weights = runtime::NDArray::empty({2, 1}, DType::Float32);
  weights.data_as<float>()[0] = 1.0f;
  weights.data_as<float>()[1] = static_cast<float>(form.base);
  Expr zf = with("cast", {with("subtract", {z, constant(correction)})},
                 Attrs().with("dtype", std::string("float32")));
  Expr sums = with("sum", {with("multiply", {zf, constant(weights)})},
                   Attrs({{"axis", std::vector<int64_t>{rank - 1}}, {"keepdims", int64_t{0}}}));
  return with("multiply", {sums, r.s});
}

// torchao's 4-bit weight with a scale per group of K, as it imports:
//   reshape((cast(reshape(Q)) - cast(reshape(Z))) * reshape(S), [N, K])
// Q a constant int8 [N, K] of values in [-8, 7], Z zeros [N, G], S float32 [N, G].
struct Int4Weights {
  const ConstantNode *q, *scale;
  int64_t group;
};

std::optional<Int4Weights> int4_weights(const Expr& e) {
  auto* r = op_call(e, "reshape");
  auto* mul = r ? op_call(r->args[0], "multiply") : nullptr;
  if (!mul || mul->type.tensor().ndim() != 3) return std::nullopt;
  Expr centered = mul->args[0];
  if (auto* sub = op_call(centered, "subtract")) {
    if (!zeros(sub->args[1])) return std::nullopt;
    centered = sub->args[0];
  }
  auto* q = as<ConstantNode>(peel(centered));
  auto* scale = as<ConstantNode>(peel(mul->args[1]));
  const std::vector<int64_t>& grouped = mul->type.tensor().shape;  // [N, G, group]
  if (!q || !scale || q->type.tensor().dtype != DType::Int8 || q->type.tensor().ndim() != 2 ||
      scale->type.tensor().dtype != DType::Float32 ||
      scale->value.numel() != grouped[0] * grouped[1] ||
      mul->args[1]->type.tensor().shape != std::vector<int64_t>{grouped[0], grouped[1], 1})
    return std::nullopt;
  const auto* v = q->value.data_as<int8_t>();
  for (int64_t i = 0; i < q->value.numel(); ++i)
    if (v[i] < -8 || v[i] > 7) return std::nullopt;
  return Int4Weights{q, scale, grouped[2]};
}

// A weight-only batch-1 dense by 4-bit weights in groups (int4 above) -> nn.dense_int4
// (nn_int4.cc) of x's 16 bits in two rows of bytes [lo; hi], each group's sum of q, the
// weights as words of eight nibbles q + 8 and the scales [G, N]; times x's scale.
Expr weight_only_int4_dense(const CallNode* dense) {
  const Expr& x = dense->args[0];
  auto w = one_row(x) ? int4_weights(dense->args[1]) : std::nullopt;
  // The group's exact sum is an int32 and its sum of q a float32 integer below 2^24.
  if (!w || w->group % 8 != 0 || w->group > 512) return nullptr;
  const std::string& name = dense->name;
  const int64_t n = w->q->type.tensor().shape[0], k = w->q->type.tensor().shape[1];
  const int64_t groups = k / w->group;
  const Calls with{name};
  auto shaped = [&](Expr e, std::vector<int64_t> shape) {
    return with("reshape", {e}, Attrs().with("newshape", shape));
  };
  const RowBytes r = row_bytes(shaped(x, {1, k}), kSixteenBits, name);
  auto bytes = [&](Expr v, const char* dtype) {
    return with("nn.pack_bytes4", {with("cast", {v}, Attrs().with("dtype", std::string(dtype)))});
  };
  Expr x4 = with("concatenate", {bytes(r.lo, "uint8"), bytes(r.hi, "int8")},
                 Attrs().with("axis", int64_t{0}));
  Expr sums = with("cast",
                   {with("sum", {shaped(r.q, {groups, w->group})},
                         Attrs({{"axis", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}}))},
                   Attrs().with("dtype", std::string("int32")));
  runtime::NDArray words = runtime::NDArray::empty({n, k / 8}, DType::Int32);
  runtime::NDArray scales = runtime::NDArray::empty({groups, n}, DType::Float32);
  const auto* q = w->q->value.data_as<int8_t>();
  const auto* s = w->scale->value.data_as<float>();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < k / 8; ++j) {
      uint32_t word = 0;
      for (int b = 0; b < 4; ++b) {
        const auto low = static_cast<uint32_t>(q[i * k + 8 * j + b] + 8);
        const auto high = static_cast<uint32_t>(q[i * k + 8 * j + 4 + b] + 8);
        word |= (low | high << 4) << (8 * b);
      }
      words.data_as<int32_t>()[i * (k / 8) + j] = static_cast<int32_t>(word);
    }
    for (int64_t g = 0; g < groups; ++g) scales.data_as<float>()[g * n + i] = s[i * groups + g];
  }
  Expr y = with("nn.dense_int4", {x4, sums, constant(words), constant(scales)},
                Attrs().with("group", w->group));
  y = with("multiply", {y, r.s});
  return y->type.tensor().shape == dense->type.tensor().shape
             ? y
             : shaped(y, dense->type.tensor().shape);
}

// `int8_dot`: every product (VNNI); else those of 7-bit activations only (a weight-only
// row then takes 14 bits in 7-bit bytes; the int4 dense's signed high byte needs VNNI).
Expr int8_product(const CallNode* c, bool int8_dot, const MachineModel& machine) {
  if (!c->op || c->args.size() != 2) return nullptr;
  if (c->op->name == "nn.dense") {
    if (Expr r = weight_only_dense(c, int8_dot ? kSixteenBits : kFourteenBits)) return r;
    if (int8_dot)
      if (Expr r = weight_only_int4_dense(c)) return r;
    return int8_dense(c, int8_dot);
  }
  if (c->op->name == "nn.conv2d") return int8_conv(c, int8_dot, machine);
  return nullptr;
}

}  // namespace

Function int8_products(const Function& f, bool int8_dot, bool int8_dot_7bit,
                       const MachineModel& machine) {
  if (!int8_dot && !int8_dot_7bit) return f;
  return rewrite(f, [&](const Expr& e, const std::vector<Expr>& in) -> Expr {
    auto* c = as<CallNode>(e);
    if (!c || !c->op) return nullptr;
    Expr node = with_inputs(e, in);
    if (Expr r = int8_product(as<CallNode>(node), int8_dot, machine)) return r;
    return node != e ? node : nullptr;
  });
}

}  // namespace ember::passes
