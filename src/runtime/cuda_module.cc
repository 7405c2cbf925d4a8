// CudaModule: PTX text plus the launch dimensions of each kernel. Creating one needs no GPU
// (ember.build with target="cuda" works anywhere); the driver is first touched by load().
#include "cuda_device.h"
#include "ember/support/error.h"

namespace ember::runtime::cuda {

CudaModule::CudaModule(std::string ptx, std::string ll, std::string arch,
                       std::map<std::string, LaunchDims> kernels)
    : ptx_(std::move(ptx)),
      ll_(std::move(ll)),
      arch_(std::move(arch)),
      kernels_(std::move(kernels)) {}

CudaModule::~CudaModule() { module_unload(module_, device_); }

KernelFn CudaModule::get_function(const std::string& name) const {
  fail("kernel '", name, "' is a GPU kernel (PTX for ", arch_,
       "): it has no host entry point; run it through ember.GraphModule");
}

std::string CudaModule::get_source(const std::string& format) const {
  if (format == "ptx") return ptx_;
  // A module loaded from an artifact keeps only the PTX (what the GPU needs).
  if (format == "ll" && !ll_.empty()) return ll_;
  fail("this ptx module has no '", format, "' source; its formats are ",
       ll_.empty() ? "'ptx' (a loaded model keeps only the PTX)" : "'ptx' and 'll'");
}

void CudaModule::load(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (module_) {
    if (device != device_)
      fail("this CUDA module is loaded on device ", device_, "; build it again for device ",
           device);
    return;
  }
  void* mod = module_load(ptx_, arch_, device);
  try {
    for (auto& entry : kernels_)
      functions_[entry.first] = module_function(mod, entry.second.symbol, device);
  } catch (...) {
    functions_.clear();
    module_unload(mod, device);
    throw;
  }
  module_ = mod;
  device_ = device;
}

void CudaModule::launch(const std::string& name, const std::vector<void*>& args,
                        const Stream* stream) {
  if (!module_) load(device_);
  auto it = kernels_.find(name);
  if (it == kernels_.end()) fail("kernel '", name, "' is not in this CUDA module");
  if (static_cast<int>(args.size()) != it->second.num_params)
    fail("kernel '", name, "' takes ", it->second.num_params, " buffers but was given ",
         args.size());
  launch_kernel(functions_.at(name), it->second, args, name, device_,
                stream ? stream->handle() : nullptr);
}

}  // namespace ember::runtime::cuda
