#pragma once
/// The runtime's own thread pool (src/runtime/parallel.cc). Generated code calls
/// ember_parallel_for for each parallel loop, with the loop body outlined into `body`.
#include <cstdint>

extern "C" {
/// Runs body(begin, end, closure) over a static partition of [0, n) on the pool's threads
/// (body runs iterations begin..end-1). Returns 0.
int ember_parallel_for(int64_t n, void (*body)(int64_t begin, int64_t end, void* closure),
                       void* closure);
}

namespace ember::runtime {
/// Threads used by parallel loops; defaults to OMP_NUM_THREADS or the number of cores.
void set_num_threads(int n);
int get_num_threads();
}  // namespace ember::runtime
