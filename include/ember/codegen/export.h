#pragma once
/// Exporting compiled models: host object code, a shared library linked from it, and the
/// artifact file (ember/runtime/artifact.h) that `ember.load` / runtime::load_library read.
#include <string>
#include <vector>

#include "ember/codegen/build.h"
#include "ember/codegen/codegen.h"

namespace ember::codegen {

/// Relocatable object code for the host CPU and what it needs at load time.
struct CpuObject {
  std::string bytes;                 // an ELF object file
  std::vector<std::string> imports;  // runtime functions reached through import slots
  std::string cpu, features;         // the CPU the code was compiled for
};

/// Compiles the functions to an object file, with exactly the code generation and
/// optimisation of compile_cpu (same LLVMCodeGen, same pipeline), as position-independent
/// code whose calls into the runtime go through import slots (runtime::LibraryModule).
CpuObject compile_cpu_object(const std::vector<ir::PrimFunc>& funcs,
                             const CpuOptions& options = {});

/// The same from the optimised LLVM IR a CPU module keeps (Module::get_source("ll")), so an
/// exported model runs the very code the in-process JIT ran. `manifest`
/// (runtime::write_kernel_manifest) is embedded in the object as a string constant. The
/// recorded `features` are the instruction-set features only, which a loading runtime
/// checks.
CpuObject compile_cpu_object_from_ir(const std::string& ll, int opt_level = 3,
                                     const std::string& manifest = "");

/// Links an object file into a shared library with the system C++ compiler (`c++` on
/// PATH) and returns the library's bytes. ember::Error when there is no compiler, with the
/// linker's message when linking fails.
std::string link_shared_library(const std::string& object);

/// Writes `lib` as one artifact file: graph, parameters, report and code ("cpu.so" for
/// CPU targets, "ptx" for CUDA targets).
void export_library(const Library& lib, const std::string& path);

}  // namespace ember::codegen
