#pragma once
/// The machine model of a target CPU (passes/machine_model.h) taken from the CPU itself, not
/// from constants calibrated on the CPUs the project happened to have: the FMA's latency,
/// issue rate and datapath width and the vector load rate come from LLVM's scheduling model
/// of the CPU (-mcpu, or the host's CPU name); the cache sizes from sysfs for the host and
/// from a table of known CPUs for a named one. `ember.target.machine_model()` shows it.
#include <string>

#include "ember/codegen/target.h"
#include "ember/passes/machine_model.h"

namespace ember::codegen {

/// The widest float vector register of an x86-64 CPU: 512 bits with AVX-512F, 256 with AVX,
/// else SSE's 128. The one rule the target's default width, the machine model and the code
/// generator's register width all use.
int widest_vector_bits(bool avx512f, bool avx);
/// The same for an LLVM target-feature string ("+sse2,+avx,-avx512f,..."): a feature counts
/// where its last mention enables it (a name, not a prefix: "+avx512fp16" is not "+avx512f").
int widest_vector_bits(const std::string& features);
/// Whether an LLVM target-feature string enables `name` ("avx512vnni"): its last mention.
bool has_feature(const std::string& features, const std::string& name);

/// The model the schedules of a CPU target use (its threads field left at 1: the build sets
/// the threads it runs on). A CPU without a scheduling model in LLVM keeps the pinned facts
/// of its vector width, and `source` says so.
passes::MachineModel machine_model(const Target& target);

}  // namespace ember::codegen
