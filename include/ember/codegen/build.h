#pragma once
/// The build driver: graph passes, lowering, codegen, and a runtime module out.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ember/ir/graph.h"
#include "ember/ir/loop.h"
#include "ember/passes/fuse_ops.h"
#include "ember/passes/lower.h"
#include "ember/passes/pass_context.h"
#include "ember/runtime/graph_executor.h"

namespace ember {

/// A compiled model: the executor graph, the code, and what it was built from.
struct Library {
  std::shared_ptr<const runtime::ExecGraph> graph;
  std::shared_ptr<runtime::Module> module;
  std::vector<ir::PrimFunc> prim_funcs;        // the loop IR of each kernel
  std::vector<runtime::KernelReport> kernels;  // what each kernel computes (fusion report)
  std::vector<runtime::FusionEdge> fusion;     // every op-to-op edge: fused or why not
  runtime::TuningInfo tuning;                  // the tuning log applied (set by Python's build)
  ir::Function function;                       // the graph after the passes
  std::string target;
  std::string get_source(const std::string& format) const;
  /// Graphviz DOT of the compiled graph: each kernel a cluster of the ops it computes.
  std::string fusion_graph() const;
  /// Saves the model as one artifact file (codegen/export.h) for ember.load or
  /// runtime::load_library.
  void export_library(const std::string& path) const;
};

/// Compiles `f` for `target` ("llvm" is the host CPU). Function parameters whose names are
/// keys of `params` become constants; the rest are the model's inputs, in order. The graph
/// passes that run are chosen by `ctx` (all of them by default). `tuned` maps workload keys
/// (passes/tuning.h) to the schedule knobs of those kernels (CPU targets; python's
/// ember.build fills it from PassContext config "tuning_log").
std::shared_ptr<Library> build(const ir::Function& f, const std::string& target = "llvm",
                               const std::map<std::string, runtime::NDArray>& params = {},
                               const passes::PassContext& ctx = {},
                               const std::map<std::string, passes::ScheduleKnobs>* tuned = nullptr);

}  // namespace ember
