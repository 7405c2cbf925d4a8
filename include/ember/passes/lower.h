#pragma once
/// Lowering the graph IR: every kernel (one op, or later one fused group) becomes one
/// loop-IR function, and the graph becomes the executor's list of kernel calls.
#include <string>
#include <vector>

#include "ember/ir/graph.h"
#include "ember/ir/loop.h"
#include "ember/runtime/graph_executor.h"

namespace ember::passes {

struct LowerOptions {
  int vector_bits = 512;  // the target's vector register width
  bool gpu = false;       // schedule for a GPU (apply_gpu_schedule) instead of the CPU
};

/// What one kernel computes, for reports.
struct KernelInfo {
  std::string func;               // symbol name
  std::string name;               // source names joined by " + "
  std::vector<std::string> ops;   // op names, in order
  std::string anchor;             // the op that sets the loop nest
};

struct LoweredGraph {
  std::vector<ir::PrimFunc> funcs;
  std::vector<KernelInfo> kernels;  // parallel to funcs
  runtime::ExecGraph graph;
};

/// Lowers one call node with the default schedule into a PrimFunc named `func_name`.
ir::PrimFunc lower_call(const ir::CallNode* call, const std::string& func_name,
                        const LowerOptions& options);

/// Lowers every call of `f`; view ops (reshape, flatten) become executor views, constants
/// become parameters, and the function's inputs stay inputs in order.
LoweredGraph lower_graph(const ir::Function& f, const LowerOptions& options);

}  // namespace ember::passes
