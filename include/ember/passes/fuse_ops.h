#pragma once
#include <map>
#include <string>
#include <vector>

#include "ember/ir/graph.h"
#include "ember/passes/machine_model.h"
#include "ember/passes/schedule_knobs.h"
#include "ember/runtime/report.h"

namespace ember::passes {

/// FuseOps (opt level 1): groups operators by TVM's post-dominator rules over the op
/// pattern kinds, and wraps each group in a primitive function called from the main
/// function (ir::call_function). Every call of an op that computes something ends up in
/// exactly one group; views (reshape) and constants stay outside. `max_depth` bounds the
/// number of ops in a group.
///
/// With a `machine` (CPU builds), every candidate group also passes the cost rule
/// (fusion_cost.h): the group is lowered with the default schedule and, where `tuned` (the
/// build's tuning table) has the group's workload, as the build will lower it (lower_tuned),
/// the cheaper estimate standing (the log's knobs ran no slower); its estimated cycles must
/// not exceed those of its parts as separate kernels; else the fusion is declined and the
/// decision says why ("the fused kernel would be slower: ..."). Without one (GPU builds,
/// whose schedules the CPU model does not describe) only the pattern rules apply. With
/// `gpu`, a GEMM or conv does not take a reduction of its output into its kernel: the GPU
/// schedules have no template for it (the report says so).

ir::Function fuse_ops(const ir::Function& f, int max_depth = 256,
                      std::vector<runtime::FusionEdge>* decisions = nullptr,
                      const MachineModel* machine = nullptr, bool gpu = false,
                      const std::map<std::string, ScheduleKnobs>* tuned = nullptr);

/// The catalog names of the fusion rules a primitive function (a fused group) embodies,
/// e.g. "conv2d+epilogue"; empty for a single op.
std::vector<std::string> fusion_patterns(const ir::Function& group);

/// The two-anchor rule `first` then `second` (through elementwise ops) forms, as FuseOps
/// names it ("conv+pooling", "depthwise conv -> pointwise conv"), or "" when none does: the
/// fusion trait Op::two_anchor of `first`'s op.
std::string two_anchor_pattern(const ir::CallNode* first, const ir::CallNode* second);

}  // namespace ember::passes
