// The "dot_rows" template of output_templates() (default_schedule.cc): one row of outputs
// whose anchor sums a product of weight rows read along K and a broadcast activation row
// (a batch-1 dense over [N, K], or nn.dense_lanes' [K/L, N, L]: what AlterOpLayout leaves
// where no vector divides N). A register tile along N would gather each vector across N
// rows; each output is a dot product along K instead, its reduction loop innermost for LLVM
// to vectorize ("rows"), or, where one row alone falls behind the L2
// (gemv_row_keeps_pace), vector partials that a block of rows accumulates together
// ("dot_rows"; calibration: GEMV dot rows).
#include <algorithm>

#include "analysis.h"
#include "cpu_schedule.h"

namespace ember::passes::cpu {

using namespace ir;

namespace {

// The partials of a block of dot products: `lanes`-wide vectors, `vectors` of them per row
// and step, `rows` rows per block sharing each activation vector (all unrolled).
struct DotRows {
  int64_t lanes = 0;  // 0: each row alone, no partials
  int64_t vectors = 1;
  int64_t rows = 1;
};

DotRows choose_dot_rows(const MachineModel& m, DType t, int64_t k, int64_t tile_rows) {
  DotRows d;
  if (gemv_row_keeps_pace(m, t)) return d;
  for (d.lanes = m.lanes(t); d.lanes >= 4 && k % d.lanes != 0;) d.lanes /= 2;
  if (d.lanes < 4) return DotRows{};
  // Two vectors a row where they divide k: the accumulators the FMA pipeline needs from
  // half the rows, so half the weight streams at once.
  if (k % (2 * d.lanes) == 0) d.vectors = 2;
  const int64_t chains = m.fma_ports * m.fma_latency, max_rows = max_accumulators(m) / d.vectors;
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

// Is `s`'s output one row of dot products over weight rows contiguous along K?
bool dot_products(const OutputScope& s) {
  if (s.reds.size() != 1) return false;
  const Stage& r = *s.reds[0];
  return reads_along(s.body, r.tensor().operator->(), s.o.axes().back()->var.get()) &&
         reads_elementwise(s.body, s.o, r) && one_row(s.o.axes()) &&
         contiguous_along_reduction(r) && sums_a_broadcast_product(s.sch, r) &&
         !sums_to_run_extent(s.sch, r);
}

}  // namespace

// The outputs are vector tiles of the row; the tile loop runs over them in parallel, each
// tile computing its dot products (and their partials) inside it.
bool tile_dot_rows(OutputScope& s, IterVar& tile, std::string& name) {
  if (!dot_products(s)) return false;
  Stage &o = s.o, &r = *s.reds[0];
  const DType t = o.tensor().dtype();
  const std::vector<IterVar> axes = o.axes();
  const IterVar last = axes.back();
  // A short row that the vectors do not divide is one tile of the whole row: shifted tiles
  // would compute some outputs twice (calibration: GEMV short row).
  int64_t cols = vector_lanes(o, s.machine.vector_bits);
  if (last->extent % cols != 0 && last->extent <= 2 * s.machine.lanes(t)) cols = last->extent;
  const DotRows d =
      choose_dot_rows(s.machine, t, inner_reduce_extent(r), std::min(last->extent, cols));
  Stage* part = d.lanes ? &s.sch[s.sch.rfactor(r.tensor(), d.lanes * d.vectors, true)] : nullptr;
  name = s.anchor_kind + (part ? ".dot_rows" : ".rows");

  IterVar outer_vec, inner = last;
  if (last->extent > cols) std::tie(outer_vec, inner) = o.split(last, cols, SplitTail::Shift);
  if (inner->extent > 1) o.vectorize(inner);
  std::vector<IterVar> outer(axes.begin(), axes.end() - 1);
  if (outer_vec) outer.push_back(outer_vec);
  if (outer.empty()) return true;  // one tile: the reductions stay root nests
  tile = o.fuse(outer);
  o.parallel(tile);
  if (part) {
    part->compute_at(o, tile);
    schedule_dot_rows(*part, d);
  }
  r.compute_at(o, tile);
  schedule_reduction_tile(r, !contiguous_along_reduction(r));
  return true;
}

}  // namespace ember::passes::cpu
