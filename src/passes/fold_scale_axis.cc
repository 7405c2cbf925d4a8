// FoldScaleAxis: a per-output-channel scale after a conv or dense moves into its weights.
//
// conv(x, w) * s == conv(x, w * s[:, None, None, None]) when s varies only along the output
// channels, because output channel o is a sum of products with w[o] alone; the same holds
// for dense (weight [N, K], scale along N). Grouped and depthwise convs need nothing more:
// their weight is still indexed by the output channel first. A bias between the anchor and
// the scale is scaled with it: (conv + b) * s == conv(x, w * s) + b * s.
//
// The rewrite is only valid when nothing else reads the unscaled value, so every node on
// the way from the anchor to the multiply must have exactly one user. The new weight and
// bias are expressions over constants that FoldConstant evaluates afterwards.
#include "ember/passes/fold_scale_axis.h"

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "ember/ir/op.h"
#include "ember/support/error.h"

namespace ember::passes {

using namespace ir;

namespace {

// The output-channel axis of a conv2d (NCHW) or dense ([..., N]); none for other nodes, and
// for a dense with an 8-bit weight (weight-only quantization), whose scale stays the
// epilogue's multiply so that the weight stays 8-bit.
std::optional<int64_t> channel_axis(const Expr& e) {
  auto* c = as<CallNode>(e);
  if (!c || !c->op) return std::nullopt;
  if (c->op->name == "nn.conv2d") return 1;
  if (c->op->name == "nn.dense" && c->args[1]->type.tensor().dtype == e->type.tensor().dtype)
    return e->type.tensor().ndim() - 1;
  return std::nullopt;
}

// True when a tensor of `shape`, broadcast against `out`, varies only along `axis` (or not
// at all) and does not grow `out`.
bool varies_only_along(const std::vector<int64_t>& shape, const TensorType& out, int64_t axis) {
  if (shape.size() > out.shape.size()) return false;
  size_t offset = out.shape.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) {
    bool channel = static_cast<int64_t>(offset + d) == axis;
    if (shape[d] != 1 && !(channel && shape[d] == out.shape[axis])) return false;
  }
  return true;
}

bool is_channel_scale(const Expr& s, const TensorType& out, int64_t axis) {
  return s->kind == NodeKind::Constant && varies_only_along(s->type.tensor().shape, out, axis);
}

// `s` as a [n, 1, ..., 1] tensor of rank `rank`, where n is its number of values (1 or C).
Expr as_column(const Expr& s, size_t rank, const std::string& name) {
  std::vector<int64_t> shape(rank, 1);
  shape[0] = runtime::shape_numel(s->type.tensor().shape);
  if (s->type.tensor().shape == shape) return s;
  return call("reshape", {s}, Attrs({{"newshape", shape}}), name);
}

// anchor(x, w) with w scaled along its first axis by `s`; named "<anchor> + <scale>".
Expr scaled_anchor(const CallNode* anchor, const Expr& s, const std::string& scale_name) {
  std::string name = join_names({anchor->name, scale_name});
  const Expr& w = anchor->args[1];
  Expr new_w = call("multiply", {w, as_column(s, w->type.tensor().ndim(), name)}, {}, name);
  return call(anchor->op, {anchor->args[0], new_w}, anchor->attrs, name);
}

using UserCount = std::function<int(const Expr&)>;

// Folds multiply(value, s) where `value` is the (rewritten) anchor, or a bias add on it.
// nullptr: no fold.
Expr fold(const Expr& value, const Expr& s, const std::string& mul_name, const UserCount& users) {
  if (users(value) != 1) return nullptr;
  std::string scale_name = s->name.empty() ? mul_name : s->name;
  const TensorType& out = value->type.tensor();

  if (auto axis = channel_axis(value)) {
    if (!is_channel_scale(s, out, *axis)) return nullptr;
    return scaled_anchor(as<CallNode>(value), s, scale_name);
  }

  // (anchor + b) * s: the bias must be per-channel too (it need not be a constant: b * s is
  // still a small per-channel product), and the anchor read once.
  auto* add = as<CallNode>(value);
  if (!add || !add->op || (add->op->name != "add" && add->op->name != "nn.bias_add"))
    return nullptr;
  // bias_add has the data first; an add may have it on either side.
  size_t at = add->op->name == "add" && !channel_axis(add->args[0]) ? 1 : 0;
  const Expr& anchor = add->args[at];
  const Expr& bias = add->args[1 - at];
  auto axis = channel_axis(anchor);
  if (!axis || users(anchor) != 1 || !is_channel_scale(s, out, *axis)) return nullptr;
  Expr new_bias;
  if (add->op->name == "nn.bias_add") {
    if (add->attrs.get_int("axis", 1) != *axis) return nullptr;
    new_bias = call("multiply", {bias, as_column(s, 1, scale_name)}, {}, add->name);
  } else {
    if (!varies_only_along(bias->type.tensor().shape, out, *axis)) return nullptr;
    new_bias = call("multiply", {bias, s}, {}, add->name);
  }
  Expr new_anchor = scaled_anchor(as<CallNode>(anchor), s, scale_name);
  std::vector<Expr> args{new_anchor, new_bias};
  if (at == 1) std::swap(args[0], args[1]);
  return call(add->op, args, add->attrs, add->name);
}

}  // namespace

Function fold_scale_axis(const Function& f) {
  std::map<const ExprNode*, int> uses = use_counts(f);
  // Users are counted on the input graph. `origin` maps each rewritten argument to the node
  // it stands for; a node that is in no map was made by a fold, inside one replacement,
  // and has that one user.
  std::map<const ExprNode*, const ExprNode*> origin;
  UserCount users = [&](const Expr& e) {
    auto it = origin.find(e.get());
    return it == origin.end() ? 1 : uses.at(it->second);
  };
  return rewrite(f, [&](const Expr& e, const std::vector<Expr>& in) -> Expr {
    auto* c = as<CallNode>(e);
    if (!c) return nullptr;
    for (size_t i = 0; i < in.size(); ++i) origin[in[i].get()] = c->args[i].get();
    if (!c->op || c->op->name != "multiply") return nullptr;
    // The scale may be either operand.
    if (Expr r = fold(in[0], in[1], c->name, users)) return r;
    return fold(in[1], in[0], c->name, users);
  });
}

}  // namespace ember::passes
