// The runtime's thread pool for parallel loops.
//
// One pool per process, shared by every caller: num_threads - 1 worker threads, and the
// calling thread takes part. That bounds the threads Ember starts, however many threads
// run models (OpenMP would give each calling thread a team of its own). One loop holds the
// pool at a time; a loop that finds it busy (another thread's model is using it) runs on
// its caller alone, so concurrent models never wait for each other and never add threads.
//
// A loop: the caller writes the job, then publishes it by bumping `job_` (a generation
// count and the team size in one atomic word); workers spin briefly for it, then sleep on a
// condition variable (the spin keeps back-to-back kernels cheap, the sleep keeps an idle
// pool off the CPU). Each participant runs one static, contiguous chunk; the caller runs
// chunk 0 and waits for the others the same way. A worker outside the team only reads the
// job word, so a next job may be written while it looks.
//
// fork(): the child has only the forking thread, so the pool's workers do not exist there.
// An atfork handler abandons the parent's pool in the child (never touching its locks or
// threads again) and the child's first loop starts a fresh one.
#include "ember/runtime/parallel.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "ember/runtime/kernel_error.h"
#include "ember/support/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define EMBER_CPU_RELAX() _mm_pause()
#else
#define EMBER_CPU_RELAX() std::this_thread::yield()
#endif

namespace ember::runtime {

namespace {

using Body = void (*)(int64_t begin, int64_t end, void* closure);

// Set on pool workers, and on a caller while it runs a loop: a parallel loop inside a
// parallel loop runs inline.
thread_local bool t_in_parallel = false;

// Spins before sleeping: long enough to catch the next kernel of a model, short enough not
// to keep a core busy for nothing; short when the pool has more threads than the process
// has CPUs (a spinning thread would take a CPU from one with work).
constexpr int kSpins = 1 << 14, kOversubscribedSpins = 64;
constexpr int kTeamBits = 16;  // team sizes up to 65535 (set_num_threads allows 4096)

int available_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return std::max(1u, std::thread::hardware_concurrency());
}

class Pool {
 public:
  explicit Pool(int workers)
      : size_(workers + 1), spins_(size_ > available_cpus() ? kOversubscribedSpins : kSpins) {
    threads_.reserve(workers);
    for (int w = 1; w <= workers; ++w) threads_.emplace_back([this, w] { work(w); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  int size() const { return size_; }

  // Runs body over [0, n) on min(threads, n) participants, or returns false at once when
  // another loop holds the pool.
  bool try_run(int64_t n, Body body, void* closure, int threads) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    const int team = static_cast<int>(std::min<int64_t>({threads, n, size_}));
    n_ = n;
    body_ = body;
    closure_ = closure;
    kernel_errors_ = current_kernel_errors();  // the team reports to the caller's record
    error_ = nullptr;
    remaining_.store(team - 1);
    // Publishes the job: the next generation with the team size (seq_cst: see wait_for_job).
    uint64_t generation = (job_.load() >> kTeamBits) + 1;
    job_.store(generation << kTeamBits | static_cast<uint64_t>(team));
    if (sleepers_.load() > 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      wake_.notify_all();
    }
    run_chunk(0, team);
    // Wait for the other participants.
    for (int spin = 0; remaining_.load(std::memory_order_acquire) > 0; ++spin) {
      if (spin < spins_) {
        EMBER_CPU_RELAX();
        continue;
      }
      std::unique_lock<std::mutex> lock(mutex_);
      caller_sleeping_.store(true);
      done_.wait(lock, [&] { return remaining_.load() == 0; });
      caller_sleeping_.store(false);
      break;
    }
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  // Static contiguous partition: the first n % team chunks take one extra iteration (no
  // n * i products, so no overflow for any n).
  void run_chunk(int i, int64_t team) {
    int64_t base = n_ / team, rem = n_ % team;
    int64_t begin = i * base + std::min<int64_t>(i, rem);
    int64_t end = begin + base + (i < rem ? 1 : 0);
    if (begin >= end) return;
    KernelErrorScope errors(kernel_errors_);
    try {
      body_(begin, end, closure_);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
  }

  void work(int index) {
    t_in_parallel = true;
    uint64_t seen = 0;
    while (true) {
      uint64_t job = wait_for_job(seen);
      if (job == 0) return;  // stopping
      seen = job;
      int team = static_cast<int>(job & ((uint64_t{1} << kTeamBits) - 1));
      if (index >= team) continue;  // this loop needs fewer threads
      run_chunk(index, team);
      // seq_cst, paired with the caller's store of caller_sleeping_ and load of remaining_.
      if (remaining_.fetch_sub(1) == 1 && caller_sleeping_.load()) {
        std::lock_guard<std::mutex> lock(mutex_);
        done_.notify_all();
      }
    }
  }

  // The job word after `seen`, or 0 when the pool stops.
  uint64_t wait_for_job(uint64_t seen) {
    for (int spin = 0; spin < spins_; ++spin) {
      uint64_t job = job_.load(std::memory_order_acquire);
      if (job != seen) return job;
      EMBER_CPU_RELAX();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    // Counted before the job word is read again: a caller that publishes a job after this
    // read sees sleepers_ > 0 and notifies (both are seq_cst).
    sleepers_.fetch_add(1);
    wake_.wait(lock, [&] { return stop_ || job_.load() != seen; });
    sleepers_.fetch_sub(1);
    return stop_ ? 0 : job_.load();
  }

  const int size_;   // workers + the caller
  const int spins_;  // spin iterations before sleeping
  std::vector<std::thread> threads_;
  std::mutex busy_;  // held by the caller of the loop in flight

  // The job in flight, written by its caller before it publishes job_; read only by the
  // team, which finishes before the next job is written.
  int64_t n_ = 0;
  Body body_ = nullptr;
  void* closure_ = nullptr;
  KernelErrors* kernel_errors_ = nullptr;
  std::exception_ptr error_;
  std::mutex error_mutex_;

  std::atomic<uint64_t> job_{0};   // generation << kTeamBits | team size
  std::atomic<int> remaining_{0};  // workers of the job still running
  std::atomic<int> sleepers_{0};
  std::atomic<bool> caller_sleeping_{false};
  std::mutex mutex_;  // for the condition variables and stop_
  std::condition_variable wake_, done_;
  bool stop_ = false;
};

int default_num_threads() {
  // OMP_NUM_THREADS may be a list ("4,2" for nested levels): the first entry is ours.
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    char* end = nullptr;
    long n = std::strtol(env, &end, 10);
    if (end != env && n >= 1) return static_cast<int>(std::min<long>(n, 4096));
  }
  // The CPUs this process may run on (a container or taskset may allow fewer than exist).
  return available_cpus();
}

std::atomic<int>& num_threads_setting() {
  static std::atomic<int> n{default_num_threads()};
  return n;
}

// The pool, made on first use and replaced when the thread count changes; a loop in flight
// keeps the pool it started on alive. Heap-held and never destroyed at exit: worker threads
// must not be joined from static destructors.
std::mutex g_pool_mutex;
std::shared_ptr<Pool>* g_pool = nullptr;

void before_fork() { g_pool_mutex.lock(); }
void after_fork_in_parent() { g_pool_mutex.unlock(); }
void after_fork_in_child() {
  // The parent's workers do not exist here: abandon its pool (leaked, never touched again).
  g_pool = nullptr;
  g_pool_mutex.unlock();
}

std::shared_ptr<Pool> pool_for(int threads) {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  static const bool registered = [] {
    pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
    return true;
  }();
  (void)registered;
  if (!g_pool) g_pool = new std::shared_ptr<Pool>();
  if (!*g_pool || (*g_pool)->size() != threads) *g_pool = std::make_shared<Pool>(threads - 1);
  return *g_pool;
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
  using namespace ember::runtime;
  if (n <= 0) return 0;
  int threads = get_num_threads();
  // Nested parallel loops run inline: the outer loop already occupies the pool.
  if (n == 1 || threads <= 1 || t_in_parallel) {
    body(0, n, closure);
    return 0;
  }
  std::shared_ptr<Pool> pool = pool_for(threads);
  t_in_parallel = true;
  bool ran;
  try {
    ran = pool->try_run(n, body, closure, threads);
  } catch (...) {
    t_in_parallel = false;
    throw;
  }
  t_in_parallel = false;
  if (!ran) body(0, n, closure);  // another thread's loop holds the pool: run on this one
  return 0;
}
