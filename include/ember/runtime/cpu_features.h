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

/// Code compiled for a CPU feature this machine lacks would die of SIGILL at the first
/// kernel: ember::Error (naming `where` and the model's `cpu`) unless this CPU has every "+"
/// feature of `features` (an LLVM feature string, "+avx2,+fma"). A feature this runtime
/// cannot check is refused too: loading would be a guess.
void check_cpu_features(const std::string& features, const std::string& cpu,
                        const std::string& where);

/// Every feature name host_has_cpu_feature can check (empty on hosts other than x86-64).
std::vector<std::string> checkable_cpu_features();

}  // namespace ember::runtime
