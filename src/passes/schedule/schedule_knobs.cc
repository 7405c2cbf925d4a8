#include "ember/passes/schedule_knobs.h"

#include <algorithm>

#include "ember/support/error.h"

namespace ember::passes {

bool ScheduleKnobs::operator==(const ScheduleKnobs& o) const {
  return std::all_of(fields.begin(), fields.end(),
                     [&](const Field& f) { return this->*f.second == o.*f.second; });
}

bool ScheduleKnobs::operator<(const ScheduleKnobs& o) const {
  for (const Field& f : fields)
    if (this->*f.second != o.*f.second) return this->*f.second < o.*f.second;
  return false;
}

std::string ScheduleKnobs::str() const {
  std::string out;
  for (const Field& f : fields)
    out += (out.empty() ? "" : ",") + std::string(f.first) + "=" + std::to_string(this->*f.second);
  return out;
}

RegisterTile tuned_register_tile(RegisterTile tile, int64_t rows, int64_t cols, DType t,
                                 const MachineModel& m, const ScheduleKnobs& knobs,
                                 KnobSpace& space, bool any_vectors) {
  const int64_t full = m.lanes(t);
  space.tile_rows_max = rows;
  space.vectors =
      cols % tile.lanes == 0 || any_vectors ? std::max<int64_t>(1, cols / tile.lanes) : 1;
  space.any_vectors = any_vectors && space.vectors > 1;
  space.registers_per_vector = (tile.lanes + full - 1) / full;
  space.vector_registers = m.vector_registers;
  if (knobs.tile_rows) {
    if (knobs.tile_rows < 1 || knobs.tile_rows > rows)
      fail("schedule knob tile_rows=", knobs.tile_rows, " is outside 1..", rows,
           " for this kernel; re-run ember.tune for it");
    tile.rows = knobs.tile_rows;
  }
  if (knobs.tile_vectors) {
    // With any_vectors the last column tile is shifted back: any count up to the row fits.
    const int64_t v = knobs.tile_vectors;
    if (v < 1 || (space.any_vectors ? v > space.vectors : space.vectors % v != 0))
      fail("schedule knob tile_vectors=", v,
           space.any_vectors ? " does not fit in the " : " does not divide the ", space.vectors,
           " vectors of this kernel; re-run ember.tune for it");
    tile.vectors = knobs.tile_vectors;
  }
  space.used.tile_rows = tile.rows;
  space.used.tile_vectors = tile.vectors;
  return tile;
}

bool tuned_loop_order(bool dflt, const ScheduleKnobs& knobs, KnobSpace& space) {
  if (knobs.loop_order < 0 || knobs.loop_order > 2)
    fail("schedule knob loop_order=", knobs.loop_order, " must be 0, 1 or 2");
  bool inside = knobs.loop_order ? knobs.loop_order == 1 : dflt;
  space.loop_order = true;
  space.used.loop_order = inside ? 1 : 2;
  return inside;
}

int64_t tuned_pad_rows(int64_t dflt, int64_t extent, const ScheduleKnobs& knobs, KnobSpace& space) {
  if (knobs.pad_rows < 0) fail("schedule knob pad_rows=", knobs.pad_rows, " must be >= 0");
  int64_t rows = knobs.pad_rows ? knobs.pad_rows : dflt;
  space.pad_rows_max = extent;
  // Tiles of more than half the rows are one tile of all of them.
  space.used.pad_rows = 2 * rows > extent ? extent : rows;
  return rows;
}

namespace {

// A knob that splits a reduction loop of `extent` iterations: `value` (0: 1) must divide it.
int64_t reduction_divisor(const char* name, int64_t value, int64_t extent) {
  const int64_t v = value ? value : 1;
  if (v < 1 || extent % v != 0)
    fail("schedule knob ", name, "=", value, " does not divide the ", extent,
         " iterations of this kernel's reduction loop; re-run ember.tune for it");
  return v;
}

}  // namespace

int64_t tuned_unroll(int64_t dflt, int64_t extent, const ScheduleKnobs& knobs, KnobSpace& space) {
  const int64_t u = knobs.unroll ? reduction_divisor("unroll", knobs.unroll, extent) : dflt;
  space.unroll_extent = extent;
  space.used.unroll = u;
  return u;
}

int tuned_tile_axis(int dflt, const std::vector<int>& choices, const ScheduleKnobs& knobs,
                    KnobSpace& space) {
  int d = dflt;
  if (knobs.tile_axis) {
    d = static_cast<int>(knobs.tile_axis - 1);
    if (std::find(choices.begin(), choices.end(), d) == choices.end()) {
      std::string valid;
      for (int c : choices) valid += (valid.empty() ? "" : ", ") + std::to_string(c + 1);
      fail("schedule knob tile_axis=", knobs.tile_axis, " is not one of ", valid,
           " for this kernel; re-run ember.tune for it");
    }
  }
  if (choices.size() > 1) {  // a knob only where there is a choice
    space.tile_axes = choices;
    space.used.tile_axis = d + 1;
  }
  return d;
}

int64_t tuned_partial_sums(int64_t dflt, int64_t extent, const ScheduleKnobs& knobs,
                           KnobSpace& space) {
  const int64_t p =
      knobs.partial_sums ? reduction_divisor("partial_sums", knobs.partial_sums, extent) : dflt;
  space.partial_extent = extent;
  space.used.partial_sums = p;
  return p;
}

int64_t tuned_k_chunk(int64_t dflt, int64_t extent, const ScheduleKnobs& knobs, KnobSpace& space) {
  const int64_t chunk = knobs.k_chunk ? knobs.k_chunk : (dflt ? dflt : extent);
  if (chunk < 1 || extent % chunk != 0)
    fail("schedule knob k_chunk=", knobs.k_chunk, " does not divide the ", extent,
         " outer reduction steps of this kernel; re-run ember.tune for it");
  space.chunk_extent = extent;
  space.used.k_chunk = chunk;
  return chunk == extent ? 0 : chunk;
}

int64_t tuned_row_block(int64_t dflt, int64_t extent, const ScheduleKnobs& knobs,
                        KnobSpace& space) {
  const int64_t rows = knobs.row_block ? knobs.row_block : dflt;
  // At most half the rows: two blocks or more (a block that does not divide them shifts
  // the last block back over the one before).
  if (rows < 1 || (2 * rows > extent && extent > 1))
    fail("schedule knob row_block=", knobs.row_block, " does not split the ", extent,
         " rows of this kernel into two or more blocks; re-run ember.tune for it");
  space.row_block_max = extent;
  space.used.row_block = rows;
  return rows;
}

}  // namespace ember::passes
