#pragma once
/// The graph executor: runs a compiled model as a list of kernel calls over a planned,
/// reused memory pool. Usable from C++ with no Python and no LLVM.
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "ember/runtime/module.h"
#include "ember/runtime/ndarray.h"

namespace ember::runtime {

class KernelLauncher;  // src/runtime/launcher.h: the device
class ShapeBinding;    // src/runtime/shape_binding.h: run-time shapes
struct MemoryPlan;     // memory_plan.h

/// What `ember::build` produces for the executor: values (one per tensor in the compiled
/// graph), which of them are inputs, parameters and outputs, and the kernel calls in order.
///
/// Run-time shapes (dynamic shapes): a graph with `symbols` serves every value of each
/// symbol in its range with one build. A value's `dims` say how its dimensions follow the
/// symbols; its `shape` is their value with every symbol at its maximum, the size its
/// buffer is allocated at. A run's data is compact at the run's shape (row-major with the
/// run's dimensions) at the start of that buffer; the rest of the buffer is slack that
/// masked vector loads may touch. The symbols' values come from the inputs' shapes.
struct ExecGraph {
  /// A size known only at run time, and its range [min, max] (0 <= min <= max).
  struct Symbol {
    std::string name;
    int64_t min = 0, max = 0;
  };
  /// One dimension of a value: coef * (the product of `symbols`' values) + offset, symbols
  /// being indices into ExecGraph::symbols; with no symbols, the static size `offset`. A
  /// dimension with symbols has coef >= 1, so it is largest at the symbols' maxima.
  struct Dim {
    int64_t coef = 0, offset = 0;
    std::vector<int> symbols;
  };
  struct Value {
    Shape shape;
    DType dtype = DType::Float32;
    /// Empty: every dimension is static. Otherwise one per dimension of `shape`, which
    /// holds their values at the symbols' maxima.
    std::vector<Dim> dims;
  };
  struct Input {
    std::string name;
    int value;
  };
  struct Param {
    std::string name;
    int value;
    NDArray data;
  };
  struct Kernel {
    std::string func;       // symbol in the module
    std::string name;       // display name: source names joined by " + "
    std::vector<int> args;  // value ids: inputs first, then outputs
    int num_inputs = 0;
    /// The template that scheduled it and the schedule knobs it used ("" and none in
    /// model files saved before they were recorded).
    std::string schedule;
    std::vector<std::pair<std::string, int64_t>> schedule_knobs;
    /// The symbols whose values the kernel takes, in this order, as one more argument after
    /// its inputs: "shape_args", an int64 array (passes::lower_schedule with run-time
    /// extents). Empty: the kernel takes none, and its arguments are `args` alone.
    std::vector<int> symbols;
  };
  /// `dst` is the same memory as `src` with another shape (reshape, flatten).
  struct View {
    int dst, src;
  };
  std::vector<Value> values;
  std::vector<Input> inputs;
  std::vector<Param> params;
  std::vector<Kernel> kernels;
  std::vector<View> views;
  std::vector<int> outputs;
  std::vector<Symbol> symbols;  // empty: a static graph
};

struct BenchmarkResult {
  std::vector<double> results_ms;  // one per repeat: mean time of `number` runs
  double mean = 0, median = 0, max = 0, min = 0, std = 0;
  /// TVM-style "Execution time summary" table.
  std::string str() const;
};

struct KernelProfile {
  std::string name;
  std::string func;
  std::string schedule;  // the template and its knobs (schedule_label)
  double mean_ms = 0;
  double percent = 0;
  std::vector<Shape> shapes;  // argument shapes, inputs then outputs
};

/// A kernel's template and knob values as one label: "conv.chunked(tile_rows=4,k_chunk=16)".
std::string schedule_label(const ExecGraph::Kernel& k);

/// How an executor runs its kernels.
struct ExecutorOptions {
  /// CUDA modules: from the second run on, replay the whole run as one CUDA graph recorded
  /// from the first launches (one launch instead of one per kernel; recorded again when the
  /// kernels' argument pointers change). Off: every run launches each kernel. CPU modules
  /// ignore it.
  bool cuda_graph = true;
};

/// Threads: every call on one executor holds its lock, so calls from several threads are
/// serialized and never corrupt a result; separate executors (of one model or not) run in
/// parallel. A sequence set_input, run, get_output is three calls, though: another thread may
/// run in between, and the output buffer is shared. Threads that share one executor use
/// run(inputs), which does all three as one step and returns copies of the outputs.
///
/// Run-time shapes: with a graph that has symbols (ExecGraph), each run takes the symbols'
/// values from the shapes of its inputs, passes them to the kernels that take them, and
/// returns outputs at the run's shape. A static graph does none of this work.
class GraphExecutor {
 public:
  /// Plans memory (buffers reused once their last reader has run; inputs and outputs get
  /// their own) and resolves every kernel in `module`. With a CUDA module (target "cuda")
  /// all memory is on the GPU and kernels are launched; without a GPU this throws the
  /// "no CUDA driver found" ember::Error. Checks the graph's symbols and dimensions
  /// (ember::Error naming the symbol, e.g. one that no input dimension gives a value).
  GraphExecutor(std::shared_ptr<const ExecGraph> graph, std::shared_ptr<Module> module,
                const ExecutorOptions& options = {});
  ~GraphExecutor();

  int num_inputs() const;
  int num_outputs() const;
  std::vector<std::string> input_names() const;
  /// ember::Error listing the inputs when `name` is not one.
  int input_index(const std::string& name) const;
  /// Copies `value` (on the CPU or the executor's GPU) into the executor's own input
  /// buffer; shape and dtype must match
  /// (ember::Error naming the input, the expected and the given type). An input with
  /// run-time dimensions takes any shape of its rank whose static dimensions match and
  /// whose symbols' values lie in their ranges (else an ember::Error naming the input, the
  /// dimension, the symbol, its range and the size given); its data is copied compactly to
  /// the start of its maximum-size buffer. Whether two inputs agree on a symbol is checked
  /// when the next run starts.
  void set_input(int index, const NDArray& value);
  void set_input(const std::string& name, const NDArray& value);
  /// Runs every kernel; on a GPU it returns once they have finished. A CUDA graph that
  /// cannot be recorded is an ember::Error ("CUDA graph capture failed: ..."). With
  /// run-time shapes, each symbol takes the value its inputs give; two inputs that give it
  /// different values are an ember::Error naming the symbol, both inputs and both values
  /// (as for run(inputs), run_bound, benchmark and profile).
  void run();
  /// Sets every input (`inputs` in the order of input_names(), as set_input checks them),
  /// runs, and returns copies of the outputs (on device()), all as one step: the way for
  /// several threads to share one executor, each with its own inputs and outputs.
  std::vector<NDArray> run(const std::vector<NDArray>& inputs);
  /// Runs on the caller's memory (CPU only): the kernels read `inputs` (checked as
  /// set_input checks them; in input_names() order) where they are, with no copy, and write
  /// the outputs into new tensors, which are returned and never reused by a later run. An
  /// output that is an input or a parameter is a copy. Serialized with the other calls.
  /// With run-time shapes, an input with run-time dimensions is copied into a new buffer of
  /// its maximum size (the kernels' masked vector loads may read a few elements past a
  /// run's data, which the caller's run-sized memory does not have), and each output is
  /// the run's shape over the start of a new buffer of its maximum size. The executor's own
  /// inputs and outputs are left as they were.
  std::vector<NDArray> run_bound(const std::vector<NDArray>& inputs);
  /// Where the executor's tensors live (CUDA for a CUDA module).
  Device device() const;
  /// Whether runs replay a CUDA graph: ExecutorOptions::cuda_graph on a CUDA module.
  bool cuda_graph() const;
  /// The executor's output buffer (no copy, on device()): the next run() overwrites it. An
  /// output that is a parameter is a copy instead: the parameters are shared by every
  /// executor of the model, and writing through an output must not change them. With
  /// run-time shapes it has the last run's shape (a view of the buffer's first bytes).
  NDArray get_output(int index) const;
  /// The executor's input buffer (no copy), at the shape last set.
  NDArray get_input(int index) const;
  /// The graph's symbols (run-time shapes; empty for a static graph).
  const std::vector<ExecGraph::Symbol>& symbols() const { return graph_->symbols; }
  /// Each symbol's value in the last run, in the graph's order (its maximum before the
  /// first run: the buffers start at the maximum shape).
  std::vector<std::pair<std::string, int64_t>> symbol_values() const;
  /// With a CUDA graph, the runs timed are replays (recorded before timing starts).
  BenchmarkResult benchmark(int number = 1, int repeat = 10, int warmup = 1);
  /// Per-kernel mean times over `repeat` runs, in kernel order (each kernel launched alone,
  /// never through a CUDA graph), with the run's argument shapes.
  std::vector<KernelProfile> profile(int repeat = 10);
  /// Table of profile(): kernel, time, share, schedule, shapes (like TVM's debug executor).
  static std::string profile_table(const std::vector<KernelProfile>& p);
  const ExecGraph& graph() const { return *graph_; }
  /// Bytes of the planned intermediate pool (after reuse).
  size_t pool_bytes() const { return pool_bytes_; }

 private:
  std::shared_ptr<const ExecGraph> graph_;
  std::unique_ptr<KernelLauncher> launcher_;  // the CPU or the GPU (it holds the module)
  std::vector<NDArray> tensors_;              // one per value
  std::vector<std::vector<void*>> args_;      // per kernel, resolved pointers
  std::vector<bool> output_is_param_;         // per output: get_output copies it
  // run_bound's bookkeeping: each value's root (the value whose memory a view shares), and
  // the kernel argument slots (kernel, arg) that point into each input or output root.
  std::vector<int> root_;
  std::vector<bool> root_is_output_;
  std::vector<std::vector<std::pair<int, int>>> slots_;
  // Run-time shapes (dynamic_ only; a static graph leaves them empty). Per input, the shape
  // set and the symbols' values it gives; the values bound for the run; per kernel, its
  // shape_args array (undefined for a kernel that takes none).
  std::unique_ptr<ShapeBinding> binding_;
  bool dynamic_ = false;
  std::vector<Shape> input_shapes_;
  std::vector<std::vector<int64_t>> input_values_;
  std::vector<int64_t> run_values_;
  bool rebind_ = false;  // an input changed since run_values_ were bound
  std::vector<NDArray> shape_args_;
  void allocate(const MemoryPlan& plan);  // tensors_ as the plan says
  void init_run_shapes();  // the inputs, binding and shape_args_ at the symbols' maxima
  void bind_args(const MemoryPlan& plan);  // args_ and slots_
  // Checks `value` for input `index`; returns the symbols' values it gives (empty for an
  // input without run-time dimensions).
  std::vector<int64_t> check_input(int index, const NDArray& value) const;
  void point_slots(int root, void* data);
  // Value `v`'s shape with the symbols at `values` (its static shape in a static graph).
  Shape run_shape(int v, const std::vector<int64_t>& values) const;
  // `t` (a buffer of value v) at the shape of the symbols' `values`.
  NDArray at_run_shape(const NDArray& t, int v, const std::vector<int64_t>& values) const;
  void write_shape_args(const std::vector<int64_t>& values);
  // The unlocked steps of the public calls; callers hold mutex_.
  void set_input_locked(int index, const NDArray& value);
  void bind_locked();  // run_values_ and the shape_args from the inputs set
  void run_locked();
  // Output `index` at the last run's shape; reads run_values_, so with a dynamic graph the
  // caller holds mutex_.
  NDArray output_locked(int index) const;
  // run_bound after its checks, given each input's symbol values; takes mutex_ itself.
  std::vector<NDArray> run_bound_with(const std::vector<NDArray>& inputs,
                                      const std::vector<std::vector<int64_t>>& values);
  size_t pool_bytes_ = 0;
  // Held while a call reads or writes the executor's buffers (set_input, run, benchmark,
  // profile).
  mutable std::mutex mutex_;
};

}  // namespace ember::runtime
