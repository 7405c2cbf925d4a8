// The "register_tile" template of tile_templates() (default_schedule.cc): a tile loop over
// every axis outside the register tile, or a conv's output-channel block whose reduction
// runs in chunks ("chunked").
#include <algorithm>

#include "analysis.h"
#include "cpu_schedule.h"

namespace ember::passes::cpu {

using namespace ir;

namespace {

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

}  // namespace

bool OutputTiling::register_tiled() const {
  return along && (outer_vec || tile_inner) && !row_tile;
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
    // convs with their residual add; calibration: residual loop order).
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
// convs, 7x7 1x1 convs with 4 MB of weights; calibration: chunked conv block): the tile is
// one output-channel block, whose pixels loop inside it, and the reduction runs in chunks
// (choose_k_chunk), each chunk of weights read from L1 by every pixel tile.
bool OutputTiling::chunk_conv_block() {
  // A 1x1 conv whose weights stream inside (weights_stream_inside) keeps that order: its
  // input block per chunk would not fit the L1 (ResNet's 14x14 1x1 convs; calibration:
  // chunked conv block).
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

}  // namespace ember::passes::cpu
