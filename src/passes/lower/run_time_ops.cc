// Which ops' compute rules stay right over run-time sizes (dynamic shapes). A compute rule
// indexes at the static maxima; that is right where a run-time dimension is only looped over
// (rows of a GEMM, a softmax's row, a batch of images) and wrong where the rule uses the
// dimension's size as a value: a mean's count, a pad's far edge, a window over it, a
// concatenation's offset, an attribute read at its maximum. Lowering such an op over
// run-time sizes would silently compute the largest run's answer, so it is refused.
#include "run_time_ops.h"

#include <set>
#include <string>

#include "ember/ir/op.h"

namespace ember::passes {

using namespace ir;

namespace {

// The axes of `t` whose size is known only at run time.
std::set<int64_t> run_time_axes(const TensorType& t) {
  std::set<int64_t> out;
  for (size_t d = 0; d < t.dims.size(); ++d)
    if (!t.dims[d].is_static()) out.insert(static_cast<int64_t>(d));
  return out;
}

bool any_from(const std::set<int64_t>& axes, int64_t first) {
  return !axes.empty() && *axes.rbegin() >= first;
}

// Every run-time axis of the op's inputs and result is its batch axis (axis 0).
bool batch_only(const CallNode& c) {
  for (auto& a : c.args)
    if (any_from(run_time_axes(a->type.tensor()), 1)) return false;
  return !any_from(run_time_axes(c.type.tensor()), 1);
}

int64_t norm_axis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

}  // namespace

std::string run_time_refusal(const CallNode& c) {
  const std::string& op = c.op->name;
  const TensorType& in = c.args.empty() ? c.type.tensor() : c.args[0]->type.tensor();
  const std::set<int64_t> rt = run_time_axes(in);
  // Size attributes with symbols: only those the rule reads through the result's shape.
  for (auto& [key, dims] : c.attrs.symbolic())
    if (!c.op->is_view && !(op == "broadcast_to" && key == "shape") &&
        !(op == "strided_slice" && key == "end"))
      return "its attribute " + key +
             " holds a run-time size, which its kernel reads at the maximum";
  if (c.op->is_view || c.op->pattern == OpPattern::ElemWise ||
      c.op->pattern == OpPattern::Broadcast)
    return "";
  static const std::set<std::string> looped = {"transpose",
                                               "strided_slice",
                                               "take",
                                               "gather",
                                               "adv_index",
                                               "where",
                                               "cast",
                                               "nn.dense",
                                               "nn.dense_packed",
                                               "nn.dense_lanes",
                                               "nn.matmul",
                                               "nn.batch_matmul",
                                               "nn.softmax",
                                               "nn.log_softmax",
                                               "nn.batch_norm",
                                               "nn.bias_add",
                                               "sum",
                                               "max",
                                               "min",
                                               "l1_norm",
                                               "l2_norm",
                                               "sum_squares",
                                               "log_sum",
                                               "log_sum_exp",
                                               "to_blocked",
                                               "from_blocked"};
  if (looped.count(op)) return "";
  static const std::set<std::string> images = {"nn.conv2d",
                                               "nn.conv2d_blocked",
                                               "nn.conv2d_u8s8",
                                               "nn.conv2d_u8s8_blocked",
                                               "nn.conv2d_bf16",
                                               "nn.conv2d_bf16_blocked",
                                               "nn.max_pool2d",
                                               "nn.avg_pool2d",
                                               "nn.adaptive_avg_pool2d"};
  if (images.count(op))
    return batch_only(c) ? "" : "its windows run over a run-time height or width";
  if (op == "mean") {
    for (int64_t a : c.attrs.get_ints("axis", {}))
      if (rt.count(norm_axis(a, in.ndim()))) return "it averages over a run-time axis";
    return "";
  }
  if (op == "nn.layer_norm")
    return any_from(rt, norm_axis(c.attrs.get_int("axis", -1), in.ndim()))
               ? "it normalises over a run-time axis"
               : "";
  if (op == "nn.instance_norm")
    return any_from(rt, 2) ? "it normalises over a run-time height or width" : "";
  if (op == "concatenate") {
    const int64_t axis = norm_axis(c.attrs.get_int("axis", 0), in.ndim());
    for (auto& a : c.args)
      if (run_time_axes(a->type.tensor()).count(axis)) return "it joins along a run-time axis";
    return "";
  }
  if (op == "nn.pad") {
    const std::vector<int64_t> w = c.attrs.get_ints("pad_width", {});
    for (int64_t a : rt)
      if (2 * a + 1 < static_cast<int64_t>(w.size()) && (w[2 * a] || w[2 * a + 1]))
        return "it pads a run-time axis";
    return "";
  }
  return "it is not known to be right over run-time sizes";
}

}  // namespace ember::passes
