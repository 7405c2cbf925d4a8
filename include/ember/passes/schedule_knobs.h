#pragma once
/// The knobs of the default CPU schedule that a tuner may set per kernel (issue #13), and
/// what the schedule reports about them. A knob left at 0 is the schedule's own choice, so
/// an untuned build and a build with default knobs are the same code.
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ember/passes/machine_model.h"

namespace ember::passes {

/// Per-kernel overrides of the default schedule's choices (0: the schedule's own choice).
struct ScheduleKnobs {
  int64_t tile_rows = 0;     // rows of the register tile (choose_register_tile's `rows`)
  int64_t tile_vectors = 0;  // vectors of the register tile along the innermost axis
  int64_t loop_order = 0;    // 1: the vector input's axes loop inside the tile, 2: outside
  int64_t pad_rows = 0;      // rows per tile of a kernel that computes its padded input
  int64_t unroll = 0;        // the register tile's innermost reduction loop unrolled by this
  int64_t tile_axis = 0;     // 1 + the output axis of the register tile's rows
  int64_t row_block = 0;     // rows of a GEMM computed per block under a row statistic
  int64_t partial_sums = 0;  // a one-row tile's reduction as this many interleaved sums
  int64_t k_chunk = 0;       // outer reduction steps per pass of a chunked conv block (all: one)

  /// Every knob by name, in this order (the log, the Python dicts and str() use it).
  using Field = std::pair<const char*, int64_t ScheduleKnobs::*>;
  static constexpr std::array<Field, 9> fields = {{
      {"tile_rows", &ScheduleKnobs::tile_rows},
      {"tile_vectors", &ScheduleKnobs::tile_vectors},
      {"loop_order", &ScheduleKnobs::loop_order},
      {"pad_rows", &ScheduleKnobs::pad_rows},
      {"unroll", &ScheduleKnobs::unroll},
      {"tile_axis", &ScheduleKnobs::tile_axis},
      {"row_block", &ScheduleKnobs::row_block},
      {"partial_sums", &ScheduleKnobs::partial_sums},
      {"k_chunk", &ScheduleKnobs::k_chunk},
  }};

  bool operator==(const ScheduleKnobs& o) const;
  bool operator<(const ScheduleKnobs& o) const;
  /// "tile_rows=4,tile_vectors=2,loop_order=0,..."
  std::string str() const;
};

/// What the default schedule saw in one kernel: the extents that bound its knobs, and the
/// values it used (`used`: 0 for a knob that did not apply to the kernel).
struct KnobSpace {
  int64_t tile_rows_max = 0;  // extent of the register tile's row axis (0: no register tile)
  int64_t vectors = 0;        // vectors along the innermost axis (tile_vectors divides it)
  bool any_vectors = false;   // tile_vectors may be any count up to `vectors` (shifted tile)
  int64_t registers_per_vector = 1;
  int vector_registers = 16;
  bool loop_order = false;     // the loop-order choice arose
  int64_t pad_rows_max = 0;    // rows of the padded-input tile's axis (0: none)
  int64_t unroll_extent = 0;   // the unrolled reduction loop's extent (0: none)
  std::vector<int> tile_axes;  // output axes the register tile's rows may take (>= 2)
  int64_t row_block_max = 0;   // rows a GEMM under a row statistic is blocked over (0: none)
  int64_t partial_extent = 0;  // the reduction loop a one-row tile may split (0: none)
  int64_t chunk_extent = 0;    // outer reduction steps a conv block may chunk (0: none)
  ScheduleKnobs used;
};

// Used by the default schedule: each returns its choice with the knob applied where set,
// and records the knob's range and value in `space`. A knob out of range (a damaged log) is
// an ember::Error naming it.

/// The register tile `tile` (chosen for `rows` x `cols` outputs of type `t`) with the
/// knobs' rows and vectors. With `any_vectors` (a tile whose last column tile is shifted
/// back) the vectors need not divide the row, only fit in it.
RegisterTile tuned_register_tile(RegisterTile tile, int64_t rows, int64_t cols, DType t,
                                 const MachineModel& m, const ScheduleKnobs& knobs,
                                 KnobSpace& space, bool any_vectors = false);
/// Whether the vector input's axes loop inside the tile (`dflt`: the schedule's choice).
bool tuned_loop_order(bool dflt, const ScheduleKnobs& knobs, KnobSpace& space);
/// Rows per tile of a padded-input kernel whose row axis has `extent` rows.
int64_t tuned_pad_rows(int64_t dflt, int64_t extent, const ScheduleKnobs& knobs, KnobSpace& space);
/// How many iterations of a register tile's innermost reduction loop (`extent` of them) run
/// unrolled in one step: `dflt` (the schedule's choice, dividing `extent`), or the knob's
/// value, which must divide `extent` (no tail).
int64_t tuned_unroll(int64_t dflt, int64_t extent, const ScheduleKnobs& knobs, KnobSpace& space);
/// The output axis of the register tile's rows: `dflt` or, with the knob, another of
/// `choices` (axes whose rows share the vector loads: a blocked conv's row or column).
int tuned_tile_axis(int dflt, const std::vector<int>& choices, const ScheduleKnobs& knobs,
                    KnobSpace& space);
/// Partial sums of a one-row register tile's innermost reduction loop (`extent` steps): the
/// knob (a divisor of `extent`), else `dflt` (default_partial_sums).
int64_t tuned_partial_sums(int64_t dflt, int64_t extent, const ScheduleKnobs& knobs,
                           KnobSpace& space);
/// Outer reduction steps per pass of a conv block that may accumulate in chunks (`extent` of
/// them): `dflt` (0: one pass) or a divisor of `extent`. Returns 0 for one pass.
int64_t tuned_k_chunk(int64_t dflt, int64_t extent, const ScheduleKnobs& knobs, KnobSpace& space);
/// Rows per block of a GEMM under a row statistic: `dflt` or a divisor of `extent` (two
/// blocks or more).
int64_t tuned_row_block(int64_t dflt, int64_t extent, const ScheduleKnobs& knobs, KnobSpace& space);

}  // namespace ember::passes
