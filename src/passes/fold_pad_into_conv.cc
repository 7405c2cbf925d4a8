// FoldPadIntoConv: an explicit zero pad before a convolution costs a full copy of the
// activation; the convolution's own padding costs nothing (its loop nest bounds-checks the
// window). See fold_pad_into_conv.h for exactly when the fold keeps the values.
#include "ember/passes/fold_pad_into_conv.h"

#include <cmath>
#include <string>
#include <vector>

#include "ember/ir/op.h"

namespace ember::passes {

using namespace ir;

namespace {

Expr fold(const CallNode* c, const std::vector<Expr>& in) {
  const std::string& op = c->op->name;
  bool conv = op == "nn.conv2d", avg = op == "nn.avg_pool2d", mx = op == "nn.max_pool2d";
  if (!conv && !avg && !mx) return nullptr;
  auto* pad = as<CallNode>(in[0]);
  if (!pad || !pad->op || pad->op->name != "nn.pad") return nullptr;
  if (pad->attrs.get_str("pad_mode", "constant") != "constant") return nullptr;
  std::vector<int64_t> w = pad->attrs.get_ints("pad_width", {});
  if (w.size() != 8 || w[0] || w[1] || w[2] || w[3]) return nullptr;  // NCHW, H and W only
  for (size_t k = 4; k < 8; ++k)
    if (w[k] < 0) return nullptr;  // cropping
  double value = pad->attrs.get_float("pad_value", 0.0);
  if (mx ? !(std::isinf(value) && value < 0) : value != 0.0) return nullptr;
  if (avg && c->attrs.get_int("count_include_pad", 1) == 0) return nullptr;
  if ((avg || mx) && c->attrs.get_int("ceil_mode", 0) != 0) return nullptr;

  // padding is [top, left, bottom, right]; pad_width pairs are (before, after) per axis.
  std::vector<int64_t> p = c->attrs.get_ints("padding", {0, 0, 0, 0});
  p = {p[0] + w[4], p[1] + w[6], p[2] + w[5], p[3] + w[7]};
  if (avg || mx) {
    auto k = c->attrs.get_ints("pool_size", {});
    auto d = mx ? c->attrs.get_ints("dilation", {1, 1}) : std::vector<int64_t>{1, 1};
    for (int dim = 0; dim < 2; ++dim) {
      int64_t window = d[dim] * (k[dim] - 1) + 1;
      if (p[dim] >= window || p[dim + 2] >= window) return nullptr;  // the op cannot express it
    }
  }
  std::vector<Expr> args = in;
  args[0] = pad->args[0];
  Attrs attrs = c->attrs.with("padding", p)
                    .with("fusion_pattern", conv ? "Padding + Convolution" : "Padding + Pooling");
  return call(c->op, std::move(args), attrs, join_names({pad->name, c->name}));
}

}  // namespace

Function fold_pad_into_conv(const Function& f) {
  return rewrite(f, [](const Expr& e, const std::vector<Expr>& in) -> Expr {
    auto* c = as<CallNode>(e);
    if (!c || !c->op || in.empty()) return nullptr;
    return fold(c, in);
  });
}

}  // namespace ember::passes
