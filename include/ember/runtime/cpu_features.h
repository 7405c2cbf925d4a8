#pragma once
/// What this CPU can run: the instruction-set features a model's code was compiled for
/// (LLVM's names, "avx2", "avx512f", ...), checked with cpuid before the code is loaded.
#include <optional>
#include <string>
#include <vector>

namespace ember::runtime {

/// Whether this CPU (and its operating system, for the register state AVX and AMX need)
/// has the LLVM feature `name`; std::nullopt for a name this runtime cannot check. The names
/// are those LLVM's host detection uses (llvm::sys::getHostCPUFeatures), with its rules.
std::optional<bool> host_has_cpu_feature(const std::string& name);

/// Every feature name host_has_cpu_feature can check (empty on hosts other than x86-64).
std::vector<std::string> checkable_cpu_features();

}  // namespace ember::runtime
