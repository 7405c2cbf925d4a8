#pragma once
#include "ember/ir/graph.h"
#include "ember/passes/machine_model.h"

namespace ember::passes {

/// AlterOpLayout (opt level 3, CPU targets only): puts tensors into the layouts the CPU
/// schedules read with contiguous vector loads (TVM's AlterOpLayout, oneDNN's nChw8c).
///  * nn.dense whose weight [N, K] is a constant becomes nn.dense_packed over
///    nn.pack_dense_weight(weight) [N / b, K, b], b the vector lanes that divide N.
///  * nn.conv2d (groups 1 or depthwise, constant weight) whose channels the vector lanes divide (a
///    channel block c: 8 for AVX2, 16 for AVX-512, or a half or quarter of it, chosen per
///    tensor by vector_lanes_for) becomes nn.conv2d_blocked on NCHW[c]c activations
///    [N, C/c, H, W, c] with the weight packed by nn.pack_conv_weight. A conv whose channels
///    no block divides (the RGB stem) keeps NCHW; channels are never padded.
///  * Elementwise ops keep the blocked layout: op(from_blocked(a), b) becomes
///    from_blocked(op(a, b')), where b' is b blocked (a residual of the same shape, a
///    per-channel constant [C, 1, 1]) or b itself (a scalar). Every other op reads the plain
///    layout through from_blocked, so a blocked value is converted back only where an op
///    needs NCHW (pooling, flatten, the outputs), and to_blocked once per tensor and block.
/// The FoldConstant step after this pass packs the weights and constants once at build time
/// (with FoldConstant off, the packing runs per call and the results are the same). Calls
/// keep their names; the fusion report shows the blocked or packed op as a kernel's anchor.
ir::Function alter_op_layout(const ir::Function& f, const MachineModel& machine);

}  // namespace ember::passes
