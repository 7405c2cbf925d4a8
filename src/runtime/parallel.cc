#include "ember/runtime/parallel.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>

#include "ember/support/error.h"

namespace ember::runtime {

namespace {
int default_num_threads() {
  // OMP_NUM_THREADS may be a list ("4,2" for nested levels): the first entry is ours.
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    char* end = nullptr;
    long n = std::strtol(env, &end, 10);
    if (end != env && n >= 1) return static_cast<int>(std::min<long>(n, 1 << 16));
  }
  return std::max(1, omp_get_max_threads());
}

std::atomic<int>& num_threads_setting() {
  static std::atomic<int> n{default_num_threads()};
  return n;
}
}  // namespace

void set_num_threads(int n) {
  if (n < 1) fail("set_num_threads(", n, "): the thread count must be at least 1");
  num_threads_setting().store(n);
}

int get_num_threads() { return num_threads_setting().load(); }

}  // namespace ember::runtime

// Exported past -fvisibility=hidden: JIT code and exported shared libraries look it up by name.
extern "C" __attribute__((visibility("default"))) int ember_parallel_for(
    int64_t n, void (*body)(int64_t begin, int64_t end, void* closure), void* closure) {
  if (n <= 0) return 0;
  int threads = ember::runtime::get_num_threads();
  // Nested parallel loops run inline: the outer loop already occupies the pool.
  if (n == 1 || threads <= 1 || omp_in_parallel()) {
    body(0, n, closure);
    return 0;
  }
  int k = static_cast<int>(std::min<int64_t>(threads, n));
  // An exception must not leave an OpenMP region (that terminates the process): keep the
  // first one and rethrow it on the calling thread.
  std::exception_ptr error;
#pragma omp parallel num_threads(k)
  {
    // Static contiguous partition over the actual team size; the first n % team chunks take
    // one extra iteration (no n * i products, so no overflow for any n).
    int64_t team = omp_get_num_threads(), i = omp_get_thread_num();
    int64_t base = n / team, rem = n % team;
    int64_t begin = i * base + std::min(i, rem);
    int64_t end = begin + base + (i < rem ? 1 : 0);
    if (begin < end) {
      try {
        body(begin, end, closure);
      } catch (...) {
#pragma omp critical(ember_parallel_for_error)
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
  return 0;
}
