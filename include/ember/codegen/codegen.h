#pragma once
/// LLVM code generation: loop IR to LLVM IR, optimised at O3 for the host CPU and compiled
/// in process with ORC JIT.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ember/ir/loop.h"
#include "ember/runtime/module.h"

namespace ember::codegen {

struct CpuOptions {
  /// LLVM CPU name; "" or "native" means the host CPU with its real features.
  std::string cpu = "native";
  /// Vector width in bits the code is written for (ember/codegen/target.h); 0 leaves
  /// LLVM's choice for the CPU. Recorded on every function, so an export keeps it.
  int vector_bits = 0;
  int opt_level = 3;
};

/// Compiles the functions into one JIT module. Each PrimFunc becomes an exported function
/// `void name(void** args)` (runtime::KernelFn). The module keeps the optimised LLVM IR
/// ("ll") and the assembly ("asm") for get_source. LLVM failures throw InternalError.
std::shared_ptr<runtime::Module> compile_cpu(const std::vector<ir::PrimFunc>& funcs,
                                             const CpuOptions& options = {});

struct CudaOptions {
  std::string arch = "sm_80";  // "sm_90" for Hopper
};

/// Compiles the functions to PTX through LLVM's NVPTX backend (no CUDA needed to build).
/// Each PrimFunc's GPU-bound loops (ForKind::GpuBlock*/GpuThread*) become the launch grid;
/// the functions must have been through passes::lower_gpu_phases (shared buffers, barriers).
/// The module runs kernels through the CUDA driver when one is present, and otherwise fails
/// at run time with a clear ember::Error; get_source("ptx") always works.
std::shared_ptr<runtime::Module> compile_cuda(const std::vector<ir::PrimFunc>& funcs,
                                              const CudaOptions& options = {});

/// Runs `step`, a call into LLVM, so that LLVM's errors become ember::InternalError ("LLVM
/// failed while <what>: ...") instead of exiting the process or unwinding through LLVM. Error
/// diagnostics of an LLVMContext made with this back end's handler, and fatal errors
/// (llvm::report_fatal_error), are recorded and checked once LLVM is back. A fatal error
/// leaves LLVM's objects in an unknown state: the step's locals are abandoned (leaked), so
/// keep every LLVM object the step uses inside it. Exceptions the step throws pass through.
void run_llvm(const std::string& what, const std::function<void()>& step);

/// Vector lanes for `dtype` on the host CPU (16 float32 lanes with AVX-512).
int native_vector_lanes(DType dtype);

/// Single-thread float32 FMA throughput in GFLOP/s of code Ember compiles for `target`
/// (independent FMA chains at the target's vector width), the best of runs over `seconds`.
/// Kernel efficiency is quoted against this number (benchmarks/kernels.py).
double measure_fma_peak(const std::string& target = "llvm", double seconds = 0.3);

}  // namespace ember::codegen
