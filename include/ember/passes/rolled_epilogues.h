#pragma once
/// Rolled epilogues: a register tile's epilogue runs as an unrolled loop over the tile's
/// rows, so the tile stays in registers (LLVM promotes an array only where every index is a
/// constant). Where the epilogue is a long chain (celu, GELU: an exp or erf each), the
/// unrolled rows' chains are interleaved and their constants and temporaries outgrow the
/// registers: LLVM spills them. roll_long_epilogues copies the tile out first (unrolled, as
/// the accumulation reads it) into a stack array and runs the epilogue over it as a rolled
/// loop, one row's chains at a time, as the activation's own kernel would. Likewise a tile
/// that fills the registers (fills_accumulators) and rounds to bfloat16 in its epilogue, in
/// any kernel: the rounding's vector constants outgrow the registers the tile leaves free,
/// and LLVM spilled accumulators inside the reduction loop.
#include "ember/ir/loop.h"
#include "ember/passes/machine_model.h"

namespace ember::passes {

/// `f` with each unrolled loop, in no loop of more than one iteration (the kernel's only
/// tile), whose innermost vector loop stores a chain of at least
/// kLongChain operations of values read from local buffers (register tiles) copied out and
/// rolled: an unrolled copy of those buffers into stack arrays of their shape, then the
/// loop nest with its unrolled loops serial, reading the copies; and each such loop, in any
/// loop, that stores bfloat16 from register tiles that fill `machine`'s registers.
ir::PrimFunc roll_long_epilogues(const ir::PrimFunc& f, const MachineModel& machine);

}  // namespace ember::passes
