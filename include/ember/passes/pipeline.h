#pragma once
/// The graph pass pipeline: one ordered list (src/passes/pipeline.cc).
#include <functional>
#include <string>

#include "ember/ir/graph.h"
#include "ember/passes/fuse_ops.h"
#include "ember/passes/machine_model.h"
#include "ember/passes/pass_context.h"

namespace ember::passes {

/// Evaluates an all-constant function (no inputs) and returns its outputs, by compiling and
/// running it with Ember's own pipeline for the host CPU. The build driver provides it, so
/// the passes library does not link codegen.
using ConstEvaluator = std::function<std::vector<runtime::Tensor>(const ir::Function&)>;

/// What the passes need to know of the target: layouts are chosen for the CPU's vectors.
struct PipelineTarget {
  bool gpu = false;
  MachineModel machine;
};

/// Runs the enabled graph passes in order and returns the rewritten function. With
/// config "dump_ir" = "1" (or EMBER_DUMP_IR=1 in the environment) the IR after each pass is
/// printed to stderr.
ir::Function run_pipeline(const ir::Function& f, const PassContext& ctx,
                          const PipelineTarget& target, const ConstEvaluator& evaluate,
                          std::vector<runtime::FusionEdge>* fusion_decisions = nullptr);

}  // namespace ember::passes
