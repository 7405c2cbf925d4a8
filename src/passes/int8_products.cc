// Int8Products: see int8_products.h.
#include "ember/passes/int8_products.h"

#include <cmath>
#include <optional>
#include <string>
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

Expr int8_dense(const CallNode* dense) {
  auto x = dequantized_activations(dense->args[0]);
  auto w = dequantized_weights(dense->args[1], 2);
  if (!x || !w) return nullptr;
  const std::string& name = dense->name;
  Expr acc =
      call("nn.dense_u8s8",
           {call("nn.pack_bytes4", {x->q}, {}, name), call("nn.pack_bytes4", {w->w}, {}, name)}, {},
           name);
  return scaled(acc, *x, *w, {w->w->type.tensor().shape[0]}, name);
}

// A conv over words of four channels, where AlterOpLayout blocks it (any image size) or
// its NCHW vectors, which run along the output's rows, fill (narrower rows waste most lanes:
// a 7 x 7 stage ran at a fifth of the float32 blocked conv's speed on Zen 4). A depthwise
// conv (one group per channel) reads the bytes themselves, one weight per channel and tap,
// where AlterOpLayout blocks it and its window sums exactly (kU8S8DepthwiseMaxTaps).
Expr int8_conv(const CallNode* conv, const MachineModel& machine) {
  const TensorType& out = conv->type.tensor();
  const auto& w_shape = conv->args[1]->type.tensor().shape;
  const int64_t channels = conv->args[0]->type.tensor().shape[1];
  const int64_t groups = conv->attrs.get_int("groups", 1);
  const bool depthwise = groups > 1 && groups == channels && w_shape[0] == groups;
  if (depthwise) {
    if (!blocks_int8_conv(machine, channels, channels, true) ||
        w_shape[2] * w_shape[3] > kU8S8DepthwiseMaxTaps)
      return nullptr;
  } else if (groups != 1 || (!blocks_int8_conv(machine, channels, out.shape[1]) &&
                             out.shape[3] < machine.lanes(DType::Int32))) {
    return nullptr;
  }
  auto x = dequantized_activations(conv->args[0]);
  auto w = dequantized_weights(conv->args[1], 4);
  if (!x || !w) return nullptr;
  const std::string& name = conv->name;
  // The zero point in each byte: a padded position adds what the value 0 would.
  const auto zero = static_cast<uint32_t>(x->zero) * 0x01010101u;
  Attrs attrs = conv->attrs.with("pad_word", int64_t{static_cast<int32_t>(zero)});
  Attrs channel_axis = Attrs().with("axis", int64_t{1});
  auto words = [&](const Expr& bytes) {
    return depthwise ? bytes : call("nn.pack_bytes4", {bytes}, channel_axis, name);
  };
  Expr acc = call("nn.conv2d_u8s8", {words(x->q), words(w->w)}, attrs, name);
  return scaled(acc, *x, *w, {w->w->type.tensor().shape[0], 1, 1}, name);
}

Expr int8_product(const CallNode* c, const MachineModel& machine) {
  if (!c->op || c->args.size() != 2) return nullptr;
  if (c->op->name == "nn.dense") return int8_dense(c);
  if (c->op->name == "nn.conv2d") return int8_conv(c, machine);
  return nullptr;
}

}  // namespace

Function int8_products(const Function& f, bool int8_dot, const MachineModel& machine) {
  if (!int8_dot) return f;
  return rewrite(f, [&](const Expr& e, const std::vector<Expr>& in) -> Expr {
    auto* c = as<CallNode>(e);
    if (!c || !c->op) return nullptr;
    Expr node = with_inputs(e, in);
    if (Expr r = int8_product(as<CallNode>(node), machine)) return r;
    return node != e ? node : nullptr;
  });
}

}  // namespace ember::passes
