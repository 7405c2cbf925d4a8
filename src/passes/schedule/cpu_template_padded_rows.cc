// The "padded_rows" and "depthwise_rows" templates of tile_templates() (default_schedule.cc):
// a tile of output rows that computes the padded input rows it reads.
#include <algorithm>

#include "cpu_schedule.h"

namespace ember::passes::cpu {

using namespace ir;

bool OutputTiling::computes_padded_rows() const {
  return along && outer_vec && !row_tile && !pads.empty() && outer.size() >= 2;
}

// The tile is a block of whole rows: the padded rows it reads are computed once per tile
// (kPadRows + window - 1 of them: 1.1x the rows for a 3x3 window; 4 rows would compute
// 1.5x; calibration: padded rows), then the register tiles walk the rows.
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

// A blocked depthwise conv (its reduction is its window alone) with a padded input: the
// tile is a block of at most kPadRows output rows of one channel block, whose padded input
// rows are computed once per tile while in cache; the register tiles walk the rows inside.
// Blocks are smaller where there are fewer than kMinTiles channel blocks, so that the
// threads have tiles to share. Padding the whole input first read and wrote it once more
// than the conv reads it (calibration: depthwise padded rows).
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

}  // namespace ember::passes::cpu
