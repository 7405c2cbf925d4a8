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

// Kernels go to the launcher's own stream. With CUDA graphs on, the first run launches each
// kernel (a bad launch fails naming its kernel), and later runs replay one graph recorded
// from the launches of a whole run: one launch instead of one per kernel. The graph holds
// the argument pointers it was recorded with, so it is recorded again when they change.
class CudaLauncher final : public KernelLauncher {
 public:
  CudaLauncher(std::shared_ptr<const ExecGraph> graph, std::shared_ptr<cuda::CudaModule> module,
               bool cuda_graph)
      : graph_(std::move(graph)),
        module_(std::move(module)),
        use_graph_(cuda_graph && !graph_->kernels.empty()) {  // (no kernels: nothing to record)
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
    if (use_graph_ && launched_) {
      graph_for(args).launch(stream_);
    } else {
      launch_all(args);
    }
    stream_.synchronize();
    launched_ = true;
  }
  double time_runs(Args& args, int number) override {
    if (use_graph_) {
      if (!launched_) run(args);
      graph_for(args);  // recorded before the clock starts
    }
    // GPU time between events, runs queued back to back.
    cuda::Event start, stop;
    start.record(stream_);
    for (int j = 0; j < number; ++j) {
      if (use_graph_)
        cuda_graph_.launch(stream_);
      else
        launch_all(args);
    }
    stop.record(stream_);
    return stop.elapsed_since(start) / number;
  }
  void time_kernels(Args& args, std::vector<double>& total) override {
    for (size_t k = 0; k < args.size(); ++k) {
      cuda::Event start, stop;
      start.record(stream_);
      module_->launch(graph_->kernels[k].func, args[k], &stream_);
      stop.record(stream_);
      total[k] += stop.elapsed_since(start);
    }
  }
  bool cuda_graph() const override { return use_graph_; }

 private:
  void launch_all(const Args& args) {
    for (size_t k = 0; k < args.size(); ++k)
      module_->launch(graph_->kernels[k].func, args[k], &stream_);
  }
  // The graph of one run over `args`: recorded now if there is none or the pointers changed.
  cuda::Graph& graph_for(const Args& args) {
    if (!cuda_graph_.defined() || args != graph_args_) {
      cuda_graph_ = cuda::Graph();  // the old one goes first
      graph_args_.clear();
      cuda_graph_ = cuda::Graph::capture(stream_, [&] { launch_all(args); });
      graph_args_ = args;
    }
    return cuda_graph_;
  }
  // Members in this order so that the graph goes before the stream and the module.
  std::shared_ptr<const ExecGraph> graph_;
  std::shared_ptr<cuda::CudaModule> module_;
  cuda::Stream stream_;
  const bool use_graph_;
  bool launched_ = false;  // a run has launched the kernels one by one
  cuda::Graph cuda_graph_;
  Args graph_args_;  // the pointers cuda_graph_ was recorded with
};

}  // namespace

std::unique_ptr<KernelLauncher> make_launcher(const std::shared_ptr<const ExecGraph>& graph,
                                              const std::shared_ptr<Module>& module,
                                              const ExecutorOptions& options) {
  if (auto gpu = std::dynamic_pointer_cast<cuda::CudaModule>(module))
    return std::make_unique<CudaLauncher>(graph, std::move(gpu), options.cuda_graph);
  return std::make_unique<CpuLauncher>(graph, module);
}

}  // namespace ember::runtime
