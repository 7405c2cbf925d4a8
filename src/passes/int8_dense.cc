// Int8Dense: see int8_dense.h.
#include "ember/passes/int8_dense.h"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "ember/ir/op.h"

namespace ember::passes {

using namespace ir;

namespace {

// The value of a one-element constant, or none.
std::optional<double> number(const Expr& e) {
  auto* c = as<ConstantNode>(e);
  if (!c || c->value.numel() != 1) return std::nullopt;
  return c->value.element(0);
}

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
  auto scale = mul ? number(mul->args[1]) : std::nullopt;
  if (!scale) return std::nullopt;
  if (Expr q = widened(mul->args[0], DType::UInt8)) return Activations{q, 0, *scale};
  auto* sub = op_call(mul->args[0], "subtract");
  Expr q = sub ? widened(sub->args[0], DType::UInt8) : nullptr;
  auto zero = q ? number(sub->args[1]) : std::nullopt;
  if (!zero || *zero != std::floor(*zero)) return std::nullopt;
  return Activations{q, static_cast<int64_t>(*zero), *scale};
}

struct Weights {
  Expr w;      // a constant int8 [N, K]
  Expr scale;  // [N, 1]
};

// Whether `e` is a constant (behind reshapes and casts) of zeros only.
bool zeros(const Expr& e) {
  auto* c = as<ConstantNode>(peel(e));
  if (!c) return false;
  for (int64_t i = 0; i < c->value.numel(); ++i)
    if (c->value.element(i) != 0) return false;
  return true;
}

// (cast(W) - zw) * sw or cast(W) * sw, with W a constant int8 [N, K], zw zeros, sw [N, 1].
std::optional<Weights> dequantized_weights(const Expr& e) {
  auto* mul = op_call(e, "multiply");
  if (!mul) return std::nullopt;
  Expr centered = mul->args[0];
  if (auto* sub = op_call(centered, "subtract")) {
    if (!zeros(sub->args[1])) return std::nullopt;
    centered = sub->args[0];
  }
  Expr w = widened(centered, DType::Int8);
  if (!w || !as<ConstantNode>(w) || w->type.tensor().ndim() != 2) return std::nullopt;
  const int64_t n = w->type.tensor().shape[0];
  if (mul->args[1]->type.tensor().shape != std::vector<int64_t>{n, 1}) return std::nullopt;
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

Expr int8_product(const CallNode* dense) {
  if (!dense->op || dense->op->name != "nn.dense" || dense->args.size() != 2) return nullptr;
  auto x = dequantized_activations(dense->args[0]);
  auto w = dequantized_weights(dense->args[1]);
  if (!x || !w) return nullptr;
  const std::string& name = dense->name;
  const int64_t n = w->w->type.tensor().shape[0];
  Expr acc =
      call("nn.dense_u8s8",
           {call("nn.pack_bytes4", {x->q}, {}, name), call("nn.pack_bytes4", {w->w}, {}, name)}, {},
           name);
  if (x->zero != 0) {
    Expr sums = call("sum", {call("cast", {w->w}, Attrs().with("dtype", std::string("int32")))},
                     Attrs({{"axis", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}}), name);
    Expr correction = call("multiply", {sums, scalar(DType::Int32, double(x->zero))}, {}, name);
    acc = call("subtract", {acc, correction}, {}, name);
  }
  Expr scale = call("multiply",
                    {call("reshape", {w->scale}, Attrs().with("newshape", std::vector<int64_t>{n})),
                     scalar(DType::Float32, x->scale)},
                    {}, name);
  return call("multiply",
              {call("cast", {acc}, Attrs().with("dtype", std::string("float32")), name), scale},
              Attrs(), name);
}

}  // namespace

Function int8_dense(const Function& f, bool int8_dot) {
  if (!int8_dot) return f;
  return rewrite(f, [&](const Expr& e, const std::vector<Expr>& in) -> Expr {
    auto* c = as<CallNode>(e);
    if (!c || !c->op) return nullptr;
    bool changed = false;
    for (size_t k = 0; k < in.size(); ++k) changed |= in[k] != c->args[k];
    Expr node = changed ? call(c->op, in, c->attrs, c->name) : e;
    if (Expr r = int8_product(as<CallNode>(node))) return r;
    return changed ? node : nullptr;
  });
}

}  // namespace ember::passes
