#pragma once
/// Loads that the CPU code generator reads as blocks transposed in registers, and the FuseOps
/// cost model prices as such: one definition for both, so the estimate follows the code.
#include <cstdint>
#include <vector>

#include "ember/ir/loop.h"

namespace ember::ir {

/// A load in a vectorized loop of V lanes whose lanes lie `lane_stride` elements apart (a
/// column of a row-major matrix: a transpose, a layout change into channel blocks, a sum
/// along rows vectorized across them) while a serial loop around the vector loop steps it
/// by one element. Each V iterations of that loop then read V rows of V contiguous elements:
/// V vector loads and a V x V transpose in registers (V log2 V shuffles) instead of V x V
/// scalar loads.
struct TransposedLoad {
  const LoadNode* load;
  int64_t lane_stride;
};

struct TransposedLoads {
  const ForNode* vector_loop = nullptr;
  /// Unrolled loops between the serial loop and the vector loop (a register tile's): each
  /// combination of their iterations reads its own blocks.
  std::vector<const ForNode*> between;
  int64_t combinations = 1;  // the product of their extents
  std::vector<TransposedLoad> loads;
};

/// At most this much of transposed blocks per serial loop (combinations x loads x V x V
/// elements), so that they stay in the L1 while the iterations read them.
constexpr int64_t kMaxTransposedBytes = 16 * 1024;

/// The transposed loads of `outer`, or none. `outer` must be a serial or unrolled loop of at
/// least V iterations whose body is a vectorized loop of V lanes (V a power of two from 4 to
/// 64), or unrolled loops of constant extent, each the whole body of the one around it, down
/// to one. A load counts when its index is affine in the loops' variables (with coefficient
/// 1 in `outer`'s, and a lane stride beyond the 2 to 4 that one wide load and a shuffle
/// serve) and reads no variable bound inside the vector loop, and the vector loop neither
/// stores into the loaded buffer nor has a guard (every lane of every iteration reads, so
/// the blocks hold exactly the elements the iterations would read).
TransposedLoads transposed_loads(const ForNode* outer);

/// Does a store in `vector_loop` write a lane-varying value to a lane-invariant index
/// (`acc[0] = acc[0] + x[i]`)? Its lanes would race for one element: the loop is emitted as
/// a serial loop, which keeps the program's meaning, and its loads are not transposed.
bool lanes_collide(const ForNode* vector_loop);

}  // namespace ember::ir
