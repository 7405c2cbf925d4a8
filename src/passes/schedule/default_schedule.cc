// The default CPU schedule template (see schedule.h). One template covers every anchor
// kind because the op's compute rule already says what is a reduction and what is not:
//
//   output stage O (spatial axes a0..an-1):   parallel for F in fuse(a0..an-2[, an-1.o]):
//                                                 [reduction tiles computed here]
//                                                 vectorized for an-1.i: O[...] = epilogue
//   reduction R read by O (conv, dense, pool): computed at F over the tile O reads, with
//                                             its reduction loops outside its vector loop.
//
// When O reads R along its innermost axis (conv, dense, pooling), the tile loop includes
// an-1.o, so a batch-1 dense still has parallel work and R's tile is one vector of outputs.
// When it does not (softmax reads its row sum once per row), an-1.o stays serial inside
// F, so R is computed once per row rather than once per vector.
#include <algorithm>
#include <set>

#include "analysis.h"
#include "ember/ir/simplify.h"
#include "ember/passes/machine_model.h"
#include "ember/passes/schedule.h"
#include "ember/passes/schedule_knobs.h"

namespace ember::passes {

using namespace ir;

namespace {

bool padded_input_of_reduction(Schedule& sch, const Stage& s);
bool windowed_pad(const Stage& r, const Stage& pad);

bool reads_tensor(const PrimExpr& body, const Stage& s) {
  bool reads = false;
  visit_prim(body, [&](const PrimExpr& e) {
    if (auto* p = e.as<ProducerLoadNode>()) reads |= p->producer == s.tensor().ref();
  });
  return reads;
}

// Reduction stages that `reader`'s body reads directly and that can all be computed inside
// `reader`'s loops: every other (non-inlined) stage that reads one of them must be one of
// them too (a layer norm's variance reads its mean), else that stage would find no buffer.
std::vector<Stage*> reductions_read(Schedule& sch, const Stage& reader, const PrimExpr& body) {
  std::vector<Stage*> out;
  for (auto& s : sch.stages())
    if (is_reduction(*s) && s->attach_kind() == AttachKind::Root && reads_tensor(body, *s))
      out.push_back(s.get());
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = out.begin(); it != out.end(); ++it) {
      bool foreign_reader = false;
      for (auto& other : sch.stages()) {
        if (other.get() == &reader || other.get() == *it ||
            other->attach_kind() == AttachKind::Inline ||
            std::find(out.begin(), out.end(), other.get()) != out.end())
          continue;
        foreign_reader |= reads_tensor(sch.expanded_body(*other), **it);
      }
      if (foreign_reader) {
        out.erase(it);
        changed = true;
        break;
      }
    }
  }
  return out;
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

// Does every input that `r`'s reduction walks index its trailing whole dimensions by the
// reduction axes, in order (an instance norm's sum over H x W reads x[n, c, r0, r1])? Then
// the elements it sums are one contiguous run.
bool sums_trailing_dimensions(const Stage& r) {
  auto* red = r.body().as<ReduceNode>();
  const std::vector<IterVar>& reduce = r.reduce_axes();
  bool all = true;
  visit_prim(red->source, [&](const PrimExpr& e) {
    auto* p = e.as<ProducerLoadNode>();
    if (!p) return;
    bool uses = false;
    for (auto& a : reduce) uses |= uses_var(e, a->var.get());
    if (!uses) return;
    const size_t n = reduce.size(), rank = p->indices.size();
    if (rank < n) {
      all = false;
      return;
    }
    for (size_t t = 0; t < n; ++t)
      all &= p->indices[rank - n + t].get() == reduce[t]->var.get() &&
             p->producer->shape[rank - n + t] == reduce[t]->extent;
  });
  return all;
}

// Reduction loops outside the innermost spatial loop, which is vectorized when asked. A
// row statistic that is not vectorized keeps its reduction loops innermost instead: it
// then reads each row contiguously (LLVM vectorizes the reassociable sum), not one element
// of every row per step (a layer norm over a block of 64 GEMM rows read 64 strided rows).
// Over trailing whole dimensions its loops fuse into one over the row: an instance norm's
// sum over 56 x 56 is then one rolled sum of 3136 that LLVM vectorizes into interleaved
// accumulators, not 56 sums of 56 each ending in a horizontal add (5x slower per element
// than a layer norm's row).
void schedule_reduction_tile(Stage& r, bool vectorize_inner) {
  std::vector<IterVar> order = r.axes();
  if (order.empty()) return;
  if (!vectorize_inner && contiguous_along_reduction(r)) {
    std::vector<IterVar> reduce = r.reduce_axes();
    for (auto& a : reduce) order.push_back(a);
    r.reorder(order);
    if (reduce.size() > 1 && sums_trailing_dimensions(r)) r.fuse(reduce);
    return;
  }
  IterVar last = order.back();
  order.pop_back();
  for (auto& a : r.reduce_axes()) order.push_back(a);
  order.push_back(last);
  r.reorder(order);
  if (vectorize_inner) r.vectorize(last);
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

// Does an input that `r` broadcasts (one not indexed by r's innermost axis) ignore r's
// axis `d`? (A conv's data ignores the output-channel block.)
bool input_ignores(const Stage& r, int d) {
  auto* red = r.body().as<ReduceNode>();
  if (!red) return false;
  const auto& axes = r.axes();
  bool ignores = false;
  visit_prim(red->source, [&](const PrimExpr& e) {
    auto* p = e.as<ProducerLoadNode>();
    if (!p || reads_along(e, p->producer.get(), axes.back()->var.get())) return;
    ignores |= !reads_along(e, p->producer.get(), axes[d]->var.get());
  });
  return ignores;
}

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
// (ResNet-50's 1024 -> 256 1x1 convs: 10-15% faster this way, 4 MB weights: slower).
bool weights_stream_inside(const Stage& r, const MachineModel& m) {
  int64_t bytes = vector_input_bytes(r);
  return bytes <= m.l2_bytes / 2 || (!reads_window(r) && bytes <= 4 * m.l2_bytes);
}

// Does every tile of pixels re-read `r`'s vector input (a 1x1 conv's weights) from the L3?
// When the weights stream inside (weights_stream_inside) but overflow the L2, and the
// output's innermost axis is one channel block of at most two vectors (a GEMM's columns are
// tiled instead, and its weight panel is reused by a block of rows from the L2).
bool weights_from_l3(const Stage& r, const MachineModel& m, int64_t cols) {
  return cols <= 2 * m.lanes(r.tensor().dtype()) && vector_input_bytes(r) > m.l2_bytes &&
         weights_stream_inside(r, m);
}

// Register tiling: an axis `d` of the reduction that one of its inputs does not depend on
// (a conv's output channel: the input patch is the same for every channel). Computing kTile
// values of `d` per tile reuses each vector load of that input kTile times. Returns -1 when
// no axis qualifies or `o` does not read `r` elementwise.
constexpr int64_t kTile = 4;
constexpr int64_t kCacheLineBytes = 64;
constexpr int64_t kTransposeRows = 16;     // tile_transpose: outputs per input cache line
constexpr int64_t kRows = 4;               // output rows per tile where windows overlap
constexpr int64_t kStatBlockBytes = 4096;  // tile_row_statistics: short rows per tile
constexpr int64_t kPadRows = 16;           // output rows per tile that computes its padded input

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

int register_tile_axis(const PrimExpr& o_body, const Stage& o, const Stage& r,
                       int64_t min_extent = kTile) {
  const auto& axes = r.axes();
  if (axes.size() < 2 || !reads_elementwise(o_body, o, r)) return -1;
  for (int d = static_cast<int>(axes.size()) - 2; d >= 0; --d)
    if (axes[d]->extent >= min_extent && vector_input_ignores(r, d)) return d;
  return -1;
}

// Does `r` read every input along its innermost axis (a sum of a tensor over another axis,
// no GEMV-like broadcast operand), and no other reduction?
bool sums_one_tensor(const Schedule& sch, const Stage& r) {
  auto* red = r.body().as<ReduceNode>();
  if (!red || red->op != ReduceOp::Sum) return false;
  const PrimExpr body = sch.expanded_body(r);
  bool pure = true;
  visit_prim(body, [&](const PrimExpr& e) {
    if (auto* p = e.as<ProducerLoadNode>())
      pure &= reads_along(e, p->producer.get(), r.axes().back()->var.get());
  });
  for (auto& s : sch.stages())
    pure &= s.get() == &r || !is_reduction(*s) || !reads_tensor(body, *s);
  return pure;
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

// The partial sums of a one-row register tile whose few accumulators are one dependent
// chain per vector, so that it runs at the FMA latency, not the throughput:
// - a sum of one tensor over another axis (a sum of squares over 768 values per 4-wide row;
//   Zen 5: 83 us as one chain, 15 us as 8);
// - a GEMV whose outputs are one tile (a classifier head of 10 outputs over K = 2048: one
//   vector, so one chain of 2048 FMAs, 1.9 us, where its 80 KB of weights stream from L2 in
//   under 0.5 us).
// Independent chains, as many as the FMA pipeline holds, each at least 8 steps long. A GEMV
// over more outputs is left alone: its tile takes as many vectors as the pipeline holds.
int64_t default_partial_sums(const Schedule& sch, const Stage& o, const Stage& r,
                             const RegisterTile& rt, int64_t k, const MachineModel& m) {
  const bool one_tile = one_row(o.axes()) && o.axes().back()->extent <= rt.cols();
  if (!sums_one_tensor(sch, r) && !(one_tile && sums_a_broadcast_product(sch, r))) return 1;
  const int64_t want = (m.fma_ports * m.fma_latency + rt.vectors - 1) / rt.vectors;
  int64_t best = 1;
  for (int64_t d = 2; d <= want && d * 8 <= k; ++d)
    if (k % d == 0) best = d;
  return best;
}

// The extent of `r`'s innermost reduction loop, which the `unroll` knob splits.
int64_t inner_reduce_extent(const Stage& r) {
  std::vector<IterVar> axes = r.reduce_axes();
  return axes.empty() ? 1 : axes.back()->extent;
}

// The default unroll of `r`'s innermost reduction loop: twice for a windowed conv, whose
// innermost reduction is one channel block (8-32 steps) inside the window's loops, so its
// loop overhead is a visible share (ResNet-50's 3x3 convs 2-6% faster; BERT's dense layers,
// whose reduction loop runs the whole K, 6% slower unrolled).
int64_t default_unroll(const Stage& r) {
  return reads_window(r) && inner_reduce_extent(r) % 2 == 0 ? 2 : 1;
}

// A GEMV's dot products over weight rows, as vector partials that several rows compute
// together (`DotRows`), or each row alone, its reduction loop innermost for LLVM to
// vectorize where that keeps the L2's pace (gemv_row_keeps_pace: MLP head 10 x 2048 on
// Zen 5 at 512 bits, 98% of a streaming sum alone, 86% as rows together; at 256 bits 53%
// alone, 74% together over [N, K] rows).
struct DotRows {
  int64_t lanes = 0;    // the partial's vector
  int64_t vectors = 1;  // vectors of each row per step, unrolled
  int64_t rows = 1;     // rows per block, unrolled, sharing each activation vector
};

DotRows choose_dot_rows(const MachineModel& m, DType t, int64_t k, int64_t tile_rows) {
  constexpr int64_t kMaxAccumulators = 12;
  DotRows d;
  if (gemv_row_keeps_pace(m, t)) return d;
  for (d.lanes = m.lanes(t); d.lanes >= 4 && k % d.lanes != 0;) d.lanes /= 2;
  if (d.lanes < 4) return DotRows{};
  // Two vectors a row where they divide k: the accumulators the FMA pipeline needs from
  // half the rows, so half the weight streams at once.
  if (k % (2 * d.lanes) == 0) d.vectors = 2;
  const int64_t chains = m.fma_ports * m.fma_latency, max_rows = kMaxAccumulators / d.vectors;
  for (int64_t b = std::min(tile_rows, max_rows); b >= 1 && d.rows == 1; --b)
    if (tile_rows % b == 0) d.rows = b;
  if (d.rows * d.vectors < chains) d.rows = std::min(tile_rows, max_rows);  // last block shifted
  return d;
}

// The partial [.., j, f] of rfactor over the lanes: blocks of `d.rows` rows, the
// reduction loop outside them, each row's `d.vectors` vectors of f innermost.
void schedule_dot_rows(Stage& r, const DotRows& d) {
  std::vector<IterVar> axes = r.axes();
  IterVar f = axes.back(), j = axes[axes.size() - 2], j_in, f_out;
  std::vector<IterVar> order(axes.begin(), axes.end() - 2);
  if (j->extent > d.rows)
    std::tie(j, j_in) = r.split(j, d.rows, SplitTail::Shift);
  else
    std::swap(j, j_in);
  if (j) order.push_back(j);
  for (auto& a : r.reduce_axes()) order.push_back(a);
  order.push_back(j_in);
  if (d.vectors > 1) {
    std::tie(f_out, f) = r.split(f, d.lanes);
    order.push_back(f_out);
  }
  order.push_back(f);
  r.reorder(order);
  r.unroll(j_in);
  if (f_out) r.unroll(f_out);
  r.vectorize(f);
}

// Computes `r`'s loops as a register tile: its reduction loops outside (the innermost one
// `unroll` steps at a time), then `d` (when >= 0) unrolled, then the innermost axis as
// `tile.vectors` unrolled vectors. Every accumulator of the tile then lives in a register
// for the whole reduction.
void schedule_register_tile(Stage& r, int d, const RegisterTile& tile, int64_t unroll = 1) {
  IterVar last = r.axes().back(), vec_group, k_in;
  std::vector<IterVar> order;
  for (size_t k = 0; k + 1 < r.axes().size(); ++k)
    if (static_cast<int>(k) != d) order.push_back(r.axes()[k]);
  std::vector<IterVar> reduce = r.reduce_axes();
  if (unroll > 1) std::tie(reduce.back(), k_in) = r.split(reduce.back(), unroll);
  for (auto& a : reduce) order.push_back(a);
  if (k_in) order.push_back(k_in);
  if (d >= 0) order.push_back(r.axes()[d]);
  if (tile.vectors > 1) std::tie(vec_group, last) = r.split(last, tile.lanes);
  if (vec_group) order.push_back(vec_group);
  order.push_back(last);
  r.reorder(order);
  if (k_in) r.unroll(k_in);
  if (d >= 0) r.unroll(r.axes()[d]);
  if (vec_group) r.unroll(vec_group);
  r.vectorize(last);
}

// A GEMM computed a block of rows at a time (a register tile of `rt` inside): column tiles
// outside row tiles, so each weight panel is read once per block, then the reduction
// loops, then the register tile.
void schedule_gemm_block(Stage& r, int d, const RegisterTile& rt, int64_t unroll) {
  std::vector<IterVar> axes = r.axes();
  IterVar rows = axes[d], rows_in, cols = axes.back(), cols_out, group, k_in;
  if (rt.rows > 1) std::tie(rows, rows_in) = r.split(rows, rt.rows, SplitTail::Shift);
  if (cols->extent > rt.cols()) std::tie(cols_out, cols) = r.split(cols, rt.cols());
  if (rt.vectors > 1) std::tie(group, cols) = r.split(cols, rt.lanes);
  std::vector<IterVar> order(axes.begin(), axes.begin() + d);
  for (IterVar a : {cols_out, rows})
    if (a) order.push_back(a);
  std::vector<IterVar> reduce = r.reduce_axes();
  if (unroll > 1) std::tie(reduce.back(), k_in) = r.split(reduce.back(), unroll);
  for (auto& a : reduce) order.push_back(a);
  for (IterVar a : {k_in, rows_in, group, cols})
    if (a) order.push_back(a);
  r.reorder(order);
  if (k_in) r.unroll(k_in);
  if (rows_in) r.unroll(rows_in);
  if (group) r.unroll(group);
  r.vectorize(cols);
}

// The chunk of r's outermost reduction axis that a register tile of `rt` accumulates per
// pass when r is computed a block of rows at a time (BLIS's kc), or 0 for one pass: the
// largest divisor whose vector loads (a chunk of the weight panel) fill at most half the L1,
// so every row tile of the block reads them from L1 rather than L2. Not worth it when the
// whole panel fits there already, or when a chunk is under 64 steps (each pass loads and
// stores the accumulators once). Used for convs (chunk_conv_block): for BERT's dense
// layers, whose panels stream from L2 well, chunking measured no faster per kernel and
// 7-13% slower for the whole layer at seq 384.
int64_t choose_k_chunk(const MachineModel& m, const Stage& r, const RegisterTile& rt) {
  std::vector<IterVar> reduce = r.reduce_axes();
  if (reduce.empty()) return 0;
  int64_t outer = reduce.front()->extent, inner = 1;
  for (size_t k = 1; k < reduce.size(); ++k) inner *= reduce[k]->extent;
  const int64_t step_bytes = rt.cols() * dtype_bytes(r.tensor().dtype()) * inner;
  if (outer * step_bytes <= m.l1_bytes / 2) return 0;
  for (int64_t c = outer / 2; c >= 1; --c)
    if (outer % c == 0 && c * step_bytes <= m.l1_bytes / 2) return c * inner >= 64 ? c : 0;
  return 0;
}

// A register tile of `rt` on axis `d` accumulated in chunks of `chunk` steps of r's
// outermost reduction axis: for each chunk, every row tile of the block (all of r's other
// data axes: a conv's rows of pixels) adds that chunk's products to its accumulators (loaded before
// and stored after; LLVM keeps them in registers across the chunk). The rows split with padding
// (SplitTail::Pad), never shifted: a shifted tile would add a chunk twice to the rows it shares
// with the tile before it.
void schedule_k_chunked_tile(Stage& r, int d, const RegisterTile& rt, int64_t chunk,
                             int64_t unroll) {
  std::vector<IterVar> axes = r.axes(), reduce = r.reduce_axes();
  IterVar k_out, k_in, rows, rows_in, last = axes.back(), group;
  int64_t chunk_steps = chunk;  // of the vector input per chunk
  for (size_t k = 1; k < reduce.size(); ++k) chunk_steps *= reduce[k]->extent;
  std::tie(k_out, reduce.front()) = r.split(reduce.front(), chunk);
  std::tie(rows, rows_in) = r.split(axes[d], rt.rows, SplitTail::Pad);
  if (unroll > 1) std::tie(reduce.back(), k_in) = r.split(reduce.back(), unroll);
  if (rt.vectors > 1) std::tie(group, last) = r.split(last, rt.lanes);
  std::vector<IterVar> order = {k_out};  // outside every row of the block
  for (size_t k = 0; k + 1 < axes.size(); ++k)
    if (static_cast<int>(k) != d) order.push_back(axes[k]);
  order.push_back(rows);
  for (auto& a : reduce) order.push_back(a);
  for (IterVar a : {k_in, rows_in, group, last})
    if (a) order.push_back(a);
  r.reorder(order);
  if (k_in) r.unroll(k_in);
  r.unroll(rows_in);
  if (group) r.unroll(group);
  r.vectorize(last);
  // The next chunk of the weight panel is prefetched while this one computes, a share per
  // row tile: the panel streams from memory (ResNet-50's layer4 weights, 4-9 MB per conv,
  // are not in any cache when the conv starts), and the prefetchers fetch nothing for it
  // while the row tiles after the first read the chunk from L1.
  if (Tensor w = vector_input(r))
    r.prefetch(rows, w, k_out, chunk_steps * rt.cols() * dtype_bytes(w.dtype()));
}

// The axis of `o` (not its innermost) that walks an input's contiguous axis while o's
// innermost axis reads that input across its rows (a transpose's), or -1.
int transposed_axis(const PrimExpr& body, const Stage& o) {
  const std::vector<IterVar>& axes = o.root_axes();
  const PrimVarNode* last = axes.back()->var.get();
  int found = -1;
  visit_prim(body, [&](const PrimExpr& e) {
    auto* p = e.as<ProducerLoadNode>();
    if (!p || p->indices.size() < 2 || p->producer->shape.back() < 8) return;
    const PrimExpr& inner = p->indices.back();
    bool across = false;
    for (size_t i = 0; i + 1 < p->indices.size(); ++i) across |= uses_var(p->indices[i], last);
    if (!across || uses_var(inner, last)) return;
    for (size_t d = 0; d + 1 < axes.size(); ++d)
      if (axes[d]->extent >= kTransposeRows && uses_var(inner, axes[d]->var.get()))
        found = static_cast<int>(d);
  });
  return found;
}

// The lanes of an elementwise value's vectors: two registers' worth where the value is a
// long dependency chain (an exp's polynomial, tanh, erf) and the axis has two vectors. Each
// instruction of the chain is then two independent ones side by side, which the core
// overlaps, where a loop of one-register chains ran only as many iterations at once as its
// scheduler held (GELU(tanh) over 4 x 32: 112 -> 97 ns; softplus over 128 x 3072: 882 -> 629
// us). A relu, memory-bound, keeps one register; so do the unrolled copies of a one-register
// chain, which LLVM leaves one after another (they measured no faster).
int64_t chain_lanes(const PrimExpr& body, int64_t lanes, const IterVar& axis) {
  return chain_length(body) >= kLongChain && axis->extent >= 2 * lanes ? 2 * lanes : lanes;
}

// The lanes of a transpose's vectors: a whole cache line where a vector is less. Its tile
// writes kTransposeRows output rows a vector at a time; where the rows lie a multiple of
// 4 KiB apart (a (0, 2, 3, 1) permute of 256 x 56 x 56: 57344 bytes), all of them share
// one set of the L1, more rows than its ways, and a half line written was evicted before
// its other half: at 256 bits the permute took 279 us, with 64-byte vectors 152 us.
int64_t line_lanes(const Stage& o, int64_t lanes, const IterVar& axis) {
  const int64_t line = kCacheLineBytes / dtype_bytes(o.tensor().dtype());
  return lanes < line && axis->extent >= line ? line : lanes;
}

int64_t vector_lanes(const Stage& o, int vector_bits) {
  int64_t lanes = register_lanes(o.tensor().dtype(), vector_bits);
  // Prefer half-width vectors that divide the axis (56 = 7 x 8) to full ones with a
  // masked tail (56 = 3 x 16 + 8).
  int64_t last = o.axes().back()->extent;
  if (last % lanes != 0 && lanes >= 16 && last % (lanes / 2) == 0) lanes /= 2;
  return lanes;
}

// The second anchor R2 of a two-anchor group (see schedule_two_anchors), or null when the
// group does not have that form; `dep[j]`: R1 reads R2 along R1's axis j.
Stage* second_anchor(Schedule& sch, const Stage& o, const PrimExpr& body, const Stage& r1,
                     const PrimExpr& r1_body, std::vector<bool>& dep) {
  const size_t n = o.axes().size();
  if (n < 2 || !reads_elementwise(body, o, r1)) return nullptr;
  Stage* r2 = nullptr;
  for (auto& s : sch.stages()) {
    if (s.get() == &r1 || !is_reduction(*s) || !reads_tensor(r1_body, *s)) continue;
    if (r2 || s->attach_kind() != AttachKind::Root || s->axes().size() != n) return nullptr;
    r2 = s.get();
  }
  if (!r2 || reads_tensor(body, *r2)) return nullptr;
  for (auto& s : sch.stages())
    if (s.get() != &r1 && s.get() != r2 && s->attach_kind() != AttachKind::Inline &&
        reads_tensor(sch.expanded_body(*s), *r2))
      return nullptr;
  const TensorNode* t2 = r2->tensor().operator->();
  dep.assign(n, false);
  for (size_t j = 0; j < n; ++j) dep[j] = reads_along(r1_body, t2, r1.axes()[j]->var.get());
  // R1 must read R2 along its innermost axis; a reduction over R2's rows (a global pooling)
  // is attached into R1's reduction loop instead (attach_into_reduction).
  bool any_tile = false;
  for (size_t j = 0; j + 1 < n; ++j) any_tile |= dep[j];
  if (!dep[n - 1] || !any_tile) return nullptr;
  return r2;
}

// The register tile's axis of a two-anchor group (-1: none): one whose vector loads R1
// shares, else one that R1 reads R2 at unchanged and whose vector loads R2 shares
// (`d_in_r2` then).
int two_anchor_tile_axis(const PrimExpr& body, const Stage& o, const Stage& r1,
                         const PrimExpr& r1_body, const Stage& r2, bool& d_in_r2) {
  const size_t n = o.axes().size();
  const TensorNode* t2 = r2.tensor().operator->();
  int d = register_tile_axis(body, o, r1);
  d_in_r2 = false;
  for (int k = static_cast<int>(n) - 2; d < 0 && k >= 0; --k) {
    if (r1.axes()[k]->extent < kTile || !vector_input_ignores(r2, k)) continue;
    bool same = true;
    visit_prim(r1_body, [&](const PrimExpr& e) {
      auto* p = e.as<ProducerLoadNode>();
      if (p && p->producer.get() == t2) same &= p->indices[k].get() == r1.axes()[k]->var.get();
    });
    if (same) d = k, d_in_r2 = true;
  }
  return d;
}

// Do R1's windows overlap along the rows (axis `rows`, 3x3/2 pooling), so that
// neighbouring outputs share R2's rows?
bool windows_overlap(const PrimExpr& r1_body, const Stage& r1, const TensorNode* t2, int rows) {
  bool overlap = false;
  visit_prim(r1_body, [&](const PrimExpr& e) {
    auto* p = e.as<ProducerLoadNode>();
    if (!p || p->producer.get() != t2) return;
    VarRanges window, step{{r1.axes()[rows]->var.get(), {0, 1}}};
    for (auto& a : r1.reduce_axes()) window[a->var.get()] = {0, a->extent - 1};
    PrimExpr index = simplify(unclamped(p->indices[rows]));
    auto w = bound(index, window), s = bound(index, step);
    overlap |= w && s && w->second > s->second - 1;
  });
  return overlap;
}

// R2's tile inside the two-anchor tile loop `tile` (see the comment below), with its
// register tile on axis `d` of `tile_rows` rows when `d_in_r2`.
void schedule_second_anchor(Schedule& sch, Stage& o, Stage& r1, Stage* r2, const IterVar& tile,
                            int d, bool d_in_r2, int64_t tile_rows, int vector_bits) {
  const size_t n = o.axes().size();
  // R2's tile spans whole rows (windows at a row's ends would clip a narrower tile and
  // mask every accumulation), so it gets vectors of its own width. It accumulates in a
  // register tile of its own (cache_write), as a conv alone does. The elementwise ops between
  // R2 and R1 (bias, activation) are applied there once per element, rather than once per
  // window that reads the element: the last of them, E, is the tile R1 reads.
  Stage& acc = sch[sch.cache_write(r2->tensor())];
  Stage* e = r2;
  for (auto& st : sch.stages())
    if (st->attach_kind() == AttachKind::Inline && !is_reduction(*st) && st->axes().size() == n &&
        reads_elementwise(sch.expanded_body(*st), *st, *r2))
      e = st.get();
  e->compute_at(o, tile);
  if (e != r2 && reads_tensor(sch.expanded_body(r1), *r2)) {
    e->compute_inline();  // R1 also reads R2 around E (two separate branches): keep R2
    e = r2;
    e->compute_at(o, tile);
  }
  if (e != r2) r2->compute_inline();
  IterVar outer2, vec2 = e->axes().back();
  int64_t lanes2 = vector_lanes(*e, vector_bits);
  if (vec2->extent > lanes2) std::tie(outer2, vec2) = e->split(vec2, lanes2);
  std::vector<IterVar> order2;
  for (size_t k = 0; k + 1 < n; ++k)
    if (!(d_in_r2 && static_cast<int>(k) == d)) order2.push_back(e->axes()[k]);
  if (outer2) order2.push_back(outer2);
  IterVar at = order2.back();
  if (d_in_r2) order2.push_back(e->axes()[d]);
  order2.push_back(vec2);
  e->reorder(order2);
  e->vectorize(vec2);
  acc.compute_at(*e, at);
  if (d_in_r2)
    schedule_register_tile(acc, d, RegisterTile{tile_rows, 1, lanes2});
  else
    schedule_reduction_tile(acc, true);
}

// The widest divisor of `extent` up to the accumulators that cover the FMA latency, each
// `regs` registers, within the registers (four left for the loads).
int64_t rows_covering_fma_latency(const MachineModel& m, int64_t extent, int64_t regs) {
  int64_t want = std::max<int64_t>(1, m.fma_ports * m.fma_latency / regs);
  want = std::min<int64_t>({want, extent, (m.vector_registers - 4) / regs});
  while (want > 1 && extent % want != 0) --want;
  return std::max<int64_t>(want, 1);
}

// Registers per vector of `s`'s innermost axis (a row of 12 floats is one AVX-512 register).
int64_t registers_per_vector(const MachineModel& m, const Stage& s, int vector_bits) {
  const int64_t full = m.lanes(s.tensor().dtype());
  return (vector_lanes(s, vector_bits) + full - 1) / full;
}

// Two anchors in one kernel: the output O reads a reduction R1 (a pooling, a pointwise conv)
// that reads another reduction R2 (the conv before it) through windows or across channels:
//
//   parallel for T in fuse(the outer axes that R1's reads of R2 depend on):
//     R2 tile: what R1 reads below T (bound inference: window rows, all input channels)
//     for the other axes (a pointwise conv's output channels, the vectors of a row):
//       R1 tile (kTile x lanes register tile where an axis allows it)
//       vectorized: O = epilogue
//
// Axes that R2's region does not depend on loop inside T, so R2 is computed once per tile,
// not once per output channel of a pointwise conv. A conv under a pooling computes the rows
// that neighbouring windows share once per tile row (3x3/2 pooling: 3 conv rows per row).
// The register tile is on an axis whose vector loads R1 shares (a pointwise conv's output
// channel) or, failing that, on an axis that R1 reads R2 at unchanged and whose vector
// loads R2 shares (the channel of a conv under a pooling). Returns false, changing
// nothing, when the group does not have this form.
IterVar schedule_two_anchors(Schedule& sch, Stage& o, const PrimExpr& body, Stage& r1,
                             const MachineModel& machine, const ScheduleKnobs& knobs,
                             KnobSpace& space) {
  const int vector_bits = machine.vector_bits;
  const size_t n = o.axes().size();
  PrimExpr r1_body = sch.expanded_body(r1);
  std::vector<bool> dep;
  Stage* r2 = second_anchor(sch, o, body, r1, r1_body, dep);
  if (!r2) return nullptr;
  const int64_t lanes = vector_lanes(o, vector_bits);
  bool d_in_r2 = false;
  int d = two_anchor_tile_axis(body, o, r1, r1_body, *r2, d_in_r2);

  // Windows that overlap along the rows (3x3/2 pooling) share R2's rows between
  // neighbouring outputs: a tile of kRows output rows computes each shared row once.
  const int rows = static_cast<int>(n) - 2;
  bool overlap = windows_overlap(r1_body, r1, r2->tensor().operator->(), rows);
  std::vector<IterVar> axes = o.axes();
  IterVar d_inner, rows_inner, last_outer, last_vec = axes.back();
  int64_t tile_rows = kTile;
  // A conv under a pooling: the rows are its channels, each one accumulator of its row's
  // vector, so they take what the FMA latency needs (4 spent half of it: conv + 2x2/2 max
  // pooling over 16 channels of 10 x 12, 1.07x its separate kernels).
  if (d >= 0 && d_in_r2)
    tile_rows = rows_covering_fma_latency(machine, axes[d]->extent,
                                          registers_per_vector(machine, *r2, vector_bits));
  if (d >= 0)
    tile_rows = tuned_register_tile(RegisterTile{tile_rows, 1, lanes}, axes[d]->extent, lanes,
                                    o.tensor().dtype(), machine, knobs, space)
                    .rows;
  if (d >= 0) std::tie(axes[d], d_inner) = o.split(axes[d], tile_rows);
  if (overlap && rows != d && axes[rows]->extent >= 2 * kRows)
    std::tie(axes[rows], rows_inner) = o.split(axes[rows], kRows);
  if (axes.back()->extent > lanes) std::tie(last_outer, last_vec) = o.split(axes.back(), lanes);
  if (last_vec->extent > 1) o.vectorize(last_vec);
  std::vector<IterVar> tile_axes, inner_axes, order;
  for (size_t j = 0; j + 1 < n; ++j) (dep[j] ? tile_axes : inner_axes).push_back(axes[j]);
  if (rows_inner) inner_axes.push_back(rows_inner);
  if (last_outer) inner_axes.push_back(last_outer);
  order = tile_axes;
  order.insert(order.end(), inner_axes.begin(), inner_axes.end());
  if (d_inner) order.push_back(d_inner);
  order.push_back(last_vec);
  o.reorder(order);
  IterVar tile = o.fuse(tile_axes);
  o.parallel(tile);

  r1.compute_at(o, inner_axes.empty() ? tile : inner_axes.back());
  if (d >= 0)
    schedule_register_tile(r1, d, RegisterTile{tile_rows, 1, lanes},
                           tuned_unroll(1, inner_reduce_extent(r1), knobs, space));
  else
    schedule_reduction_tile(r1, true);
  schedule_second_anchor(sch, o, r1, r2, tile, d, d_in_r2, tile_rows, vector_bits);
  return tile;
}

int64_t tensor_bytes(const Stage& s) {
  int64_t n = dtype_bytes(s.tensor().dtype());
  for (auto& a : s.axes()) n *= a->extent;
  return n;
}

// Does `o` read, besides the reduction `r`, a tensor with as many elements as its output?
bool reads_output_sized(const PrimExpr& body, const Stage& o, const Stage& r) {
  int64_t elements = tensor_bytes(o) / dtype_bytes(o.tensor().dtype());
  bool found = false;
  visit_prim(body, [&](const PrimExpr& e) {
    auto* p = e.as<ProducerLoadNode>();
    if (!p || p->producer == r.tensor().ref()) return;
    int64_t n = 1;
    for (int64_t d : p->producer->shape) n *= d;
    found |= n == elements;
  });
  return found;
}

// schedule_output's decisions, one phase per method, each reading what the earlier ones
// decided: the register tile's shape (size_register_tile), the splits of o's axes
// (split_axes), the parallel tile loop (choose_tile_loop), and the stages computed inside
// it (attach_in_tile).
struct OutputTiling {
  OutputTiling(Schedule& sch, Stage& o, const MachineModel& machine, const ScheduleKnobs& knobs,
               KnobSpace& space, std::vector<IterVar> axes, PrimExpr body,
               std::vector<Stage*> reds);
  void size_register_tile();
  void split_axes();
  bool choose_tile_loop();  // tries tile_templates() in order
  void prepare_tile_loop();
  // The templates' conditions and their tilings.
  bool transposes() const;
  void tile_transpose();
  bool computes_padded_rows() const;
  void tile_padded_rows();
  bool depthwise_padded() const;
  void tile_depthwise_rows();
  bool register_tiled() const;
  void tile_register_tiles();
  bool chunk_conv_block();
  bool has_rows() const;
  void tile_row_statistics();
  bool has_vectors() const;
  void parallel_vectors();
  void block_short_rows(std::vector<IterVar>& tile_axes, size_t used);
  void attach_in_tile();
  std::string classify_anchor() const;
  std::string template_name() const { return anchor_kind + "." + path; }

  Schedule& sch;
  Stage& o;
  const int vector_bits;
  const ScheduleKnobs& knobs;
  KnobSpace& space;
  std::vector<IterVar> axes;  // o's axes; a split axis is replaced by its outer part
  PrimExpr body;              // re-expanded when a GEMV's reduction becomes partial sums
  std::vector<Stage*> reds;
  const MachineModel machine;
  IterVar last;
  bool along = true;  // o reads every reduction along its innermost axis
  // What the anchor is (classify_anchor) and which path through the decisions below its
  // tiling took: together the template name that reports show.
  std::string anchor_kind;
  const char* path = "root";
  // size_register_tile
  bool tiled = false;
  int tile_axis = -1;
  RegisterTile rt;
  bool dot = false;           // a GEMV's outputs as dot products along K
  int64_t partial_sums = 1;   // a GEMV's reduction as independent partial sums (tuning)
  DotRows dot_rows;           // a GEMV's dot products (choose_dot_rows)
  Stage* dot_part = nullptr;  // their vector partials, where rows compute them together
  // split_axes
  IterVar tile_inner, outer_vec;
  int64_t k_chunk = 0;  // chunk_conv_block: the reduction in chunks, the pixels inside
  // choose_tile_loop
  bool row_tile = false;  // no reductions: a row of outputs is the parallel grain
  std::vector<IterVar> outer;
  std::vector<Stage*> pads, row_gemms;
  int64_t row_block = 1;
  IterVar tile, reduction_at;
};

OutputTiling::OutputTiling(Schedule& sch, Stage& o, const MachineModel& machine,
                           const ScheduleKnobs& knobs, KnobSpace& space, std::vector<IterVar> axes,
                           PrimExpr body, std::vector<Stage*> reds)
    : sch(sch),
      o(o),
      vector_bits(machine.vector_bits),
      knobs(knobs),
      space(space),
      axes(std::move(axes)),
      body(std::move(body)),
      reds(std::move(reds)),
      machine(machine) {
  last = this->axes.back();
  for (Stage* r : this->reds)
    along &= reads_along(this->body, r->tensor().operator->(), last->var.get());
  anchor_kind = classify_anchor();
}

// Is `r` a sum of products of two tensors (a conv's or a GEMM's, not a pooling's)?
bool sums_products(const Stage& r) {
  auto* red = r.body().as<ReduceNode>();
  auto* mul = red && red->op == ReduceOp::Sum ? red->source.as<BinaryNode>() : nullptr;
  if (!mul || mul->op != BinaryOp::Mul) return false;
  std::set<const void*> read[2];
  for (int side = 0; side < 2; ++side)
    visit_prim(side ? mul->b : mul->a, [&](const PrimExpr& e) {
      if (auto* p = e.as<ProducerLoadNode>()) read[side].insert(p->producer.get());
    });
  if (read[0].empty() || read[1].empty()) return false;
  for (const void* t : read[0])
    if (read[1].count(t)) return false;
  return true;
}

// The anchor's kind, from its loop nest alone: what reports name the template by. (A
// pointwise conv in the blocked layout has image axes: [N, C/c, H, W, c].)
std::string OutputTiling::classify_anchor() const {
  if (reds.empty()) return transposed_axis(body, o) >= 0 ? "transpose" : "elementwise";
  if (!along) return "row_statistic";
  const Stage& r = *reds[0];
  if (!sums_products(r)) return reads_window(r) ? "pool" : "reduction";
  if (reads_window(r)) return window_only(r) ? "depthwise_conv" : "conv";
  if (one_row(axes) && sums_a_broadcast_product(sch, r)) return "gemv";
  return axes.size() >= 4 ? "pointwise_conv" : "gemm";
}

// A reduction read elementwise along the vector axis (conv, dense, matmul, pooling) is
// computed as a register tile: rows of the axis whose vector input it shares, times
// several vectors of the innermost axis, sized by the machine model.
void OutputTiling::size_register_tile() {
  tiled = along && reds.size() == 1 && reads_elementwise(body, o, *reds[0]);
  // A GEMV over weight rows contiguous along K ([N, K], or nn.dense_lanes' [K/L, N, L]: what
  // AlterOpLayout makes where no vector divides N): a register tile along N would gather each
  // vector across N rows; each output is a dot product along K instead (choose_dot_rows).
  if (tiled && one_row(axes) && contiguous_along_reduction(*reds[0]) &&
      sums_a_broadcast_product(sch, *reds[0])) {
    tiled = false;
    dot = true;
  }
  tile_axis = tiled ? register_tile_axis(body, o, *reds[0], 2) : -1;
  if (tile_axis >= 0) {  // tuning may take another axis whose rows share the vector loads
    std::vector<int> choices;
    for (int d = 0; d + 1 < static_cast<int>(axes.size()); ++d)
      if (axes[d]->extent >= 2 && vector_input_ignores(*reds[0], d)) choices.push_back(d);
    tile_axis = tuned_tile_axis(tile_axis, choices, knobs, space);
  }
  // No axis shares the vector loads (a depthwise conv in NCHW reads its own input rows for
  // every output row): rows of the axis outside the vectors still give independent
  // accumulators, each row loading its own vectors under a shared broadcast.
  const bool rows_share = tile_axis >= 0;
  if (tiled && tile_axis < 0 && axes.size() >= 2 && axes[axes.size() - 2]->extent >= 2)
    tile_axis = static_cast<int>(axes.size()) - 2;
  rt = RegisterTile{1, 1, vector_lanes(o, vector_bits)};
  // Row statistics (reductions read across the vectors: a norm's) leave the output's
  // vectors free for a long chain too: instance norm -> selu over 64 x 56 x 56 at 256 bits
  // took 232-254 us fused in one register a vector, 114 us in its two kernels; now the
  // fused kernel (141 us) is priced honestly and FuseOps keeps the two.
  if ((reds.empty() || !along) && transposed_axis(body, o) < 0)
    rt.lanes = chain_lanes(body, rt.lanes, last);
  else if (reds.empty())
    rt.lanes = line_lanes(o, rt.lanes, last);
  if (dot) {
    // A short row that the vectors do not divide is one tile of the whole row: shifted
    // tiles would compute some outputs twice (10 at 256 bits: tiles of 8 from 0 and 2,
    // 1.03 us; one of 10, 0.65 us on Zen 5).
    if (last->extent % rt.lanes != 0 &&
        last->extent <= 2 * register_lanes(o.tensor().dtype(), vector_bits))
      rt.lanes = last->extent;
    const int64_t k = inner_reduce_extent(*reds[0]);
    dot_rows = choose_dot_rows(machine, o.tensor().dtype(), k, std::min(last->extent, rt.cols()));
    if (dot_rows.lanes)
      dot_part = &sch[sch.rfactor(reds[0]->tensor(), dot_rows.lanes * dot_rows.vectors, true)];
  }
  if (tiled) {
    int64_t tile_rows = tile_axis >= 0 ? axes[tile_axis]->extent : 1;
    // Rows that share the vectors reuse each column tile's panel from the L2 (a GEMV's one
    // row streams it once).
    const int64_t panel_k = rows_share && tile_rows > 1 ? inner_reduce_extent(*reds[0]) : 0;
    // Column tiles may shift back where the vector input runs along the output's columns
    // (a conv's input row in NCHW), not in panels (a packed dense weight: a shifted vector
    // would straddle two panels).
    const Tensor vin = vector_input(*reds[0]);
    const bool shift_columns = vin && vin->shape.back() >= last->extent;
    rt = choose_register_tile(machine, tile_rows, last->extent, o.tensor().dtype(), rows_share,
                              weights_from_l3(*reds[0], machine, last->extent), panel_k,
                              shift_columns);
    // A one-row tile (a GEMV: a batch-1 dense streams its weights once) may take any number
    // of vectors (the last column tile shifted back), and its reduction may run as partial
    // sums: independent accumulator chains, added in the epilogue (by default only
    // for a sum of one tensor: default_partial_sums).
    rt = tuned_register_tile(rt, tile_rows, last->extent, o.tensor().dtype(), machine, knobs, space,
                             tile_rows == 1);
    if (tile_rows == 1) {
      const int64_t k = inner_reduce_extent(*reds[0]);
      partial_sums = tuned_partial_sums(default_partial_sums(sch, o, *reds[0], rt, k, machine), k,
                                        knobs, space);
    }
  }
  if (partial_sums > 1) {
    Tensor part = sch.rfactor(reds[0]->tensor(), partial_sums);
    reds[0]->compute_inline();
    reds[0] = &sch[part];
    body = sch.expanded_body(o);
  }
  if (rt.rows == 1) tile_axis = -1;
}

// Splits o's axes into the register tile's rows and vectors (unrolled inside) and the
// loops outside them.
void OutputTiling::split_axes() {
  if (tile_axis >= 0)
    std::tie(axes[tile_axis], tile_inner) = o.split(axes[tile_axis], rt.rows, SplitTail::Shift);

  IterVar vec_group, inner_vec = last;
  // A row that the tile's columns do not divide (54 pixels of an unpadded 3x3 conv in NCHW)
  // shifts its last tile back over columns already computed: a guard would run every lane
  // on its own (a conv's accumulation 17x slower, an elementwise row 3x). A kernel's
  // outputs never share memory with its inputs, so computing a column twice is harmless.
  if (last->extent > rt.cols())
    std::tie(outer_vec, inner_vec) = o.split(last, rt.cols(), SplitTail::Shift);
  if (rt.vectors > 1) std::tie(vec_group, inner_vec) = o.split(inner_vec, rt.lanes);
  if (inner_vec->extent > 1) o.vectorize(inner_vec);
  if (tile_inner || vec_group) {
    // [.., d.o, d.i, .., last.o, g, v] -> [.., d.o, .., last.o, d.i, g, v]
    std::vector<IterVar> order;
    for (auto& a : o.leaf_axes())
      if (a != tile_inner && a != vec_group && a != inner_vec) order.push_back(a);
    for (auto& a : {tile_inner, vec_group, inner_vec})
      if (a) order.push_back(a);
    o.reorder(order);
    // The epilogue walks the register tile unrolled: every access to the tile then has a
    // constant index, so the tile stays in registers (a long epilogue such as GELU's erf
    // would otherwise keep LLVM from unrolling it, and the accumulators would go to memory).
    if (tile_inner) o.unroll(tile_inner);
    if (vec_group) o.unroll(vec_group);
  }
  // A GEMM's tile loop runs along the output columns outside the rows: the weight panel
  // of a column tile stays in cache while the rows stream past it.
  if (tile_inner && outer_vec && tile_axis + 2 == static_cast<int>(axes.size())) {
    std::swap(axes[tile_axis], outer_vec);
    std::vector<IterVar> order(o.leaf_axes().begin(), o.leaf_axes().end());
    auto a = std::find(order.begin(), order.end(), axes[tile_axis]);
    auto b = std::find(order.begin(), order.end(), outer_vec);
    std::iter_swap(a, b);
    o.reorder(order);
  }
}

// The tile loop: reductions are computed inside it, so it must enclose the vector loop.
// Returns false when there is none (the reductions stay root nests, computed before o).
// The tile-loop templates, tried in order; the first that applies tiles `o`. Each reads
// what size_register_tile and split_axes decided (a register tile, o's split axes) and the
// shared facts prepare_tile_loop gathered (o's outer axes, whether a row is the parallel
// grain, the padded inputs computed per tile).
struct TileTemplate {
  const char* name;
  bool (OutputTiling::*applies)() const;
  void (OutputTiling::*apply)();
};

const std::vector<TileTemplate>& tile_templates() {
  static const std::vector<TileTemplate> list = {
      {"tiles", &OutputTiling::transposes, &OutputTiling::tile_transpose},
      {"padded_rows", &OutputTiling::computes_padded_rows, &OutputTiling::tile_padded_rows},
      {"depthwise_rows", &OutputTiling::depthwise_padded, &OutputTiling::tile_depthwise_rows},
      {"register_tile", &OutputTiling::register_tiled, &OutputTiling::tile_register_tiles},
      {"row_blocks", &OutputTiling::has_rows, &OutputTiling::tile_row_statistics},
      {"vector_loop", &OutputTiling::has_vectors, &OutputTiling::parallel_vectors},
  };
  return list;
}

bool OutputTiling::choose_tile_loop() {
  prepare_tile_loop();
  for (const TileTemplate& t : tile_templates())
    if ((this->*t.applies)()) {
      path = t.name;
      (this->*t.apply)();
      break;
    }
  // Variants a template's own decisions make (the names reports show).
  if (k_chunk) path = "chunked";
  if (!row_gemms.empty()) path = "gemm_row_block";
  if (path == std::string("register_tile") && !tiled) path = "vector_tiles";
  if (dot) path = dot_part ? "dot_rows" : "rows";
  if (partial_sums > 1) path = "partial_sums";
  return tile != nullptr;
}

void OutputTiling::prepare_tile_loop() {
  outer.assign(axes.begin(), axes.end() - 1);
  int64_t rows = 1;
  for (auto& a : outer) rows *= a->extent;
  // Without reductions the tile only sets the parallel grain: whole rows, unless there are
  // too few rows to keep the threads busy (per-iteration index arithmetic is not free).
  row_tile = reds.empty() && rows >= 64;
  for (auto& st : sch.stages())
    if (tiled && st->attach_kind() == AttachKind::Root && !is_reduction(*st) &&
        padded_input_of_reduction(sch, *st) && windowed_pad(*reds[0], *st))
      pads.push_back(st.get());
}

bool OutputTiling::transposes() const {
  return reds.empty() && outer_vec && transposed_axis(body, o) >= 0;
}

bool OutputTiling::computes_padded_rows() const {
  return along && outer_vec && !row_tile && !pads.empty() && outer.size() >= 2;
}

// The tile is a block of whole rows: the padded rows it reads are computed once per tile
// (kPadRows + window - 1 of them: 1.1x the rows for a 3x3 window; 4 rows gave 1.5x and a 22%
// slower forum net), then the register tiles walk the rows.
void OutputTiling::tile_padded_rows() {
  IterVar& rows = outer.back();
  int64_t pad_rows = tuned_pad_rows(kPadRows, rows->extent, knobs, space);
  if (rows->extent >= 2 * pad_rows) rows = o.split(rows, pad_rows).first;
  tile = o.fuse(outer);
  reduction_at = outer_vec;
}

bool OutputTiling::depthwise_padded() const {
  return along && tile_inner && !outer_vec && !row_tile && !pads.empty() && tile_axis >= 1 &&
         tile_axis + 2 == static_cast<int>(axes.size()) && window_only(*reds[0]);
}

bool OutputTiling::register_tiled() const { return along && (outer_vec || tile_inner) && !row_tile; }

bool OutputTiling::has_rows() const { return !outer.empty(); }

bool OutputTiling::has_vectors() const { return static_cast<bool>(outer_vec); }

void OutputTiling::parallel_vectors() {
  o.parallel(outer_vec);
  if (along) tile = outer_vec;
}

// A transpose (o's innermost axis reads an input across its rows): kTransposeRows values
// of the axis that walks the input's rows loop just outside o's innermost axis, so each
// cache line of the input serves that many outputs while it is in L1. Without this, a line
// is reused only after a whole plane (256 x 56 x 56 with axes (0, 3, 2, 1): 1.4x slower
// than two transposes that each keep their reads near).
void OutputTiling::tile_transpose() {
  const int a = transposed_axis(body, o);
  IterVar a_in = o.split(axes[a], kTransposeRows, SplitTail::Shift).second;
  // [.., a.o, a.i, .., last.o, last.i] -> [.., a.o, .. | last.o, a.i, last.i]
  std::vector<IterVar> tile_axes, inner;
  bool after = false;
  for (auto& x : o.leaf_axes()) {
    if (x == outer_vec) after = true;
    if (x != a_in && x != outer_vec) (after ? inner : tile_axes).push_back(x);
  }
  std::vector<IterVar> order = tile_axes;
  order.push_back(outer_vec);
  order.push_back(a_in);
  order.insert(order.end(), inner.begin(), inner.end());
  o.reorder(order);
  tile = o.fuse(tile_axes);
}

// A blocked depthwise conv (its reduction is its window alone) with a padded input: the
// tile is a block of at most kPadRows output rows of one channel block, whose padded input
// rows are computed once per tile while in cache; the register tiles walk the rows inside.
// Blocks are smaller where there are fewer than kMinTiles channel blocks, so that the
// threads have tiles to share. Padding the whole input first read and wrote it once more
// than the conv reads it (MobileNetV2's 112x112 depthwise convs ran at 5 GB/s; the model
// is 18% faster this way).
void OutputTiling::tile_depthwise_rows() {
  constexpr int64_t kMinTiles = 4;
  IterVar& rows = outer[tile_axis - 1];
  std::vector<IterVar> tile_axes(outer.begin(), outer.begin() + tile_axis - 1);
  int64_t channel_tiles = 1;
  for (const IterVar& a : tile_axes) channel_tiles *= a->extent;
  const int64_t blocks = (kMinTiles + channel_tiles - 1) / channel_tiles;
  int64_t pad_rows = std::min(kPadRows, (rows->extent + blocks - 1) / blocks);
  pad_rows = tuned_pad_rows(pad_rows, rows->extent, knobs, space);
  if (pad_rows < rows->extent) {
    rows = o.split(rows, pad_rows).first;
    tile_axes.push_back(rows);
  }
  tile = o.fuse(tile_axes);
  reduction_at = outer.back();
}

// Every axis outside the register tile is a tile axis: the reduction is computed one
// register tile at a time (a blocked conv's row of pixels x a vector of channels).
void OutputTiling::tile_register_tiles() {
  pads.clear();
  if (outer_vec) outer.push_back(outer_vec);
  if (tile_axis >= 0 && !outer_vec && chunk_conv_block()) return;
  // (reds[0] exists when tile_axis >= 0: the register tile is on a single reduction.)
  if (tile_axis >= 0 && !outer_vec &&
      tuned_loop_order(
          weights_stream_inside(*reds[0], machine) &&
              !(reads_output_sized(body, o, *reds[0]) && tensor_bytes(o) > machine.l2_bytes),
          knobs, space)) {
    // Axes that only the vector input (a conv's weights) depends on loop innermost: the
    // broadcast input's tile stays in L1 while the weights stream past (weights_stream_inside).
    // Not when the epilogue also reads a tensor as large as the output (a residual) and
    // the output is larger than the L2: each tile would then touch two memory streams per
    // output-channel block, which defeats the prefetchers (ResNet-50's expanding 1x1
    // convs with their residual add: 30% slower that way).
    std::stable_partition(outer.begin(), outer.end(), [&](const IterVar& a) {
      int k = static_cast<int>(std::find(axes.begin(), axes.end(), a) - axes.begin());
      return k == tile_axis || a->extent == 1 || vector_input_ignores(*reds[0], k) ||
             !input_ignores(*reds[0], k);
    });
    o.reorder(outer);
  }
  tile = o.fuse(outer);
}

// A conv whose weight panel per output-channel block overflows half the L1 while its whole
// block of pixels (the axes the weights ignore) fits there (ResNet's 7x7 and 14x14 3x3
// convs, 7x7 1x1 convs with 4 MB of weights; layer4's 3x3 and 1x1 convs 15-25% faster):
// the tile is one output-channel block, whose pixels loop inside it, and the reduction runs
// in chunks (choose_k_chunk), each chunk of weights read from L1 by every pixel tile.
bool OutputTiling::chunk_conv_block() {
  // A 1x1 conv whose weights stream inside (weights_stream_inside) keeps that order: its
  // input block per chunk would not fit the L1 (ResNet's 14x14 1x1 convs: no faster).
  if (!reads_window(*reds[0]) && weights_stream_inside(*reds[0], machine)) return false;
  std::vector<IterVar> tile_axes, inner;
  int64_t block_bytes = rt.cols() * dtype_bytes(o.tensor().dtype()), tiles = 1;
  for (auto& a : outer) {
    int k = static_cast<int>(std::find(axes.begin(), axes.end(), a) - axes.begin());
    bool pixels = a->extent > 1 && vector_input_ignores(*reds[0], k);
    (pixels ? inner : tile_axes).push_back(a);
    if (k == tile_axis)
      block_bytes *= a->extent * rt.rows;
    else if (pixels)
      block_bytes *= a->extent;
    else
      tiles *= a->extent;
  }
  if (inner.empty() || tiles < 4 || block_bytes > machine.l1_bytes / 2) return false;
  k_chunk = tuned_k_chunk(choose_k_chunk(machine, *reds[0], rt),
                          reds[0]->reduce_axes().front()->extent, knobs, space);
  if (!k_chunk) return false;
  std::vector<IterVar> order = tile_axes;
  order.insert(order.end(), inner.begin(), inner.end());
  o.reorder(order);
  tile = o.fuse(tile_axes);
  return true;
}

// The reductions do not depend on the innermost axis (a row statistic): the tile is the
// leading axes they do depend on, so each statistic is computed once per tile, and the
// remaining axes loop inside it (a norm over several trailing axes).
void OutputTiling::tile_row_statistics() {
  size_t used = reds.empty() ? outer.size() : 1;
  for (size_t d = 0; d < outer.size(); ++d)
    for (Stage* r : reds)
      if (reads_along(body, r->tensor().operator->(), outer[d]->var.get()))
        used = std::max(used, d + 1);
  std::vector<IterVar> tile_axes(outer.begin(), outer.begin() + used);
  // A GEMM under a row statistic (dense -> add -> layer norm): the tile is a block of rows
  // whose GEMM output fits in L2, computed once with the GEMM's register tiles, then
  // reduced and normalised from cache; the GEMM never runs twice.
  for (Stage* r : reds)
    if (reds.size() > 1 && register_tile_axis(body, o, *r, 2) == static_cast<int>(used) - 1)
      row_gemms.push_back(r);
  if (!row_gemms.empty()) {
    IterVar& rows = tile_axes.back();
    row_block =
        choose_row_block(machine, rows->extent, last->extent * dtype_bytes(o.tensor().dtype()));
    row_block = tuned_row_block(row_block, rows->extent, knobs, space);
    if (row_block < rows->extent)
      rows =
          o.split(rows, row_block, rows->extent % row_block ? SplitTail::Shift : SplitTail::Guard)
              .first;
  } else {
    block_short_rows(tile_axes, used);
  }
  tile = o.fuse(tile_axes);
}

// Short rows (a layer norm over 16 values): one row per tile leaves each row's reductions,
// a chain of dependent steps, in series with its epilogue (a fused GELU waited for them:
// 2x the unfused pair). A block of rows up to kStatBlockBytes computes the statistics of
// all its rows, then their outputs: independent rows the core overlaps.
void OutputTiling::block_short_rows(std::vector<IterVar>& tile_axes, size_t used) {
  // A row's size is what it writes or what one of its statistics reads, the larger (a sum of
  // squares over 768 values per 4 outputs is no short row: blocked, it lost its threads).
  int64_t elements = last->extent;
  for (size_t d = used; d < outer.size(); ++d) elements *= outer[d]->extent;
  for (Stage* r : reds) {
    int64_t reduced = 1;
    for (const IterVar& a : r->reduce_axes()) reduced *= a->extent;
    elements = std::max(elements, reduced);
  }
  const int64_t row_bytes = dtype_bytes(o.tensor().dtype()) * elements;
  // When every row of the kernel fits one block, the rows of all tile axes are one block: a
  // layer norm over [2, 3, 16] in blocks of 3 rows left each block's statistics, a chain
  // the next block's could not overlap, behind its epilogue (fused with celu 132 ns, one
  // block of 6 rows 95 ns on Zen 5).
  int64_t all_rows = 1;
  for (const IterVar& a : tile_axes) all_rows *= a->extent;
  if (tile_axes.size() > 1 && all_rows * row_bytes <= kStatBlockBytes)
    tile_axes = {o.fuse(tile_axes)};
  IterVar& rows = tile_axes.back();
  int64_t block = 1;
  for (int64_t b = 2; b <= rows->extent && b * row_bytes <= kStatBlockBytes; ++b)
    if (rows->extent % b == 0) block = b;
  if (block > 1) rows = o.split(rows, block).first;
}

// Runs the tile loop in parallel and computes the padded inputs and the reductions inside
// it, each with its own tiling.
void OutputTiling::attach_in_tile() {
  o.parallel(tile);

  for (Stage* p : pads) {
    p->compute_at(o, tile);
    IterVar last_p = p->axes().back();
    int64_t lanes_p = vector_lanes(*p, vector_bits);
    if (last_p->extent > lanes_p) last_p = p->split(last_p, lanes_p).second;
    p->vectorize(last_p);
  }
  if (dot_part) {
    dot_part->compute_at(o, tile);
    schedule_dot_rows(*dot_part, dot_rows);
  }
  for (Stage* r : reds) {
    r->compute_at(o, reduction_at ? reduction_at : tile);
    if (std::find(row_gemms.begin(), row_gemms.end(), r) != row_gemms.end()) {
      DType t = o.tensor().dtype();
      const int64_t k = inner_reduce_extent(*r);
      RegisterTile gt = choose_register_tile(machine, row_block, last->extent, t, true, false, k);
      gt = tuned_register_tile(gt, row_block, last->extent, t, machine, knobs, space);
      schedule_gemm_block(*r, static_cast<int>(r->axes().size()) - 2, gt,
                          tuned_unroll(1, k, knobs, space));
    } else if (partial_sums > 1) {  // the partial sums are the tile's rows
      schedule_register_tile(*r, static_cast<int>(r->axes().size()) - 2,
                             RegisterTile{partial_sums, rt.vectors, rt.lanes},
                             tuned_unroll(1, inner_reduce_extent(*r), knobs, space));
    } else if (k_chunk) {
      schedule_k_chunked_tile(
          *r, tile_axis, rt, k_chunk,
          tuned_unroll(default_unroll(*r), inner_reduce_extent(*r), knobs, space));
    } else if (tiled) {
      schedule_register_tile(
          *r, tile_axis, rt,
          tuned_unroll(default_unroll(*r), inner_reduce_extent(*r), knobs, space));
    } else {
      // A statistic per row that the output vectorizes across rows (a log-sum-exp per row
      // of 3072) still sums along the rows: vectorized across 16 rows it ran 4.2x its
      // unfused kernels on Zen 5, whose LLVM turns the strided lanes into gathers.
      schedule_reduction_tile(*r, along && !contiguous_along_reduction(*r));
    }
  }
}

// Names the template of one more output (a group with several outputs lists each).
void add_template(Schedule& sch, const std::string& name) {
  const std::string& now = sch.template_name();
  if (now.empty())
    sch.set_template(name);
  else if (now != name)
    sch.set_template(now + " + " + name);
}

// Tiles `o` (parallel outer, vector inner); returns the loop its reductions attach at.
// `knobs` override its choices where set (tuning); `space` records them.
IterVar schedule_output(Schedule& sch, Stage& o, const MachineModel& machine,
                        const ScheduleKnobs& knobs, KnobSpace& space) {
  std::vector<IterVar> axes = o.axes();
  if (axes.empty()) {
    add_template(sch, "scalar");
    return nullptr;
  }
  PrimExpr body = sch.expanded_body(o);
  std::vector<Stage*> reds = reductions_read(sch, o, body);
  if (reds.size() == 1)
    if (IterVar tile = schedule_two_anchors(sch, o, body, *reds[0], machine, knobs, space)) {
      add_template(sch, "two_anchors");
      return tile;
    }
  OutputTiling t(sch, o, machine, knobs, space, axes, body, reds);
  t.size_register_tile();
  t.split_axes();
  const bool tiled = t.choose_tile_loop();
  add_template(sch, t.template_name());
  if (!tiled) return nullptr;  // reductions stay root nests, computed before this one
  t.attach_in_tile();
  return t.tile;
}

// A reduction R read by another reduction S along S's innermost reduction axis (a sum over
// the rows of a matmul's output, as cuDNN fuses on the GEMM output): R is computed one
// vector tile at a time inside that loop, so R's output never goes to memory.
bool attach_into_reduction(Schedule& sch, Stage& r, int vector_bits) {
  Stage* reader = nullptr;
  for (auto& s : sch.stages()) {
    if (s.get() == &r || !is_reduction(*s)) continue;
    bool reads = false;
    visit_prim(sch.expanded_body(*s), [&](const PrimExpr& e) {
      if (auto* p = e.as<ProducerLoadNode>()) reads |= p->producer == r.tensor().ref();
    });
    if (!reads) continue;
    if (reader) return false;  // read by two reductions: keep it whole
    reader = s.get();
  }
  if (!reader || reader->attach_kind() == AttachKind::Inline) return false;
  auto raxes = reader->reduce_axes();
  if (raxes.empty() || r.axes().empty()) return false;
  IterVar rlast = raxes.back();
  // The reader must walk R's innermost axis with its innermost reduction loop.
  bool along = false;
  visit_prim(sch.expanded_body(*reader), [&](const PrimExpr& e) {
    auto* p = e.as<ProducerLoadNode>();
    if (!p || p->producer != r.tensor().ref()) return;
    along = p->indices.back().get() == rlast->var.get();
  });
  int64_t lanes = register_lanes(r.tensor().dtype(), vector_bits);
  if (!along || rlast->extent <= lanes) return false;
  IterVar outer = reader->split(rlast, lanes).first;
  r.compute_at(*reader, outer);
  schedule_reduction_tile(r, true);
  return true;
}

// A stage with bounds checks (a padded input) read by a reduction: inlined, its checks and
// clamped indices would sit in the innermost loop and turn vector loads into gathers.
bool padded_input_of_reduction(Schedule& sch, const Stage& s) {
  // A bounds check is a select whose condition reads no tensor (only loop indices); a
  // select on values (an activation's threshold) inlines like any elementwise op.
  bool has_select = false;
  visit_prim(s.body(), [&](const PrimExpr& e) {
    auto* sel = e.as<SelectNode>();
    if (!sel) return;
    bool reads = false;
    visit_prim(sel->cond, [&](const PrimExpr& x) {
      reads |= x.kind() == PrimKind::ProducerLoad || x.kind() == PrimKind::Load;
    });
    has_select |= !reads;
  });
  if (!has_select) return false;
  // Padding of a tensor computed in this kernel (a conv under a padded pooling) inlines:
  // the reading reduction then computes only the region it needs (schedule_two_anchors).
  PrimExpr expanded = sch.expanded_body(s);
  for (auto& r : sch.stages())
    if (is_reduction(*r) && reads_tensor(expanded, *r)) return false;
  for (auto& r : sch.stages()) {
    if (!is_reduction(*r)) continue;
    bool reads = false;
    visit_prim(r->body(), [&](const PrimExpr& e) {
      if (auto* p = e.as<ProducerLoadNode>()) reads |= p->producer == s.tensor().ref();
    });
    if (reads) return true;
  }
  return false;
}

// A padded input that `r` reads only through a small window (a depthwise conv, a pooling:
// no reduction over its channels) is cheap to compute per output tile, where it stays in
// cache, instead of in a pass of its own over memory.
bool windowed_pad(const Stage& r, const Stage& pad) {
  auto* red = r.body().as<ReduceNode>();
  if (!red) return false;
  bool reads = false, small = true;
  visit_prim(red->source, [&](const PrimExpr& e) {
    auto* p = e.as<ProducerLoadNode>();
    if (!p || p->producer != pad.tensor().ref()) return;
    reads = true;
    for (auto& a : r.reduce_axes())
      for (auto& i : p->indices)
        visit_prim(i,
                   [&](const PrimExpr& x) { small &= x.get() != a->var.get() || a->extent <= 7; });
  });
  return reads && small;
}

// A root stage that is not an output: parallel outer loops, vectorized inner loop.
void schedule_root(Stage& s, int vector_bits) {
  std::vector<IterVar> axes = s.axes();
  if (axes.empty()) return;
  IterVar last = axes.back();
  int64_t lanes = register_lanes(s.tensor().dtype(), vector_bits);
  if (!is_reduction(s)) lanes = chain_lanes(s.body(), lanes, last);
  if (last->extent > lanes) last = s.split(last, lanes).second;
  if (last->extent > 1) s.vectorize(last);
  if (axes.size() >= 2) s.parallel(s.fuse(std::vector<IterVar>(axes.begin(), axes.end() - 1)));
}

}  // namespace

void apply_default_schedule(Schedule& sch, const MachineModel& machine, const ScheduleKnobs& knobs,
                            KnobSpace* space) {
  const int vector_bits = machine.vector_bits;
  KnobSpace unused;
  // Inline every elementwise/injective intermediate into its readers, except a padded input
  // of a reduction, which is computed once into its own buffer instead.
  for (auto& s : sch.stages()) {
    bool is_output = false;
    for (auto& o : sch.outputs()) is_output |= o.ref() == s->tensor().ref();
    if (is_output || is_reduction(*s)) continue;
    if (!padded_input_of_reduction(sch, *s)) {
      s->compute_inline();
      continue;
    }
    bool windowed = false;
    for (auto& r : sch.stages()) windowed |= is_reduction(*r) && windowed_pad(*r, *s);
    if (!windowed) schedule_root(*s, vector_bits);  // else schedule_output attaches it
  }
  // An output that is itself a reduction gets a local accumulator tile (cache_write), so its
  // stage becomes the tile loop like any epilogue.
  for (auto& o : sch.outputs())
    if (is_reduction(sch[o])) sch.cache_write(o);
  for (auto& o : sch.outputs())
    schedule_output(sch, sch[o], machine, knobs, space ? *space : unused);
  // Windowed pads that no output tile took stay root nests of their own.
  for (auto& s : sch.stages())
    if (s->attach_kind() == AttachKind::Root && !is_reduction(*s) &&
        padded_input_of_reduction(sch, *s) && s->leaf_axes() == s->axes()) {
      bool is_output = false;
      for (auto& o : sch.outputs()) is_output |= o.ref() == s->tensor().ref();
      if (!is_output) schedule_root(*s, vector_bits);
    }
  // Reductions no output reads directly (a reduction of a reduction) are computed a vector
  // tile at a time inside the reading reduction's loop when they can be, else as their own
  // parallel nest, treated like an output.
  // Consumers first, so a reader's loops exist before a producer is attached into them.
  for (auto it = sch.stages().rbegin(); it != sch.stages().rend(); ++it) {
    Stage* s = it->get();
    if (!is_reduction(*s) || s->attach_kind() != AttachKind::Root) continue;
    if (attach_into_reduction(sch, *s, vector_bits)) continue;
    std::vector<IterVar> axes = s->axes();
    if (axes.size() >= 2) {
      schedule_reduction_tile(*s, false);
      std::vector<IterVar> outer(axes.begin(), axes.end() - 1);
      s->parallel(s->fuse(outer));
    } else {
      schedule_reduction_tile(*s, false);
    }
  }
}

}  // namespace ember::passes
