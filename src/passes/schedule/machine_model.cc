#include "ember/passes/machine_model.h"

#include <algorithm>

#include "ember/ir/loop_sums.h"

namespace ember::passes {

MachineModel MachineModel::for_vector_bits(int vector_bits) {
  MachineModel m;
  m.vector_bits = vector_bits;
  m.vector_registers = vector_bits >= 512 ? 32 : 16;
  return m;
}

int64_t max_padded_window(const MachineModel& m, int64_t tile_rows) {
  // tile_rows + window - 1 padded rows, at most max_pad_recompute x tile_rows of them.
  const auto padded = static_cast<int64_t>(m.max_pad_recompute * static_cast<double>(tile_rows));
  return std::max<int64_t>(1, padded - tile_rows + 1);
}

bool gemv_row_keeps_pace(const MachineModel& m, DType t) {
  constexpr int64_t kLineBytes = 64;
  return m.lanes(t) * dtype_bytes(t) * ir::kMaxSumAccumulators / m.fma_latency >= kLineBytes;
}

int64_t vector_lanes_for(const MachineModel& m, int64_t extent, DType t) {
  int64_t full = m.lanes(t);
  for (int64_t l = full; l >= 4 && l >= full / 4; l /= 2)
    if (extent % l == 0) return l;
  return full;
}

int64_t channel_block_for(const MachineModel& m, int64_t channels, DType t) {
  const int64_t full = m.lanes(t), half = full / 2;
  auto round_up = [&](int64_t b) { return (channels + b - 1) / b * b; };
  if (channels % (2 * full) == 0) return 2 * full;
  // Three vectors before one: a one-vector block's register tile takes a broadcast per FMA,
  // and on 16 registers LLVM spills its 12 accumulators (calibration: three-vector channel
  // blocks).
  if (channels % (3 * full) == 0) return 3 * full;
  if (channels % full == 0) return full;
  // Padded to whole vectors, `useful` of the lanes carry channels. A conv between two padded
  // tensors runs 1 / useful^2 the multiply-adds: padding pays only where it wastes under a
  // tenth of the lanes (38 -> 40 and 100 -> 104 on AVX2, not 33 -> 40, 1.47x the
  // multiply-adds; calibration: kMinUsefulLanes). Two vectors where they pad no more than
  // one.
  const double useful = static_cast<double>(channels) / static_cast<double>(round_up(full));
  if (useful >= kMinUsefulLanes) return round_up(2 * full) == round_up(full) ? 2 * full : full;
  // Else half a vector where it divides, else the plain layout, whose vectors run along the
  // width (33 channels; 3 or 5 on AVX2). A half vector runs half the FMA peak where the FMA
  // units are full width (AVX2; AVX-512 on Zen 5 or Xeon; calibration: half-vector channel
  // blocks), so padding the channels beats it where the padded conv, 1 / useful^2 the work,
  // keeps over half the peak (24 on AVX-512 pads to 32).
  if (half >= 4 && channels % half == 0) return useful * useful > 0.5 ? full : half;
  return 0;
}

namespace {

// Estimated share of the FMA peak of an r x v register tile over `rows` rows (v vectors of
// `regs` registers each): per reduction step it issues r*v*regs FMAs and needs fma_ports *
// fma_latency independent accumulators. Its loads are r broadcasts and v*regs vector loads
// when the rows share the vectors (a GEMM's weights), else r*v*regs vector loads and one
// broadcast (a depthwise conv's rows of input under one weight). Vectors that stream from
// the L3 (`vector_bytes` each) also take their bytes' time at the L3's bandwidth.
double tile_efficiency(const MachineModel& m, int64_t rows, int64_t r, int64_t v, int64_t regs,
                       bool rows_share_vectors, int64_t l3_vector_bytes) {
  double acc = static_cast<double>(r * v * regs);
  double fma_cycles = acc / m.fma_ports;
  double loads = static_cast<double>(rows_share_vectors ? r + v * regs : r * v * regs + 1);
  double l3 = static_cast<double>(v * regs * l3_vector_bytes) / m.l3_bytes_per_cycle;
  double cycles =
      std::max({fma_cycles, loads / m.load_ports, static_cast<double>(m.fma_latency), l3});
  int64_t tiles = (rows + r - 1) / r;
  double useful = static_cast<double>(rows) / static_cast<double>(tiles * r);
  return useful * fma_cycles / cycles;
}

// Scores the tiles of r rows x `v` vectors of `lanes` (`regs` registers each) and keeps the
// best in `best`: the estimated share of the FMA peak, times the `useful` share of lanes.
void consider_tile(const MachineModel& m, int64_t rows, int64_t lanes, int64_t v, int64_t regs,
                   double useful, bool rows_share_vectors, bool vectors_from_l3, int64_t panel_k,
                   RegisterTile& best, double& best_score) {
  for (int64_t r = 1; r <= std::min<int64_t>(rows, 16); ++r) {
    // Accumulators, the vectors of one k step and a broadcast must fit in registers, and
    // the accumulators within max_accumulators.
    int64_t operands = rows_share_vectors ? v * regs + 1 : regs + 1;
    if (r * v * regs + operands > m.vector_registers || r * v * regs > max_accumulators(m))
      continue;
    // Where every row loads its own vectors (a depthwise conv in NCHW), the tile is
    // load-bound whatever its size: accumulators beyond what the FMA latency needs buy
    // nothing, and LLVM keeps the window's broadcasts (a 3x3 conv's 9 weights) in the
    // registers they would take (3 x 4 tiles spilled). Ties go to more vectors per row
    // (fewer halo columns of padded input per tile) but at least two rows (a one-row tile
    // leaves the rows untiled): 2 x 4 tiles rather than 3 x 4 (calibration: depthwise NCHW
    // tiles).
    const bool own_vectors = !rows_share_vectors;
    if (own_vectors && (r * v * regs > m.fma_ports * m.fma_latency || (r == 1 && rows > 1)))
      continue;
    // Ties go to fewer loads per FMA (to more vectors per row for own_vectors).
    // A panel over the L2 (BERT's 3072 -> 768 dense in 4 x 6 tiles of AVX-512 vectors:
    // 1.2 MB) is read from the L3 by every row tile, which a narrower tile (8 x 2) waits on
    // less (calibration: L3 panels).
    const int64_t vector_bytes = m.vector_bits / 8;
    const bool panel_in_l3 = panel_k * v * regs * vector_bytes > m.l2_bytes;
    const int64_t l3_bytes = vectors_from_l3 || panel_in_l3 ? vector_bytes : 0;
    double efficiency = useful * tile_efficiency(m, rows, r, v, regs, rows_share_vectors, l3_bytes);
    double score = efficiency - 1e-3 * static_cast<double>(own_vectors ? r : r + v * regs) /
                                    static_cast<double>(r * v * regs);
    if (score > best_score) {
      best_score = score;
      best.rows = r;
      best.vectors = v;
      best.lanes = lanes;
      best.efficiency = efficiency;
    }
  }
}

}  // namespace

RegisterTile choose_register_tile(const MachineModel& m, int64_t rows, int64_t cols, DType t,
                                  bool rows_share_vectors, bool vectors_from_l3, int64_t panel_k,
                                  bool shift_columns) {
  RegisterTile best;
  const int64_t full = m.lanes(t);
  int64_t lanes = std::min(vector_lanes_for(m, cols, t), std::max<int64_t>(cols, 1));
  // A short row that no vector width divides (7, 14, 28 pixels) is one vector of its own
  // length: LLVM splits it into register-sized pieces, with no masked tail.
  if (cols % lanes != 0 && cols <= 4 * full) lanes = cols;
  double best_score = -1;
  auto consider = [&](int64_t lanes, bool shifted) {
    const int64_t regs = (lanes + full - 1) / full;  // registers per vector
    const int64_t vecs = cols % lanes == 0 ? cols / lanes : 1;
    for (int64_t v = 1; v <= std::min<int64_t>(shifted ? cols / lanes : vecs, 8); ++v) {
      if (!shifted && vecs % v != 0) continue;
      // The share of the computed lanes that are columns: a narrower vector fills part of
      // its register; a shifted last tile recomputes columns.
      const int64_t tile_cols = v * lanes, tiles = (cols + tile_cols - 1) / tile_cols;
      const double useful = static_cast<double>(cols) / static_cast<double>(tiles * tile_cols) *
                            static_cast<double>(lanes) / static_cast<double>(regs * full);
      consider_tile(m, rows, lanes, v, regs, useful, rows_share_vectors, vectors_from_l3, panel_k,
                    best, best_score);
    }
  };
  consider(lanes, false);
  // Full vectors with a shifted last tile, where the columns take only narrower ones (56
  // pixels a row on AVX-512: 8 lanes fill half of each register; 16 recompute 8 of 64).
  if (shift_columns && lanes < full && cols > full) consider(full, true);
  return best;
}

int64_t choose_row_block(const MachineModel& m, int64_t rows, int64_t row_bytes) {
  const int64_t cap = std::max<int64_t>(1, std::min(rows / 2, m.l2_bytes / 2 / row_bytes));
  int64_t divisor = 1;
  for (int64_t b = 1; b <= cap; ++b)
    if (rows % b == 0) divisor = b;
  // Rows with no divisor near the cap (ViT's 197 tokens: only 1) take even blocks under it,
  // the last one shifted back over a few rows of the one before: one-row blocks would run
  // the GEMM as a GEMV per row, streaming the whole weight for every row.
  if (2 * divisor >= cap) return divisor;
  const int64_t blocks = (rows + cap - 1) / cap;
  return (rows + blocks - 1) / blocks;
}

}  // namespace ember::passes
