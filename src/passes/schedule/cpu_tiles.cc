// The loop nests of a reduction computed inside an output's tile (default_schedule.cc's
// attach_in_tile and the two-anchor template): a reduction tile, a register tile, a GEMM
// block of register tiles, a register tile accumulated in chunks.
#include <algorithm>

#include "analysis.h"
#include "cpu_schedule.h"

namespace ember::passes::cpu {

using namespace ir;

namespace {

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

}  // namespace

// Reduction loops outside the innermost spatial loop, which is vectorized when asked. A
// row statistic that is not vectorized keeps its reduction loops innermost instead: it
// then reads each row contiguously (LLVM vectorizes the reassociable sum), not one element
// of every row per step (a layer norm over a block of 64 GEMM rows read 64 strided rows).
// Over trailing whole dimensions its loops fuse into one over the row: an instance norm's
// sum over 56 x 56 is then one rolled sum of 3136 that LLVM vectorizes into interleaved
// accumulators, not 56 sums of 56 each ending in a horizontal add (calibration: fused
// trailing reduction loops).
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

// Computes `r`'s loops as a register tile: its reduction loops outside (the innermost one
// `unroll` steps at a time), then `d` (when >= 0) unrolled, then the innermost axis as
// `tile.vectors` unrolled vectors. Every accumulator of the tile then lives in a register
// for the whole reduction.
void schedule_register_tile(Stage& r, int d, const RegisterTile& tile, int64_t unroll) {
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
// layers, whose panels stream from L2 well, chunking gains nothing per kernel and loses on
// the whole layer (calibration: k chunks).
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

}  // namespace ember::passes::cpu
