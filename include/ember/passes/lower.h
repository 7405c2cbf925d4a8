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
  std::string func;                   // symbol name
  std::string name;                   // source names joined by " + "
  std::vector<std::string> ops;       // op names, in order
  std::string anchor;                 // the op that sets the loop nest
  std::vector<std::string> patterns;  // fusion rules that fired (empty for a single op)
};

struct LoweredGraph {
  std::vector<ir::PrimFunc> funcs;
  std::vector<KernelInfo> kernels;  // parallel to funcs
  runtime::ExecGraph graph;
};

/// Lowers a primitive function (a fused group) with the default schedule into one PrimFunc
/// named `func_name`: the anchor's tile and the epilogue share one loop nest.
ir::PrimFunc lower_group(const ir::Function& group, const std::string& func_name,
                         const LowerOptions& options);

/// Lowers every call of `f` (op calls one kernel each, fused groups one kernel per group); view ops
/// (reshape, flatten) become executor views, constants become parameters, and the function's inputs
/// stay inputs in order.
LoweredGraph lower_graph(const ir::Function& f, const LowerOptions& options);

}  // namespace ember::passes
