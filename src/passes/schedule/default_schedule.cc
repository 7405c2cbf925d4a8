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
//
// Files: this one tiles an output (output_templates(), the templates that tile a whole
// output by themselves, tried first; else OutputTiling's phases and tile_templates(), the
// ordered list of tile-loop templates) and schedules the stages computed at the root. Each
// template, its condition, tiling and knobs, is a file of its own: the output templates
// cpu_template_two_anchors.cc (two anchors in one kernel) and cpu_template_dot_rows.cc (a
// GEMV's dot products); the tile-loop templates cpu_template_transpose.cc ("tiles"),
// cpu_template_padded_rows.cc ("padded_rows", "depthwise_rows"),
// cpu_template_register_tile.cc ("register_tile", "chunked"), cpu_template_row_statistics.cc
// ("row_blocks", "gemm_row_block") and cpu_template_vector_loop.cc ("vector_loop").
// cpu_tiles.cc holds the loop nests of a reduction computed in a tile (register tiles, GEMM
// blocks, chunks), cpu_analysis.cc the questions the templates ask of a stage, and
// cpu_schedule.h declares what the files share.
#include <algorithm>

#include "analysis.h"
#include "cpu_schedule.h"
#include "ember/passes/machine_model.h"
#include "ember/passes/schedule.h"
#include "ember/passes/schedule_knobs.h"

namespace ember::passes {

using namespace ir;

namespace cpu {

namespace {

bool padded_input_of_reduction(Schedule& sch, const Stage& s);
bool windowed_pad(const Stage& r, const Stage& pad, const MachineModel& m);

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

// Does every tile of pixels re-read `r`'s vector input (a 1x1 conv's weights) from the L3?
// When the weights stream inside (weights_stream_inside) but overflow the L2, and the
// output's innermost axis is one channel block of at most two vectors (a GEMM's columns are
// tiled instead, and its weight panel is reused by a block of rows from the L2).
bool weights_from_l3(const Stage& r, const MachineModel& m, int64_t cols) {
  return cols <= 2 * m.lanes(r.tensor().dtype()) && vector_input_bytes(r) > m.l2_bytes &&
         weights_stream_inside(r, m);
}

constexpr int64_t kCacheLineBytes = 64;

// The machine a register tile of `r` is sized for. A sum of dot_bf16 steps where the CPU has
// no vdpbf16ps (BF16Products forced on) runs each as two FMAs of the words' widened halves,
// so each loaded vector and the broadcast take two registers: 12 accumulators with AVX2's
// 16 registers spilled inside the reduction loop (calibration: bfloat16 FMA tiles). Modelled
// as four registers fewer.
// A depthwise conv's window weights (one vector per tap and tile vector) are the same for
// every row of the tile, so LLVM keeps them in registers: with 32 registers, tiles sized
// for the taps as well ran MobileNetV2's 3x3 depthwise convs 28% (float32) and 34% (int8)
// faster on Zen 5, where the accumulators had spilled. With 16 (AVX2) the weights do not fit
// beside enough accumulators, and reloading them from L1 was faster (0.76 vs 0.88 ms).
MachineModel tile_machine(const Stage& r, const MachineModel& m) {
  if (window_only(r) && sums_products(r)) {
    int64_t taps = 1;
    for (const IterVar& ra : r.reduce_axes()) taps *= ra->extent;
    if (m.vector_registers - taps < 16) return m;
    MachineModel roomy = m;
    roomy.vector_registers -= static_cast<int>(taps);
    return roomy;
  }
  auto* red = r.body().as<ReduceNode>();
  auto* dot = red ? red->source.as<PrimCallNode>() : nullptr;
  if (m.bf16_dot || !dot || dot->op != Intrinsic::DotBF16) return m;
  MachineModel tight = m;
  tight.vector_registers -= 4;
  return tight;
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

// The partial sums of a one-row register tile whose few accumulators are one dependent
// chain per vector, so that it runs at the FMA latency, not the throughput:
// - a sum of one tensor over another axis (a sum of squares over 768 values per 4-wide row);
// - a GEMV whose outputs are one tile (a classifier head of 10 outputs over K = 2048: one
//   vector, so one chain of 2048 FMAs, several times longer than its 80 KB of weights take
//   to stream from L2).
// Independent chains, as many as the FMA pipeline holds, each at least 8 steps long. A GEMV
// over more outputs is left alone: its tile takes as many vectors as the pipeline holds
// (calibration: partial sums).
int64_t default_partial_sums(const Schedule& sch, const Stage& o, const Stage& r,
                             const RegisterTile& rt, int64_t k, const MachineModel& m) {
  const bool one_tile = one_row(o.axes()) && o.axes().back()->extent <= rt.cols();
  if (sums_to_run_extent(sch, r)) return 1;
  if (!sums_one_tensor(sch, r) && !(one_tile && sums_a_broadcast_product(sch, r))) return 1;
  const int64_t want = (m.fma_ports * m.fma_latency + rt.vectors - 1) / rt.vectors;
  int64_t best = 1;
  for (int64_t d = 2; d <= want && d * 8 <= k; ++d)
    if (k % d == 0) best = d;
  return best;
}

// The default unroll of `r`'s innermost reduction loop: twice for a windowed conv, whose
// innermost reduction is one channel block (8-32 steps) inside the window's loops, so its
// loop overhead is a visible share (ResNet-50's 3x3 convs gain; BERT's dense layers, whose
// reduction loop runs the whole K, lose unrolled; calibration: reduction unroll).
int64_t default_unroll(const Stage& r) {
  return reads_window(r) && inner_reduce_extent(r) % 2 == 0 ? 2 : 1;
}

// The lanes of an elementwise value's vectors: two registers' worth where the value is a
// long dependency chain (an exp's polynomial, tanh, erf) and the axis has two vectors. Each
// instruction of the chain is then two independent ones side by side, which the core
// overlaps, where a loop of one-register chains ran only as many iterations at once as its
// scheduler held. A relu, memory-bound, keeps one register; so do the unrolled copies of a
// one-register chain, which LLVM leaves one after another, so they gain nothing
// (calibration: chain lanes).
int64_t chain_lanes(const PrimExpr& body, int64_t lanes, const IterVar& axis) {
  return chain_length(body) >= kLongChain && axis->extent >= 2 * lanes ? 2 * lanes : lanes;
}

// The lanes of a transpose's vectors: a whole cache line where a vector is less. Its tile
// writes kTransposeRows output rows a vector at a time; where the rows lie a multiple of
// 4 KiB apart (a (0, 2, 3, 1) permute of 256 x 56 x 56: 57344 bytes), all of them share
// one set of the L1, more rows than its ways, and a half line written was evicted before
// its other half; a vector of a whole line writes it at once (calibration: transpose
// lanes).
int64_t line_lanes(const Stage& o, int64_t lanes, const IterVar& axis) {
  const int64_t line = kCacheLineBytes / dtype_bytes(o.tensor().dtype());
  return lanes < line && axis->extent >= line ? line : lanes;
}

}  // namespace

OutputTiling::OutputTiling(const OutputScope& s)
    : sch(s.sch),
      o(s.o),
      vector_bits(s.machine.vector_bits),
      knobs(s.knobs),
      space(s.space),
      axes(s.o.axes()),
      body(s.body),
      reds(s.reds),
      machine(s.machine),
      anchor_kind(s.anchor_kind) {
  last = axes.back();
  for (Stage* r : reds) along &= reads_along(body, r->tensor().operator->(), last->var.get());
}

// A reduction read elementwise along the vector axis (conv, dense, matmul, pooling) is
// computed as a register tile: rows of the axis whose vector input it shares, times
// several vectors of the innermost axis, sized by the machine model.
void OutputTiling::size_register_tile() {
  tiled = along && reds.size() == 1 && reads_elementwise(body, o, *reds[0]);
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
  // fused in one register a vector ran far slower than in two, and in two still slower than
  // its two kernels, which the cost model now sees, so FuseOps keeps the two (calibration:
  // row statistics chain lanes).
  if ((reds.empty() || !along) && transposed_axis(body, o) < 0)
    rt.lanes = chain_lanes(body, rt.lanes, last);
  else if (reds.empty())
    rt.lanes = line_lanes(o, rt.lanes, last);
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
    // A tile_rows knob (a short run's part of a range: with_short_run_parts) takes the
    // vectors that suit that many rows.
    const int64_t choose_rows = knobs.tile_rows ? std::min(knobs.tile_rows, tile_rows) : tile_rows;
    // The accumulators' type sizes the tile: an epilogue that narrows the output (a
    // quantize's cast to uint8) still computes in the anchor's float32 (or int32) lanes.
    const DType t = reds[0]->tensor().dtype();
    rt = choose_register_tile(tile_machine(*reds[0], machine), choose_rows, last->extent, t,
                              rows_share, weights_from_l3(*reds[0], machine, last->extent), panel_k,
                              shift_columns);
    // A one-row tile (a GEMV: a batch-1 dense streams its weights once) may take any number
    // of vectors (the last column tile shifted back), and its reduction may run as partial
    // sums: independent accumulator chains, added in the epilogue (by default only
    // for a sum of one tensor: default_partial_sums).
    rt = tuned_register_tile(rt, tile_rows, last->extent, t, machine, knobs, space, tile_rows == 1);
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
  // on its own (calibration: shifted last tile). A kernel's outputs never share memory with
  // its inputs, so computing a column twice is harmless.
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

namespace {

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

}  // namespace

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
  if (partial_sums > 1) path = "partial_sums";
  return tile != nullptr;
}

void OutputTiling::prepare_tile_loop() {
  outer.assign(axes.begin(), axes.end() - 1);
  int64_t rows = 1;
  for (auto& a : outer) rows *= a->extent;
  // Without reductions the tile only sets the parallel grain: whole rows, unless there are
  // too few rows to keep the threads busy (per-iteration index arithmetic is not free).
  row_tile = reds.empty() && rows >= machine.min_parallel_rows;
  for (auto& st : sch.stages())
    if (tiled && st->attach_kind() == AttachKind::Root && !is_reduction(*st) &&
        padded_input_of_reduction(sch, *st) && windowed_pad(*reds[0], *st, machine))
      pads.push_back(st.get());
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
      // of 3072) still sums along the rows: vectorized across 16 rows, LLVM turns its
      // strided lanes into gathers (calibration: row statistics along rows).
      schedule_reduction_tile(*r, along && !contiguous_along_reduction(*r));
    }
  }
}

namespace {

// Names the template of one more output (a group with several outputs lists each).
void add_template(Schedule& sch, const std::string& name) {
  const std::string& now = sch.template_name();
  if (now.empty())
    sch.set_template(name);
  else if (now != name)
    sch.set_template(now + " + " + name);
}

// The templates that tile a whole output by themselves, tried in order before
// OutputTiling's phases (which end in tile_templates()).
const std::vector<OutputTemplate>& output_templates() {
  static const std::vector<OutputTemplate> list = {
      {"two_anchors", &tile_two_anchors},
      {"dot_rows", &tile_dot_rows},
  };
  return list;
}

// Tiles `o` (parallel outer, vector inner); returns the loop its reductions attach at.
// `knobs` override its choices where set (tuning); `space` records them.
IterVar schedule_output(Schedule& sch, Stage& o, const MachineModel& machine,
                        const ScheduleKnobs& knobs, KnobSpace& space) {
  if (o.axes().empty()) {
    add_template(sch, "scalar");
    return nullptr;
  }
  OutputScope scope{sch, o, machine, knobs, space, sch.expanded_body(o), {}, {}};
  scope.reds = reductions_read(sch, o, scope.body);
  scope.anchor_kind = classify_anchor(sch, o, scope.body, scope.reds);
  for (const OutputTemplate& t : output_templates()) {
    IterVar tile;
    std::string name;
    if (t.apply(scope, tile, name)) {
      add_template(sch, name);
      return tile;
    }
  }
  OutputTiling t(scope);
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
// cache, instead of in a pass of its own over memory: small enough that a tile of kPadRows
// rows computes few padded rows twice (max_padded_window; calibration: windowed pads).
bool windowed_pad(const Stage& r, const Stage& pad, const MachineModel& m) {
  auto* red = r.body().as<ReduceNode>();
  if (!red) return false;
  const int64_t w = max_padded_window(m, kPadRows);  // the widest window
  bool reads = false, small = true;
  visit_prim(red->source, [&](const PrimExpr& e) {
    auto* p = e.as<ProducerLoadNode>();
    if (!p || p->producer != pad.tensor().ref()) return;
    reads = true;
    for (auto& a : r.reduce_axes())
      for (auto& i : p->indices)
        visit_prim(i,
                   [&](const PrimExpr& x) { small &= x.get() != a->var.get() || a->extent <= w; });
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

}  // namespace cpu

using namespace cpu;

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
    for (auto& r : sch.stages()) windowed |= is_reduction(*r) && windowed_pad(*r, *s, machine);
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
