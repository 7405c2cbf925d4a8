#pragma once
/// The pybind11 bindings, one function per area. module.cc builds `_ember` from all of them;
/// runtime_module.cc builds `_ember_runtime` from bind_runtime and bind_deploy (no LLVM).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

#include "ember/runtime/graph_executor.h"
#include "ember/runtime/ndarray.h"
#include "ember/runtime/report.h"

namespace ember::python {

/// Registers `EmberError` (ember::Error, the user's mistake) and `InternalError`
/// (ember::InternalError, a compiler bug): two unrelated exception classes.
void register_errors(pybind11::module_& m);
/// NDArray as ember.Tensor (buffer protocol, DLPack), GraphExecutor, BenchmarkResult, thread count.
void bind_runtime(pybind11::module_& m);
/// Graph IR nodes, their checking constructors, the op list, structural equality.
void bind_ir(pybind11::module_& m);
/// ember::build and Library, codegen queries.
void bind_build(pybind11::module_& m);
/// Loading saved artifacts (LoadedLibrary, _load); runtime only, so in both modules.
void bind_deploy(pybind11::module_& m);

// ---- helpers shared by the bind_* files (defined in bind_runtime.cc). They throw
// ember::Error, so a wrong argument reaches Python as EmberError, never as a crash.

/// "str 'abc'" style description of a Python value for error messages.
std::string describe(pybind11::handle value);
/// The value as a string; ember::Error naming `what` otherwise.
std::string str_arg(pybind11::handle value, const std::string& what);
/// The value as an integer (bool rejected); ember::Error naming `what` otherwise.
int64_t int_arg(pybind11::handle value, const std::string& what);

/// The executor's options from GraphModule's keywords: `cuda_graph` must be a bool (True,
/// False or a NumPy bool); ember::Error naming it otherwise.
runtime::ExecutorOptions executor_options(pybind11::handle cuda_graph);

/// A C-contiguous NumPy array and an ember NDArray viewing its memory. The view is valid
/// only while `array` lives, so the two travel together.
struct ArrayView {
  pybind11::array array;
  runtime::NDArray tensor;
};
/// Views `value` (a NumPy array) as an NDArray, making it
/// contiguous first. Its dtype must be one Ember has (ember::Error naming `what` if not).
ArrayView array_view(pybind11::handle value, const std::string& what);
/// An NDArray with its own copy of `value`: an NDArray, or an array as for array_view.
runtime::NDArray tensor_copy(pybind11::handle value, const std::string& what);

/// The report entries of Library and LoadedLibrary (defined in bind_deploy.cc): one dict per
/// kernel ({func, name, ops, anchor, patterns}, plus workload, tuned and tuning_note when a
/// tuning table was given), and one (producer, consumer, fused, reason) per fusion edge.
pybind11::list kernel_reports(const std::vector<runtime::KernelReport>& kernels,
                              const std::vector<runtime::ExecGraph::Kernel>& compiled);
pybind11::list fusion_edges(const std::vector<runtime::FusionEdge>& edges);
/// {log, cpu, vector_bits, threads} of the tuning log a build applied, None when none.
pybind11::object tuning_info(const runtime::TuningInfo& t);
/// The run-time sizes a graph serves (dynamic shapes): [(name, min, max)], empty if static.
pybind11::list graph_symbols(const runtime::ExecGraph& g);

}  // namespace ember::python
