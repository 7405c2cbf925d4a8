#pragma once
// What the files of the default CPU schedule share (default_schedule.cc, whose essay says
// which file holds which template): the questions they ask of a stage (cpu_analysis.cc), the
// loop nests of a reduction computed in a tile (cpu_tiles.cc), the whole-output templates
// (OutputScope, OutputTemplate), and OutputTiling, whose phases and tile-loop templates tile
// the other outputs. Internal to src/passes/schedule.
#include <cstdint>
#include <string>
#include <vector>

#include "ember/ir/loop.h"
#include "ember/passes/machine_model.h"
#include "ember/passes/schedule.h"
#include "ember/passes/schedule_knobs.h"

namespace ember::passes::cpu {

// cpu_analysis.cc
bool reads_tensor(const ir::PrimExpr& body, const Stage& s);
bool contiguous_along_reduction(const Stage& r);
bool vector_input_ignores(const Stage& r, int d);
bool reads_window(const Stage& r);
bool window_only(const Stage& r);
Tensor vector_input(const Stage& r);
int64_t vector_input_bytes(const Stage& r);
bool weights_stream_inside(const Stage& r, const MachineModel& m);
bool reads_elementwise(const ir::PrimExpr& o_body, const Stage& o, const Stage& r);
bool one_row(const std::vector<IterVar>& axes);
bool sums_to_run_extent(const Schedule& sch, const Stage& r);
bool sums_products(const Stage& r);
bool sums_a_broadcast_product(const Schedule& sch, const Stage& r);
std::string classify_anchor(const Schedule& sch, const Stage& o, const ir::PrimExpr& body,
                            const std::vector<Stage*>& reds);

// Register tiling: an axis `d` of the reduction that one of its inputs does not depend on
// (a conv's output channel: the input patch is the same for every channel). Computing kTile
// values of `d` per tile reuses each vector load of that input kTile times. Returns -1 when
// no axis qualifies or `o` does not read `r` elementwise.
constexpr int64_t kTile = 4;
int register_tile_axis(const ir::PrimExpr& o_body, const Stage& o, const Stage& r,
                       int64_t min_extent = kTile);
int64_t inner_reduce_extent(const Stage& r);
int64_t vector_lanes(const Stage& o, int vector_bits);

// cpu_template_transpose.cc
int transposed_axis(const ir::PrimExpr& body, const Stage& o);

// cpu_template_padded_rows.cc (and default_schedule.cc's windowed_pad, which bounds the
// window by it): output rows per tile that computes its padded input.
constexpr int64_t kPadRows = 16;

// cpu_tiles.cc
void schedule_reduction_tile(Stage& r, bool vectorize_inner);
void schedule_register_tile(Stage& r, int d, const RegisterTile& tile, int64_t unroll = 1);
void schedule_gemm_block(Stage& r, int d, const RegisterTile& rt, int64_t unroll);
int64_t choose_k_chunk(const MachineModel& m, const Stage& r, const RegisterTile& rt);
void schedule_k_chunked_tile(Stage& r, int d, const RegisterTile& rt, int64_t chunk,
                             int64_t unroll);

// What a whole-output template reads of one output, gathered once by schedule_output.
struct OutputScope {
  Schedule& sch;
  Stage& o;
  const MachineModel& machine;
  const ScheduleKnobs& knobs;
  KnobSpace& space;
  ir::PrimExpr body;         // o's body, the inlined stages expanded
  std::vector<Stage*> reds;  // the reductions o reads, to be computed inside its tile
  std::string anchor_kind;   // classify_anchor
};

// A template that tiles a whole output by itself, tried (output_templates(), in
// default_schedule.cc) before OutputTiling's general phases. `apply` returns false, having
// changed nothing, where it does not apply; else it names what it did (`name`, as reports
// show it) and returns its tile loop in `tile` (null: the reductions stay root nests).
struct OutputTemplate {
  const char* name;
  bool (*apply)(OutputScope& s, IterVar& tile, std::string& name);
};
// cpu_template_two_anchors.cc: an output whose reduction reads another reduction.
bool tile_two_anchors(OutputScope& s, IterVar& tile, std::string& name);
// cpu_template_dot_rows.cc: a GEMV over weight rows read along K, as dot products.
bool tile_dot_rows(OutputScope& s, IterVar& tile, std::string& name);

// schedule_output's decisions, one phase per method, each reading what the earlier ones
// decided: the register tile's shape (size_register_tile), the splits of o's axes
// (split_axes), the parallel tile loop (choose_tile_loop), and the stages computed inside
// it (attach_in_tile).
struct OutputTiling {
  explicit OutputTiling(const OutputScope& s);
  void size_register_tile();
  void split_axes();
  bool choose_tile_loop();  // tries tile_templates() in order
  void prepare_tile_loop();
  // The templates' conditions and their tilings.
  bool transposes() const;
  void tile_transpose();
  bool computes_padded_rows() const;
  void tile_padded_rows();
  bool depthwise_padded() const;
  void tile_depthwise_rows();
  bool register_tiled() const;
  void tile_register_tiles();
  bool chunk_conv_block();
  bool has_rows() const;
  void tile_row_statistics();
  bool has_vectors() const;
  void parallel_vectors();
  void block_short_rows(std::vector<IterVar>& tile_axes, size_t used);
  void attach_in_tile();
  std::string template_name() const { return anchor_kind + "." + path; }

  Schedule& sch;
  Stage& o;
  const int vector_bits;
  const ScheduleKnobs& knobs;
  KnobSpace& space;
  std::vector<IterVar> axes;  // o's axes; a split axis is replaced by its outer part
  ir::PrimExpr body;          // re-expanded when a GEMV's reduction becomes partial sums
  std::vector<Stage*> reds;
  const MachineModel machine;
  IterVar last;
  bool along = true;  // o reads every reduction along its innermost axis
  // What the anchor is (classify_anchor) and which path through the decisions below its
  // tiling took: together the template name that reports show.
  std::string anchor_kind;
  const char* path = "root";
  // size_register_tile
  bool tiled = false;
  int tile_axis = -1;
  RegisterTile rt;
  int64_t partial_sums = 1;  // a one-row tile's reduction as independent partial sums
  // split_axes
  IterVar tile_inner, outer_vec;
  int64_t k_chunk = 0;  // chunk_conv_block: the reduction in chunks, the pixels inside
  // choose_tile_loop
  bool row_tile = false;  // no reductions: a row of outputs is the parallel grain
  std::vector<IterVar> outer;
  std::vector<Stage*> pads, row_gemms;
  int64_t row_block = 1;
  IterVar tile, reduction_at;
};

}  // namespace ember::passes::cpu
