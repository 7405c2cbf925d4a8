#pragma once
/// The CUDA driver calls under the public face (ember/runtime/cuda.h): raw device memory,
/// copies, and module load and launch (streams, events and graphs are in cuda.h). Internal to
/// src/ (CudaModule and the tensors use them). Every entry point throws a clear ember::Error
/// when there is no driver or no GPU, and names the kernel when a launch fails.
#include <cstddef>
#include <string>
#include <vector>

#include "ember/runtime/cuda.h"

namespace ember::runtime::cuda {

/// Device memory; `bytes` may be 0 (a unique dummy allocation is made).
void* alloc(size_t bytes, int device = 0);
void free(void* ptr, int device = 0) noexcept;
void copy_host_to_device(void* dst, const void* src, size_t bytes, int device = 0);
void copy_device_to_host(void* dst, const void* src, size_t bytes, int device = 0);
void copy_device_to_device(void* dst, const void* src, size_t bytes, int device = 0);

/// Low-level module calls (CudaModule uses them). module_load fails with an ember::Error
/// that says which architecture to build for when the GPU cannot run the PTX.
void* module_load(const std::string& ptx, const std::string& built_for, int device);
void module_unload(void* module, int device) noexcept;
void* module_function(void* module, const std::string& name, int device);
/// Launches on `stream` (a CUstream; null: the default stream); `args` are the kernel's
/// buffer pointers.
void launch_kernel(void* function, const LaunchDims& dims, const std::vector<void*>& args,
                   const std::string& name, int device, void* stream = nullptr);

}  // namespace ember::runtime::cuda
