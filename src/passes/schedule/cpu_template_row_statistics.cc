// The "row_blocks" template of tile_templates() (default_schedule.cc): a row statistic's
// tile loop, with a GEMM under it computed a block of rows at a time ("gemm_row_block") or
// short rows blocked together.
#include <algorithm>

#include "analysis.h"
#include "cpu_schedule.h"

namespace ember::passes::cpu {

using namespace ir;

constexpr int64_t kStatBlockBytes = 4096;  // tile_row_statistics: short rows per tile

bool OutputTiling::has_rows() const { return !outer.empty(); }

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
// a chain of dependent steps, in series with its epilogue (a fused GELU waited for them;
// calibration: short-row blocks). A block of rows up to kStatBlockBytes computes the
// statistics of all its rows, then their outputs: independent rows the core overlaps.
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
  // the next block's could not overlap, behind its epilogue (calibration: one block of
  // short rows).
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

}  // namespace ember::passes::cpu
