// The questions the default CPU schedule (default_schedule.cc) and its templates ask of a
// stage and of the body that reads it (declared in cpu_schedule.h).
#include <algorithm>
#include <set>

#include "analysis.h"
#include "cpu_schedule.h"

namespace ember::passes::cpu {

using namespace ir;

bool reads_tensor(const PrimExpr& body, const Stage& s) {
  bool reads = false;
  visit_prim(body, [&](const PrimExpr& e) {
    if (auto* p = e.as<ProducerLoadNode>()) reads |= p->producer == s.tensor().ref();
  });
  return reads;
}

// Does `r` read the inputs that its reduction walks contiguously along its innermost
// reduction axis (a row statistic: a sum over the last axis), none along its innermost data
// axis?
bool contiguous_along_reduction(const Stage& r) {
  auto* red = r.body().as<ReduceNode>();
  if (!red || r.reduce_axes().empty() || r.axes().empty()) return false;
  const PrimVarNode* k = r.reduce_axes().back()->var.get();
  const PrimVarNode* j = r.axes().back()->var.get();
  bool along_k = false, along_j = false;
  visit_prim(red->source, [&](const PrimExpr& e) {
    auto* p = e.as<ProducerLoadNode>();
    if (!p || p->indices.empty() || !uses_var(e, k)) return;  // (a row's mean: per row)
    along_k |= uses_var(p->indices.back(), k);
    along_j |= uses_var(p->indices.back(), j);
  });
  return along_k && !along_j;
}

// Does an input that `r` loads as vectors (one indexed by r's innermost axis) ignore r's
// axis `d`? Then computing kTile values of `d` at once shares each of its vector loads.
bool vector_input_ignores(const Stage& r, int d) {
  auto* red = r.body().as<ReduceNode>();
  if (!red) return false;
  const auto& axes = r.axes();
  auto uses = [](const ProducerLoadNode* p, const PrimVarNode* v) {
    bool found = false;
    for (auto& idx : p->indices) visit_prim(idx, [&](const PrimExpr& x) { found |= x.get() == v; });
    return found;
  };
  bool ignores = false;
  visit_prim(red->source, [&](const PrimExpr& e) {
    auto* p = e.as<ProducerLoadNode>();
    if (!p || !uses(p, axes.back()->var.get())) return;
    ignores |= !uses(p, axes[d]->var.get());
  });
  return ignores;
}

namespace {

// Does `r` read an input through a window: an index that moves with both one of r's axes
// and a reduction axis of more than one step (a 3x3 conv's rows, not a 1x1 conv's)?
// Does `r`'s reduction axis `ra` move along a window: an input index that uses it together
// with one of r's own axes?
bool slides(const Stage& r, const IterVar& ra) {
  auto* red = r.body().as<ReduceNode>();
  bool found = false;
  if (red)
    visit_prim(red->source, [&](const PrimExpr& e) {
      if (auto* p = e.as<ProducerLoadNode>())
        for (auto& idx : p->indices)
          found |= uses_var(idx, ra->var.get()) &&
                   std::any_of(r.axes().begin(), r.axes().end(),
                               [&](const IterVar& a) { return uses_var(idx, a->var.get()); });
    });
  return found;
}

}  // namespace

bool reads_window(const Stage& r) {
  const std::vector<IterVar>& reduce = r.reduce_axes();
  return std::any_of(reduce.begin(), reduce.end(),
                     [&](const IterVar& ra) { return ra->extent >= 2 && slides(r, ra); });
}

// Is `r`'s reduction its window alone (a depthwise conv: every reduction axis slides, none
// sums over channels)?
bool window_only(const Stage& r) {
  const std::vector<IterVar>& reduce = r.reduce_axes();
  return !reduce.empty() && std::all_of(reduce.begin(), reduce.end(),
                                        [&](const IterVar& ra) { return slides(r, ra); });
}

// The input that r reads along its innermost axis (a conv's weights), or none.
Tensor vector_input(const Stage& r) {
  Tensor found;
  visit_prim(r.body(), [&](const PrimExpr& e) {
    auto* p = e.as<ProducerLoadNode>();
    if (p && !found && reads_along(e, p->producer.get(), r.axes().back()->var.get()))
      found = Tensor(p->producer);
  });
  return found;
}

// Bytes of the inputs that `r` loads as vectors (indexed by its innermost axis).
int64_t vector_input_bytes(const Stage& r) {
  auto* red = r.body().as<ReduceNode>();
  int64_t bytes = 0;
  if (!red) return bytes;
  std::set<const TensorNode*> seen;
  visit_prim(red->source, [&](const PrimExpr& e) {
    auto* p = e.as<ProducerLoadNode>();
    if (!p || !reads_along(e, p->producer.get(), r.axes().back()->var.get()) ||
        !seen.insert(p->producer.get()).second)
      return;
    int64_t n = dtype_bytes(p->producer->dtype);
    for (int64_t d : p->producer->shape) n *= d;
    bytes += n;
  });
  return bytes;
}

// Can the vector input (a conv's weights) stream past the broadcast input's tile? When it
// fits in half the L2; or, with no window (a 1x1 conv), when it is at most 4 L2s, which the
// L3 keeps between tiles: the input tile of a 1x1 conv is one strided read per channel
// block, which the prefetchers miss if it is re-read from L3 for every output-channel block
// (ResNet-50's 1024 -> 256 1x1 convs, 1 MB of weights, gain; its 4 MB ones lose;
// calibration: weights stream inside).
bool weights_stream_inside(const Stage& r, const MachineModel& m) {
  int64_t bytes = vector_input_bytes(r);
  return bytes <= m.l2_bytes / 2 || (!reads_window(r) && bytes <= 4 * m.l2_bytes);
}

// Does `o` read `r` at its own indices (so o's axis k is r's axis k)?
bool reads_elementwise(const PrimExpr& o_body, const Stage& o, const Stage& r) {
  if (r.axes().size() != o.axes().size()) return false;
  bool elementwise = false;
  visit_prim(o_body, [&](const PrimExpr& e) {
    auto* p = e.as<ProducerLoadNode>();
    if (!p || p->producer != r.tensor().ref()) return;
    bool same = true;
    for (size_t k = 0; k < p->indices.size(); ++k) {
      // Broadcasting reads a size-1 axis at 0 (the batch axis of a batch-1 conv).
      int64_t c;
      bool unit = o.axes()[k]->extent == 1 && as_int(p->indices[k], &c) && c == 0;
      same &= unit || p->indices[k].get() == o.axes()[k]->var.get();
    }
    elementwise = same;
  });
  return elementwise;
}

int register_tile_axis(const PrimExpr& o_body, const Stage& o, const Stage& r, int64_t min_extent) {
  const auto& axes = r.axes();
  if (axes.size() < 2 || !reads_elementwise(o_body, o, r)) return -1;
  for (int d = static_cast<int>(axes.size()) - 2; d >= 0; --d)
    if (axes[d]->extent >= min_extent && vector_input_ignores(r, d)) return d;
  return -1;
}

// The extent of `r`'s innermost reduction loop, which the `unroll` knob splits.
int64_t inner_reduce_extent(const Stage& r) {
  std::vector<IterVar> axes = r.reduce_axes();
  return axes.empty() ? 1 : axes.back()->extent;
}

int64_t vector_lanes(const Stage& o, int vector_bits) {
  int64_t lanes = register_lanes(o.tensor().dtype(), vector_bits);
  // Prefer half-width vectors that divide the axis (56 = 7 x 8) to full ones with a
  // masked tail (56 = 3 x 16 + 8).
  int64_t last = o.axes().back()->extent;
  if (last % lanes != 0 && lanes >= 16 && last % (lanes / 2) == 0) lanes /= 2;
  return lanes;
}

// Does `r`'s innermost reduction run to an extent known only at run time (a sum over a row
// of run-time length)? Its steps then cannot be split into partial sums, which need a
// factor that divides them.
bool sums_to_run_extent(const Schedule& sch, const Stage& r) {
  const std::vector<IterVar>& k = r.reduce_axes();
  return !k.empty() && sch.run_extent(r, k.back()).get();
}

// Are all of these axes but the innermost of extent 1 (one row of outputs)?
bool one_row(const std::vector<IterVar>& axes) {
  for (size_t d = 0; d + 1 < axes.size(); ++d)
    if (axes[d]->extent != 1) return false;
  return true;
}

// Is `r` a GEMV's sum: of inputs read along its innermost axis (the weights) and inputs
// broadcast across it (the batch-1 activations), over no other reduction?
bool sums_a_broadcast_product(const Schedule& sch, const Stage& r) {
  auto* red = r.body().as<ReduceNode>();
  if (!red || red->op != ReduceOp::Sum || reads_window(r)) return false;
  const PrimExpr body = sch.expanded_body(r);
  const PrimVarNode* last = r.axes().back()->var.get();
  bool along = false, broadcast = false;
  visit_prim(body, [&](const PrimExpr& e) {
    if (auto* p = e.as<ProducerLoadNode>())
      (reads_along(e, p->producer.get(), last) ? along : broadcast) = true;
  });
  for (auto& s : sch.stages())
    if (s.get() != &r && is_reduction(*s) && reads_tensor(body, *s)) return false;
  return along && broadcast;
}

// Is `r` a sum of products of two tensors (a conv's or a GEMM's, not a pooling's)? An int8 or
// bfloat16 product's sum of dot_u8s8(0, a, b) or dot_bf16(0, a, b) is one too.
bool sums_products(const Stage& r) {
  auto* red = r.body().as<ReduceNode>();
  if (!red || red->op != ReduceOp::Sum) return false;
  PrimExpr factors[2];
  if (auto* mul = red->source.as<BinaryNode>(); mul && mul->op == BinaryOp::Mul)
    factors[0] = mul->a, factors[1] = mul->b;
  else if (auto* dot = red->source.as<PrimCallNode>();
           dot && (dot->op == Intrinsic::DotU8S8 || dot->op == Intrinsic::DotU7S8 ||
                   dot->op == Intrinsic::DotBF16))
    factors[0] = dot->args[1], factors[1] = dot->args[2];
  else
    return false;
  std::set<const void*> read[2];
  for (int side = 0; side < 2; ++side)
    visit_prim(factors[side], [&](const PrimExpr& e) {
      if (auto* p = e.as<ProducerLoadNode>()) read[side].insert(p->producer.get());
    });
  if (read[0].empty() || read[1].empty()) return false;
  for (const void* t : read[0])
    if (read[1].count(t)) return false;
  return true;
}

// The anchor's kind, from its loop nest alone: what reports name the template by. (A
// pointwise conv in the blocked layout has image axes: [N, C/c, H, W, c].)
std::string classify_anchor(const Schedule& sch, const Stage& o, const PrimExpr& body,
                            const std::vector<Stage*>& reds) {
  if (reds.empty()) return transposed_axis(body, o) >= 0 ? "transpose" : "elementwise";
  const std::vector<IterVar>& axes = o.axes();
  for (const Stage* r : reds)
    if (!reads_along(body, r->tensor().operator->(), axes.back()->var.get()))
      return "row_statistic";
  const Stage& r = *reds[0];
  if (!sums_products(r)) return reads_window(r) ? "pool" : "reduction";
  if (reads_window(r)) return window_only(r) ? "depthwise_conv" : "conv";
  if (one_row(axes) && sums_a_broadcast_product(sch, r)) return "gemv";
  return axes.size() >= 4 ? "pointwise_conv" : "gemm";
}

}  // namespace ember::passes::cpu
