#pragma once
/// The machine model of a target CPU (passes/machine_model.h) taken from the CPU itself, not
/// from constants calibrated on the CPUs the project happened to have: the FMA's latency,
/// issue rate and datapath width and the vector load rate come from LLVM's scheduling model
/// of the CPU (-mcpu, or the host's CPU name); the cache sizes from sysfs for the host and
/// from a table of known CPUs for a named one. `ember.target.machine_model()` shows it.
#include "ember/codegen/target.h"
#include "ember/passes/machine_model.h"

namespace ember::codegen {

/// The model the schedules of a CPU target use (its threads field left at 1: the build sets
/// the threads it runs on). A CPU without a scheduling model in LLVM keeps the pinned facts
/// of its vector width, and `source` says so.
passes::MachineModel machine_model(const Target& target);

}  // namespace ember::codegen
