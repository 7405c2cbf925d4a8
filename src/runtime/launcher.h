#pragma once
// Where a GraphExecutor's memory lives and how its kernels run: the one interface between
// the executor and the device, so the executor has no CPU-or-GPU branches. The CPU calls a
// Module's functions in order, checking the kernel error channel after each; the GPU
// launches a CudaModule's kernels on the launcher's own stream and, with CUDA graphs on,
// replays one recorded graph of a whole run from the second run on.
#include <memory>
#include <vector>

#include "ember/runtime/graph_executor.h"

namespace ember::runtime {

class KernelLauncher {
 public:
  using Args = std::vector<std::vector<void*>>;  // per kernel, one pointer per buffer

  virtual ~KernelLauncher() = default;
  virtual Device device() const = 0;
  /// A new tensor in the device's memory, zeroed or not.
  virtual NDArray alloc(const Shape& shape, DType dtype, bool zero) const = 0;
  /// A parameter where the kernels read it (the CPU reads the shared parameter itself).
  virtual NDArray place_param(const NDArray& param) const = 0;
  /// Runs every kernel in order and returns once they have finished; ember::Error naming
  /// a kernel that reported bad data.
  virtual void run(Args& args) = 0;
  /// Milliseconds per run over `number` runs back to back.
  virtual double time_runs(Args& args, int number) = 0;
  /// Runs every kernel once, adding each one's milliseconds to `total`.
  virtual void time_kernels(Args& args, std::vector<double>& total) = 0;
  /// Whether runs replay a CUDA graph (never on the CPU).
  virtual bool cuda_graph() const { return false; }
};

/// The launcher for `module`'s kind: a cuda::CudaModule is loaded on GPU 0 now (so a machine
/// without a GPU fails here, clearly); every kernel of `graph` is resolved now (ember::Error
/// naming a kernel the module lacks). `options.cuda_graph` applies to a CUDA module only.
std::unique_ptr<KernelLauncher> make_launcher(const std::shared_ptr<const ExecGraph>& graph,
                                              const std::shared_ptr<Module>& module,
                                              const ExecutorOptions& options);

}  // namespace ember::runtime
