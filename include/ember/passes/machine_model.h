#pragma once
/// The small explicit model of the CPU that every tile choice comes from: vector width,
/// vector registers, cache sizes. Schedules and layout passes ask it, never a constant of
/// their own, so that a tuner can search the same knobs and tests can pin the model (the
/// kernels are then the same on AVX2 and AVX-512 hosts).
#include <cstdint>
#include <string>

#include "ember/runtime/dtype.h"

namespace ember::passes {

struct MachineModel {
  // The CPU these facts describe: "pinned" for the fixed models of for_vector_bits (tests
  // pin them, so their kernels are the same on every host); an LLVM CPU name for a target's
  // model (codegen/machine.h: LLVM's scheduling model and, for the host, sysfs).
  std::string cpu = "pinned";
  std::string source = "fixed";  // where the facts came from, for people to read
  int vector_bits = 256;         // the target's vector width (target option -vector-bits)
  int vector_registers = 16;     // 16 ymm (AVX2) or 32 zmm (AVX-512)
  int64_t l1_bytes = 32 << 10;
  int64_t l2_bytes = 512 << 10;
  int64_t l3_bytes = 32 << 20;  // the whole L3 (shared by the cores)
  // The FMA pipeline: independent accumulators needed = fma_ports x fma_latency. Four
  // cycles on Skylake and later, Zen 3 and Zen 4; Zen 2's five would ask for 10
  // (calibration: fma_latency).
  int fma_ports = 2;  // vector FMAs of vector_bits issued per cycle
  int fma_latency = 4;
  // The FMA units' width: a wider vector issues in pieces (Zen 1's 128-bit units run a
  // 256-bit FMA as two; Zen 4's 256-bit units a 512-bit one).
  int fma_datapath_bits = 256;
  int load_ports = 2;  // vector loads and broadcasts per cycle
  // One instruction adds four int8 products into each int32 lane at vector_bits (VNNI's
  // vpdpbusd: AVX-512 VNNI, or AVX-VNNI at 256 bits): the int8 kernels pay off (Int8Products).
  // Without it they are exact too (two vpmaddwd per vector) but no faster than float32.
  bool int8_dot = false;
  // Int8 products whose activations are below 128 (PT2E's reduce_range) run at least 1.5x
  // the float32 FMAs' rate: VNNI, or without it vpmaddubsw + vpmaddwd where each issues
  // twice a cycle (Skylake, Zen 3 and later at 256 bits). Int8Products then rewrites those.
  bool int8_dot_7bit = false;
  // One instruction adds two bfloat16 products into each float32 lane at vector_bits
  // (vdpbf16ps: AVX512_BF16, with AVX512VL below 512 bits): BF16Products uses it.
  bool bf16_dot = false;
  // Bytes per cycle that one core streams from the L3: a register tile whose vector loads
  // come from there needs rows enough to wait for them (ResNet-50's 14x14 1024 -> 256 1x1
  // convs, 1 MB of weights re-read for every tile of pixels; calibration:
  // l3_bytes_per_cycle).
  int l3_bytes_per_cycle = 12;
  // What the FuseOps cost model (fusion_cost.cc) adds to these: how fast one core streams
  // a kernel's inputs and outputs from memory (memory_bytes_per_cycle), or from the caches
  // where they fit half the L3; the instructions the out-of-order core keeps in flight (its
  // reorder buffer, 224 to 320 on current x86 cores, less loop and index overhead), which
  // bound how many iterations of a long dependency chain overlap; latencies of a division or
  // square root, an L1 load and a scalar 64-bit integer division; and the fixed cost of
  // running a kernel at all (the executor's call and the loop's setup) and of handing a
  // parallel loop to the pool's other threads (calibration: FuseOps cost model).
  double memory_bytes_per_cycle = 8;
  double cached_bytes_per_cycle = 16;
  double window_instructions = 288;
  double divide_latency = 12;
  double load_latency = 5;
  double integer_division_cycles = 20;
  double call_cycles = 15;
  double dispatch_cycles = 1500;
  // The fewest rows of an output without reductions whose whole rows are its parallel loop's
  // iterations: fewer leave a pool's threads too few to share, and its tiles become vectors
  // of rows instead, each iteration paying its own index arithmetic (calibration: parallel
  // rows).
  int64_t min_parallel_rows = 64;
  // A padded input read through a small window is computed by each output tile, for the rows
  // it reads, while they are in cache (max_padded_window): the tile of R output rows computes
  // R + window - 1 padded rows, the rows a neighbouring tile shares computed by both. This
  // bounds their ratio (16-row tiles under a 7x7 window: 22 / 16 = 1.375; 4-row tiles under a
  // 3x3 one computed 1.5x and the net ran slower; calibration: windowed pads).
  double max_pad_recompute = 1.4;
  // The threads that run the kernels' parallel loops (ember.set_num_threads at build time;
  // 1 in the fixed models that tests pin): FuseOps' cost rule charges a parallel kernel the
  // pool's dispatch and join only where there are other threads to hand work to.
  int threads = 1;

  /// The model of an x86-64 CPU whose vectors are `vector_bits` wide.
  static MachineModel for_vector_bits(int vector_bits);
  /// Inline (register_lanes, the one lanes formula): ember_ir's custom lowerings call it and
  /// must not link against ember_passes, which links against them.
  int64_t lanes(DType t) const { return register_lanes(t, vector_bits); }
};

/// A register tile of a GEMM-like reduction: `rows` values of one axis (an output row of a
/// GEMM, an output channel of a convolution) times `vectors` vectors of `lanes` along the
/// innermost axis, all accumulated in registers. rows * vectors FMAs per step share `rows`
/// broadcasts and `vectors` vector loads.
struct RegisterTile {
  int64_t rows = 1, vectors = 1, lanes = 1;
  double efficiency = 0;  // choose_register_tile's estimate of its share of the FMA peak
  int64_t cols() const { return vectors * lanes; }
};

/// The most vector accumulators a register tile may hold: four registers stay free besides
/// them (LLVM's FMA forms and the loop need them; 14 accumulators of 16 spilled). Inline:
/// ember_ir's attention kernel asks it too.
inline int64_t max_accumulators(const MachineModel& m) { return m.vector_registers - 4; }

/// Does a register tile of `accumulators` vector accumulators fill the registers, leaving
/// under a fifth of max_accumulators empty? A tile that takes several vectors a row (fewer
/// broadcasts per FMA) leaves fewer rows to share each vector load; where that empties
/// registers, the rows are too few: attention's products take tiles of 4 vectors x 6 rows
/// with AVX-512's 32 registers (24 accumulators of 28) and 2 x 6 with AVX2's 16 (12 of 12),
/// not 4 x 2 or 3 x 3 (8 and 9 of 12) (calibration: attention tile rows). Inline for ember_ir.
inline bool fills_accumulators(const MachineModel& m, int64_t accumulators) {
  return 5 * accumulators >= 4 * max_accumulators(m);
}

/// The widest window (the extent of each reduction axis that indexes a padded input) through
/// which a tile of `tile_rows` output rows computes the padded rows it reads: tile_rows +
/// window - 1 of them, at most max_pad_recompute x tile_rows (7 for 16 rows). The bound holds
/// for every reduction axis that indexes the padded input, channels too: a 3-channel 7x7 stem
/// pads per tile, a blocked conv (a vector of 8 or 16 input channels) in a pass of its own.
int64_t max_padded_window(const MachineModel& m, int64_t tile_rows);

/// Does one row of a GEMV's dot products, a rolled sum that the code generator gives
/// ir::kMaxSumAccumulators vector accumulators (that many / fma_latency vectors a cycle), read
/// its weights at a 64-byte line a cycle, the L2's pace? At 512 bits it does; at 256 bits half of
/// it, so rows compute together there (AlterOpLayout's nn.dense_lanes, the schedule's DotRows).
bool gemv_row_keeps_pace(const MachineModel& m, DType t);

/// The lanes for vectors along an axis of `extent`: the full width, else the widest
/// half or quarter width that divides the extent (no masked tail), else the full width.
int64_t vector_lanes_for(const MachineModel& m, int64_t extent, DType t);

/// Padded channel vectors must carry at least this share of channels (see channel_block_for).
inline constexpr double kMinUsefulLanes = 0.9;

/// The channel block of a blocked (NCHW[c]c) tensor of `channels`, the one place that
/// decides where padding pays: two vectors where they divide the channels (a conv's
/// register tile then holds two output-channel vectors per pixel, sharing each broadcast
/// input twice), else three where they divide them (24 on AVX2), else one vector. Otherwise
/// the channels are padded up to a multiple of one vector (two where that pads no more)
/// where the pad lanes are under a tenth
/// (kMinUsefulLanes: 38 -> 40 and 100 -> 104 on AVX2): a conv between two padded tensors
/// runs 1 / useful^2 its multiply-adds, 1.47x for 33 -> 40. Where half a vector divides the
/// channels, padded whole vectors where they keep useful^2 over a half (half vectors run half
/// the FMA peak: 24 on AVX-512 pads to 32), else half vectors (8 on AVX-512); else 0: keep
/// the plain layout (33 channels, and 5 on AVX2).
int64_t channel_block_for(const MachineModel& m, int64_t channels, DType t);

/// The register tile for a reduction whose output is `rows` x `cols` (the tiled axis and
/// the innermost axis): vectors that divide the columns (no masks in the hot loop), or
/// (`shift_columns`: the vectors may start at any column, not only at a packed panel's)
/// full vectors in column tiles whose last one is shifted back where only narrower vectors
/// divide them, and rows in tiles whose last one is shifted back where they do not divide
/// (SplitTail::Shift: a few values computed twice, no guards), chosen for the best estimated
/// FMA throughput times the share of computed lanes that are columns:
/// accumulators to cover the FMA latency, within the registers, loads per FMA within the
/// load ports, and few recomputed rows. `rows_share_vectors` is false where every row loads
/// vectors of its own and only the broadcast is shared (a depthwise conv in NCHW: each output
/// row reads its own input rows under one weight). `vectors_from_l3`: the shared vectors
/// stream from the L3 (MachineModel::l3_bytes_per_cycle) rather than from the L1 or L2.
/// `panel_k` (0: unknown): the reduction length of a GEMM whose column panel (panel_k x the
/// tile's columns) is reused by many row tiles from the L2; a tile whose panel overflows the
/// L2 streams its vectors from the L3 instead.
RegisterTile choose_register_tile(const MachineModel& m, int64_t rows, int64_t cols, DType t,
                                  bool rows_share_vectors = true, bool vectors_from_l3 = false,
                                  int64_t panel_k = 0, bool shift_columns = false);

/// Rows of a GEMM output to compute at once when a row statistic reads it (layer norm on a
/// dense): at most half of them (two blocks to run in parallel), whose output (`row_bytes`
/// each) fits in half the L2; a divisor of `rows` where one comes within half that cap,
/// else even blocks under it (the schedule shifts the last block back).
int64_t choose_row_block(const MachineModel& m, int64_t rows, int64_t row_bytes);

}  // namespace ember::passes
