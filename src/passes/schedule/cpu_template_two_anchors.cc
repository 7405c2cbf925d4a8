// The "two_anchors" template of output_templates() (default_schedule.cc), tried first: an
// output whose reduction reads another reduction, both in one kernel.
#include <algorithm>

#include "analysis.h"
#include "cpu_schedule.h"
#include "ember/ir/simplify.h"

namespace ember::passes::cpu {

using namespace ir;

constexpr int64_t kRows = 4;  // output rows per tile where windows overlap

namespace {

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
// loads R2 shares (the channel of a conv under a pooling). Returns null, changing
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
  // vector, so they take what the FMA latency needs (4 spent half of it; calibration: conv
  // under a pooling).
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

}  // namespace

bool tile_two_anchors(OutputScope& s, IterVar& tile, std::string& name) {
  if (s.reds.size() != 1) return false;
  tile = schedule_two_anchors(s.sch, s.o, s.body, *s.reds[0], s.machine, s.knobs, s.space);
  if (!tile) return false;
  name = "two_anchors";
  return true;
}

}  // namespace ember::passes::cpu
