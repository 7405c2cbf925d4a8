#include "ember/passes/schedule_knobs.h"

#include <tuple>

#include "ember/support/error.h"

namespace ember::passes {

bool ScheduleKnobs::operator<(const ScheduleKnobs& o) const {
  return std::tie(tile_rows, tile_vectors, loop_order, pad_rows) <
         std::tie(o.tile_rows, o.tile_vectors, o.loop_order, o.pad_rows);
}

std::string ScheduleKnobs::str() const {
  return "tile_rows=" + std::to_string(tile_rows) +
         ",tile_vectors=" + std::to_string(tile_vectors) +
         ",loop_order=" + std::to_string(loop_order) + ",pad_rows=" + std::to_string(pad_rows);
}

RegisterTile tuned_register_tile(RegisterTile tile, int64_t rows, int64_t cols, DType t,
                                 const MachineModel& m, const ScheduleKnobs& knobs,
                                 KnobSpace& space) {
  const int64_t full = m.lanes(t);
  space.tile_rows_max = rows;
  space.vectors = cols % tile.lanes == 0 ? cols / tile.lanes : 1;
  space.registers_per_vector = (tile.lanes + full - 1) / full;
  space.vector_registers = m.vector_registers;
  if (knobs.tile_rows) {
    if (knobs.tile_rows < 1 || knobs.tile_rows > rows)
      fail("schedule knob tile_rows=", knobs.tile_rows, " is outside 1..", rows,
           " for this kernel; re-run ember.tune for it");
    tile.rows = knobs.tile_rows;
  }
  if (knobs.tile_vectors) {
    if (knobs.tile_vectors < 1 || space.vectors % knobs.tile_vectors != 0)
      fail("schedule knob tile_vectors=", knobs.tile_vectors, " does not divide the ",
           space.vectors, " vectors of this kernel; re-run ember.tune for it");
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

}  // namespace ember::passes
