#pragma once
/// The cost rule of FuseOps: what a kernel costs, counted from its lowered loop nest and
/// priced with the machine model. A fusion that makes a kernel repeat work (a reduction
/// fused after a GEMM that would recompute the GEMM per reduction element, a producer
/// recomputed per tap of a window or per element of a broadcast) shows up as more
/// arithmetic than the separate kernels do, and FuseOps declines it.
#include <string>

#include "ember/ir/loop.h"
#include "ember/passes/machine_model.h"

namespace ember::passes {

/// The work of one lowered kernel. Every expression counts once per run of its statement:
/// the product of the extents of the loops around it.
struct KernelWork {
  double fmas = 0;               // multiply-adds (Fma), per element: a vector FMA of 8 lanes is 8
  double flops = 0;              // floating-point operations per element; an FMA counts 2
  double instructions = 0;       // arithmetic instructions issued: a vector instruction counts once
  double loads = 0, stores = 0;  // vector or scalar memory instructions
  double io_bytes = 0;           // size of the kernel's parameters (its inputs and outputs)
  double chain_cycles = 0;       // latency of accumulations that wait on the previous one
                                 // (acc = fma(a, b, acc)), divided among unrolled copies
  double latency_cycles = 0;     // each stored value's dependency chain, overlapped with
                                 // other runs only as far as the out-of-order window holds
  // The time of the work on one core: phase by phase, the busiest of the FMA ports, the load
  // ports, the store port, the accumulations' chains and the dependency chains' latency,
  // summed over the phases. A phase is a statement of a sequence too long for the out-of-order
  // window to overlap with its neighbours (a layer norm's statistics pass, then its normalize
  // pass); shorter statements share the phase around them.
  double cycles = 0;
  bool latency_bound = false;  // the dependency chains bound the phase that costs the most
  bool parallel = false;       // it has a parallel loop (the thread pool runs it)
};

/// Counts the work of `f`; vector loops count one instruction per `m.lanes(dtype)` lanes.
KernelWork kernel_work(const ir::PrimFunc& f, const MachineModel& m);

/// The time of `w` on one core: the longer of its `cycles` (the busiest resource, phase by
/// phase) and its inputs and outputs streamed through memory once.
double work_cycles(const KernelWork& w, const MachineModel& m);

/// Estimated cycles of a kernel: work_cycles plus the fixed cost of running a kernel at all
/// (the executor's call); a parallel kernel with m.threads > 1 takes the thread pool's
/// dispatch and join, then its work_cycles shared among the threads.
double estimated_cycles(const KernelWork& w, const MachineModel& m);

/// Runs `f`'s parallel loops serially where its work_cycles are under the grain at which
/// handing work to other threads pays (what PyTorch's grain size does, in this model's
/// cycles rather than elements). `f` comes annotated (AnnotateLoops); a kernel made serial
/// is annotated again.
ir::PrimFunc serial_below_parallel_grain(const ir::PrimFunc& f, const MachineModel& m);

}  // namespace ember::passes
