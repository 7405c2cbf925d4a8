// The executor's two devices (launcher.h).
#include "launcher.h"

#include <chrono>

#include "ember/runtime/cuda.h"
#include "ember/runtime/kernel_error.h"
#include "ember/support/error.h"

namespace ember::runtime {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

[[noreturn]] void missing_function(const ExecGraph::Kernel& k, const char* module) {
  fail("kernel '", k.name, "': the ", module, " has no function '", k.func,
       "'; the module does not match the graph, rebuild the model");
}

class CpuLauncher final : public KernelLauncher {
 public:
  CpuLauncher(std::shared_ptr<const ExecGraph> graph, std::shared_ptr<Module> module)
      : graph_(std::move(graph)), module_(std::move(module)) {
    EMBER_CHECK(module_ != nullptr || graph_->kernels.empty(), "GraphExecutor needs a module");
    for (const auto& k : graph_->kernels) {
      KernelFn fn = module_->get_function(k.func);
      if (!fn) missing_function(k, "module");
      fns_.push_back(fn);
    }
  }
  Device device() const override { return {}; }
  NDArray alloc(const Shape& shape, DType dtype, bool zero) const override {
    return zero ? NDArray::zeros(shape, dtype) : NDArray::empty(shape, dtype);
  }
  NDArray place_param(const NDArray& param) const override { return param; }
  void run(Args& args) override {
    KernelErrors errors;
    KernelErrorScope scope(&errors);
    for (size_t k = 0; k < fns_.size(); ++k) {
      fns_[k](args[k].data());
      check(errors, k);
    }
  }
  double time_runs(Args& args, int number) override {
    auto t0 = Clock::now();
    for (int j = 0; j < number; ++j) run(args);
    return ms_since(t0) / number;
  }
  void time_kernels(Args& args, std::vector<double>& total) override {
    KernelErrors errors;
    KernelErrorScope scope(&errors);
    for (size_t k = 0; k < fns_.size(); ++k) {
      auto t0 = Clock::now();
      fns_[k](args[k].data());
      total[k] += ms_since(t0);
      check(errors, k);
    }
  }

 private:
  // ember::Error naming kernel k when it reported bad data (an index out of range).
  void check(KernelErrors& errors, size_t k) const {
    if (errors.failed()) fail(errors.take_message(graph_->kernels[k].name));
  }
  std::shared_ptr<const ExecGraph> graph_;
  std::shared_ptr<Module> module_;  // keeps fns_ alive
  std::vector<KernelFn> fns_;
};

class CudaLauncher final : public KernelLauncher {
 public:
  CudaLauncher(std::shared_ptr<const ExecGraph> graph, std::shared_ptr<cuda::CudaModule> module)
      : graph_(std::move(graph)), module_(std::move(module)) {
    module_->load(0);
    for (const auto& k : graph_->kernels)
      if (!module_->kernels().count(k.func)) missing_function(k, "CUDA module");
  }
  Device device() const override { return {DeviceType::CUDA, 0}; }
  NDArray alloc(const Shape& shape, DType dtype, bool zero) const override {
    return zero ? cuda::zeros(shape, dtype) : cuda::empty(shape, dtype);
  }
  NDArray place_param(const NDArray& param) const override {
    NDArray t = cuda::empty(param.shape(), param.dtype());
    cuda::copy(t, param);
    return t;
  }
  void run(Args& args) override {
    launch_all(args);
    cuda::synchronize();
  }
  double time_runs(Args& args, int number) override {
    // GPU time between events, launches queued back to back.
    cuda::Event start, stop;
    start.record();
    for (int j = 0; j < number; ++j) launch_all(args);
    stop.record();
    return stop.elapsed_since(start) / number;
  }
  void time_kernels(Args& args, std::vector<double>& total) override {
    for (size_t k = 0; k < args.size(); ++k) {
      cuda::Event start, stop;
      start.record();
      module_->launch(graph_->kernels[k].func, args[k]);
      stop.record();
      total[k] += stop.elapsed_since(start);
    }
  }

 private:
  void launch_all(Args& args) {
    for (size_t k = 0; k < args.size(); ++k) module_->launch(graph_->kernels[k].func, args[k]);
  }
  std::shared_ptr<const ExecGraph> graph_;
  std::shared_ptr<cuda::CudaModule> module_;
};

}  // namespace

std::unique_ptr<KernelLauncher> make_launcher(const std::shared_ptr<const ExecGraph>& graph,
                                              const std::shared_ptr<Module>& module) {
  if (auto gpu = std::dynamic_pointer_cast<cuda::CudaModule>(module))
    return std::make_unique<CudaLauncher>(graph, std::move(gpu));
  return std::make_unique<CpuLauncher>(graph, module);
}

}  // namespace ember::runtime
