#pragma once
/// A runtime module: compiled kernels looked up by name. The in-process JIT module that
/// implements it lives in codegen, so the runtime never links LLVM.
#include <memory>
#include <string>

namespace ember::runtime {

/// Every compiled kernel has this ABI: `args` holds one pointer per kernel buffer, inputs
/// first then outputs, in the order of the kernel's PrimFunc params.
using KernelFn = void (*)(void** args);

class Module {
 public:
  virtual ~Module() = default;
  /// The kernel's entry point; ember::Error naming the kernel when it is missing.
  virtual KernelFn get_function(const std::string& name) const = 0;
  /// "llvm-jit", "so", "ptx".
  virtual std::string type_key() const = 0;
  /// Generated source in a format ("ll", "asm", "ptx"); ember::Error listing the formats
  /// this module has when it has not that one.
  virtual std::string get_source(const std::string& format) const = 0;
};

}  // namespace ember::runtime
