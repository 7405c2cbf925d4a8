#pragma once
/// The graph pass pipeline: one ordered list (graph_passes() in src/passes/pipeline.cc), from
/// which known_passes() and the PassContext checks are derived.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ember/ir/graph.h"
#include "ember/ir/loop.h"
#include "ember/passes/fuse_ops.h"
#include "ember/passes/machine_model.h"
#include "ember/passes/pass_context.h"
#include "ember/passes/schedule_knobs.h"

namespace ember::passes {

/// Evaluates an all-constant function (no inputs) and returns its outputs, by compiling and
/// running it with Ember's own pipeline for the host CPU. The build driver provides it, so
/// the passes library does not link codegen.
using ConstEvaluator = std::function<std::vector<runtime::NDArray>(const ir::Function&)>;

/// What the passes need to know of the target: layouts are chosen for the CPU's vectors.
struct PipelineTarget {
  bool gpu = false;
  MachineModel machine;
  /// The tuning table the build lowers with (LowerOptions::tuned; null: none), so that
  /// FuseOps' cost rule prices each candidate with the knobs its kernel will get.
  const std::map<std::string, ScheduleKnobs>* tuned = nullptr;
};

/// What a graph pass may read besides the graph: the target, the constant evaluator and the
/// FuseOps settings (from the PassContext config).
struct PassEnv {
  const PipelineTarget& target;
  const ConstEvaluator& evaluate;
  int fuse_max_depth;
  const MachineModel* fuse_machine;  // FuseOps' cost model; null: pattern rules only
  std::vector<runtime::FusionEdge>* fusion_decisions;
  // Int8Products's question, the target's int8_dot unless config "Int8Products.int8_dot" says
  // "on" (tests run the int8 kernels on any host) or "off".
  bool int8_dot = false;
  // Likewise for products of activations below 128 only (MachineModel::int8_dot_7bit).
  bool int8_dot_7bit = false;
  // BF16Products's question, likewise: the target's bf16_dot unless config
  // "BF16Products.bf16_dot" says "on" or "off".
  bool bf16_dot = false;
};

/// One step of the graph pipeline. A pass may appear more than once (FoldConstant); it runs
/// when the PassContext enables it at `opt_level`, and on CPU targets only when `cpu_only`.
struct GraphPass {
  std::string name;
  int opt_level;
  bool cpu_only;
  std::function<ir::Function(const ir::Function&, const PassEnv&)> run;
};
/// The graph passes in pipeline order: the one list.
const std::vector<GraphPass>& graph_passes();

/// The log after each build step: with config "dump_ir" = "1" (or EMBER_DUMP_IR=1 in the
/// environment) it prints "// after <step>" and the IR to stderr; otherwise it does nothing.
class StepLog {
 public:
  explicit StepLog(const PassContext& ctx);
  void operator()(const std::string& step, const ir::Function& f);
  void operator()(const std::string& step, const std::vector<ir::PrimFunc>& funcs);

 private:
  bool on_ = false;
  int steps_ = 0;
};

/// Runs the enabled graph passes in order and returns the rewritten function, logging the IR
/// after each one to `log` (a log of its own from `ctx` when null).
ir::Function run_pipeline(const ir::Function& f, const PassContext& ctx,
                          const PipelineTarget& target, const ConstEvaluator& evaluate,
                          std::vector<runtime::FusionEdge>* fusion_decisions = nullptr,
                          StepLog* log = nullptr);

}  // namespace ember::passes
