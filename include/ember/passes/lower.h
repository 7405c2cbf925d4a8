#pragma once
/// Lowering the graph IR: every kernel (one op, or later one fused group) becomes one
/// loop-IR function, and the graph becomes the executor's list of kernel calls.
#include <map>
#include <string>
#include <vector>

#include "ember/ir/graph.h"
#include "ember/ir/loop.h"
#include "ember/ir/tensor_expr.h"
#include "ember/passes/machine_model.h"
#include "ember/passes/schedule_knobs.h"
#include "ember/runtime/graph_executor.h"
#include "ember/runtime/report.h"

namespace ember::passes {

struct LiveExtents;  // schedule.h

struct LowerOptions {
  /// The target CPU's model (codegen::machine_model), which every schedule, custom lowering
  /// (Op::lower) and loop pass reads; by default the pinned 512-bit one.
  MachineModel machine = MachineModel::for_vector_bits(512);
  bool gpu = false;  // schedule for a GPU (apply_gpu_schedule) instead of the CPU
  /// Tuned schedule knobs by workload key (tuning.h); kernels not in it, and all kernels
  /// when it is null, get the default schedule. CPU only.
  const std::map<std::string, ScheduleKnobs>* tuned = nullptr;
  /// GPU only: the precision GEMMs may run at on tensor cores (Highest: float32 FMAs).
  ir::MmaPrecision matmul_precision = ir::MmaPrecision::Highest;
  /// CPU: run cpu_loop_passes() on each kernel. A build turns this off and runs the list
  /// itself, logging the IR after each pass; FuseOps' cost rule and the tuner leave it on.
  bool loop_passes = true;
};

/// A loop-level pass run on every lowered CPU kernel.
struct LoopPass {
  const char* name;
  ir::PrimFunc (*run)(const ir::PrimFunc& f, const MachineModel& machine);
};

/// The CPU kernels' loop-level passes, in order: rewrites of long chains (a rolled
/// single-tile epilogue, row invariants as one vector), serial loops below the parallel
/// grain, and last the loops' annotations (annotate_loops.h) that the code generator
/// obeys. FuseOps' cost rule prices a group as these leave it.
const std::vector<LoopPass>& cpu_loop_passes();

struct LoweredGraph {
  std::vector<ir::PrimFunc> funcs;             // one per distinct loop nest (kernels may share one)
  std::vector<runtime::KernelReport> kernels;  // parallel to graph.kernels
  runtime::ExecGraph graph;
};

/// The template that scheduled a group and the CPU schedule's knob values it used (those
/// that applied: non-zero), as the fusion report, profile() and the model file show them.
struct ScheduleChoice {
  std::string name;
  std::vector<std::pair<std::string, int64_t>> knobs;
};

/// Lowers a primitive function (a fused group) with the default schedule into one PrimFunc
/// named `func_name`: the anchor's tile and the epilogue share one loop nest. `knobs`
/// override the CPU schedule's choices (schedule_knobs.h); `choice`, when given, receives
/// the template and knobs used.
ir::PrimFunc lower_group(const ir::Function& group, const std::string& func_name,
                         const LowerOptions& options, const ScheduleKnobs& knobs = {},
                         ScheduleChoice* choice = nullptr);

/// Lowers `group` as a build does: with its tuned knobs where `options.tuned` has its
/// workload (workload_key), else with the default schedule. Tuned knobs that do not fit the
/// kernel (a damaged log) fall back to the default schedule instead of failing. `info`, when
/// given, receives the workload, the knobs applied or the note that says why they were not;
/// `choice` is lower_group's. FuseOps' cost rule lowers a candidate with it too where the
/// table has its workload, so that it prices the kernel the build will make.
ir::PrimFunc lower_tuned(const ir::Function& group, const std::string& func_name,
                         const LowerOptions& options, runtime::KernelReport* info = nullptr,
                         ScheduleChoice* choice = nullptr);

/// A GEMM or GEMV kernel over run-time rows (`general`, the group lowered with `choice`)
/// whose register tile has more rows than some runs: those runs would compute a whole tile
/// (7 tokens on a tile of 8, one row in a tile of 4), so a build of the group for each
/// shorter count, its tile that many rows, serves them (dispatch_by_range on the run's rows;
/// `choice`'s name gains "+runs(rows=1,2,3)", which the fusion report shows). Else `general`.
ir::PrimFunc with_short_run_parts(const ir::Function& group, const std::string& func_name,
                                  const LowerOptions& options, ir::PrimFunc general,
                                  ScheduleChoice& choice);
/// Whether `group` is one op with its own lowering (Op::lower: no schedule knobs).
bool has_custom_lowering(const ir::Function& group);
/// The type that `node`, a node of `group`, has in the group's loop nest: a group of a
/// blocked conv (groups 1) and elementwise ops computes its [.., H, W, c] tensors as
/// [.., 1, H*W, c] (the same memory; register tiles then walk H*W pixels, not rows of W)
/// where the conv is pointwise (1x1, stride 1, no padding), or where the machine model
/// `machine` says its register tiles fit H*W pixels better
/// than rows of W; a windowed conv's input keeps its shape. Its own type for any other group
/// or node.
ir::TensorType flat_pixel_type(const ir::Function& group, const ir::Expr& node,
                               const MachineModel& machine);
/// The group's result as a tensor expression over placeholders for its params (`inputs`),
/// for the target `machine` describes. Where the group's types have run-time dimensions,
/// `live` (when given) receives their symbols (function_symbols' order) and the run-time
/// shapes of its inputs, op results and output, for Schedule::live().
ir::Tensor group_compute(const ir::Function& group, std::vector<ir::Tensor>& inputs,
                         const MachineModel& machine, LiveExtents* live = nullptr);

/// Lowers every call of `f` (op calls one kernel each, fused groups one kernel per group); view ops
/// (reshape, flatten) become executor views, constants become parameters, and the function's inputs
/// stay inputs in order. Kernels whose loop nests are the same share one function.
LoweredGraph lower_graph(const ir::Function& f, const LowerOptions& options);

}  // namespace ember::passes
