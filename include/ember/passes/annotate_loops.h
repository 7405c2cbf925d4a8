#pragma once
/// AnnotateLoops, the kernel pass before SerialBelowParallelGrain: decides how the code generator emits each loop beyond
/// its kind (ir::LoopAnnotations: rolled sums and their accumulators, column loads read as
/// transposed blocks, long chains rolled into a call) and writes it on the loop. The code
/// generator and the FuseOps cost model read these annotations; neither decides them again.
#include "ember/ir/loop.h"
#include "ember/passes/machine_model.h"

namespace ember::passes {

/// `f` with every loop's annotations decided afresh for the CPU `machine` describes (its
/// vector lanes size a rolled sum's accumulators). Idempotent.
ir::PrimFunc annotate_loops(const ir::PrimFunc& f, const MachineModel& machine);

}  // namespace ember::passes
