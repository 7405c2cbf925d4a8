#pragma once
#include "ember/ir/graph.h"
#include "ember/passes/machine_model.h"

namespace ember::passes {

/// AlterOpLayout (opt level 3, CPU targets only): puts constant weights into the layouts
/// the CPU schedules read with contiguous vector loads. An nn.dense whose weight [N, K] is a
/// constant becomes nn.dense_packed over nn.pack_dense_weight(weight) [N / b, K, b], with b
/// the vector lanes that divide N (vector_lanes_for); the FoldConstant step after this pass
/// packs the weight once at build time (with FoldConstant off, the packing runs per call and
/// the results are the same). The call keeps its name; the fusion report shows the packed
/// op as the kernel's anchor.
ir::Function alter_op_layout(const ir::Function& f, const MachineModel& machine);

}  // namespace ember::passes
