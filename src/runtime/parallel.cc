// Parallel loops run on the runtime's own pool below; with EMBER_THREADING=openmp the first
// thread that runs one uses OpenMP instead (one team with PyTorch's in a PyTorch process;
// see use_openmp).
//
// The pool: one per process, shared by every caller: num_threads - 1 worker threads, and the
// calling thread takes part. That bounds the threads Ember starts, however many threads
// run models (OpenMP would give each calling thread a team of its own). One loop holds the
// pool at a time; a loop that finds it busy (another thread's model is using it) runs on
// its caller alone, so concurrent models never wait for each other and never add threads.
//
// Made to hold up next to other runtimes in one process (PyTorch's OpenMP team and ONNX
// Runtime's pool spin on the same cores after their own calls), where a worker may not get
// its core for milliseconds:
// - Work sharing. Each participant owns a contiguous range of the iterations (the static
//   split, so the same thread touches the same data from kernel to kernel) and claims it in
//   a few pieces; a participant whose range is done claims pieces of the others'. A worker
//   whose core is busy elsewhere is covered by the rest; only a piece already claimed by a
//   thread that then loses its core is waited for. (The next loops do not fall back to the
//   caller alone after such a wait: no gain next to other runtimes, a loss alone, where
//   uneven pieces looked like lost cores; calibration: pool after a wait.)
// - No wake-up waited for. The caller never waits for a worker that has not joined: once
//   every piece is claimed it closes the loop, and a worker arriving later finds nothing to
//   join. So a sleeping worker's wake-up costs the caller only the notify, never the
//   scheduler's latency.
// - Spins are timed and short (kSpinNs), so an idle pool leaves the cores to the others.
//
// A loop: the caller writes the job (the ranges), then publishes it in `state_`, one atomic
// word of generation, team size, an open flag and the count of workers that joined. A
// worker joins by incrementing that count while the loop is open (one compare-and-swap, so
// joining and closing cannot cross); the caller closes the loop once the work is claimed and
// waits for the joined workers alone. Workers spin briefly for the next loop, then sleep on
// a condition variable (the spin keeps back-to-back kernels cheap, the sleep keeps an idle
// pool off the CPU).
//
// fork(): the child has only the forking thread, so the pool's workers do not exist there.
// An atfork handler abandons the parent's pool in the child (never touching its locks or
// threads again) and the child's first loop starts a fresh one.
#include "ember/runtime/parallel.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ember/runtime/kernel_error.h"
#include "ember/support/error.h"

#ifdef EMBER_HAVE_OPENMP
#include <omp.h>
#endif

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

// How long a thread spins for the next loop (a worker) or for the last pieces (the caller)
// before it sleeps: long enough to catch the next kernel of a model, short enough not to
// keep a core from another runtime's threads, or from this pool's caller, for nothing.
// Timed, not counted: a pause lasts 3 cycles on Zen 1 and 140 on Skylake-X. No spinning
// when the pool has more threads than the process has CPUs.
constexpr int64_t kSpinNs = 100'000;
// Pieces a participant's range is claimed in: enough for the others to cover a thread that
// lost its core, few enough that a claim (an atomic add on the range's own cache line) stays
// negligible against the piece.
constexpr int64_t kPiecesPerRange = 4;

// The state word: | generation | team size (16 bits) | open (1 bit) | joined workers (16 bits) |
constexpr int kJoinedBits = 16, kTeamBits = 16;
constexpr uint64_t kJoinedMask = (uint64_t{1} << kJoinedBits) - 1;
constexpr uint64_t kOpen = uint64_t{1} << kJoinedBits;
constexpr int kTeamShift = kJoinedBits + 1, kGenerationShift = kTeamShift + kTeamBits;
constexpr uint64_t kTeamMask = (uint64_t{1} << kTeamBits) - 1;

uint64_t generation_of(uint64_t state) { return state >> kGenerationShift; }
int team_of(uint64_t state) { return static_cast<int>((state >> kTeamShift) & kTeamMask); }

int available_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return std::max(1u, std::thread::hardware_concurrency());
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A spin-wait of at most `ns`: more() pauses the CPU and says whether to go on.
class Spin {
 public:
  explicit Spin(int64_t ns) : ns_(ns) {}
  bool more() {
    if (ns_ <= 0) return false;
    EMBER_CPU_RELAX();
    if (++count_ % 16) return true;  // read the clock every 16 pauses
    if (!start_) start_ = now_ns();
    return now_ns() - start_ < ns_;
  }

 private:
  int64_t ns_, start_ = 0, count_ = 0;
};

// One participant's share of a loop: iterations [next, end) not yet claimed, claimed `piece`
// at a time by its owner and by any participant that has run out of its own.
struct alignas(64) Range {
  std::atomic<int64_t> next{0};
  int64_t end = 0, piece = 1;
};

class Pool {
 public:
  explicit Pool(int workers)
      : size_(workers + 1),
        spin_ns_(size_ > available_cpus() ? 0 : kSpinNs),
        ranges_(static_cast<size_t>(size_)) {
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

  // Runs body over [0, n) with up to min(threads, n) participants, or returns false at once
  // when another loop holds the pool.
  bool try_run(int64_t n, Body body, void* closure, int threads) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    const int team = static_cast<int>(std::min<int64_t>({threads, n, size_}));
    split(n, team);
    body_ = body;
    closure_ = closure;
    kernel_errors_ = current_kernel_errors();  // the team reports to the caller's record
    error_ = nullptr;
    failed_.store(false, std::memory_order_relaxed);
    // Publishes the job (seq_cst: see wait_for_job and the sleepers_ check below).
    const uint64_t generation = generation_of(state_.load()) + 1;
    state_.store(generation << kGenerationShift | uint64_t(team) << kTeamShift | kOpen);
    if (sleepers_.load() > 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      wake_.notify_all();
    }
    run_pieces(0, team);
    // Every piece is claimed: close the loop to latecomers, then wait for those who joined.
    uint64_t state = state_.fetch_and(~kOpen);
    for (Spin spin(spin_ns_); (state & kJoinedMask) > 0;) {
      if (spin.more()) {
        state = state_.load(std::memory_order_acquire);
        continue;
      }
      std::unique_lock<std::mutex> lock(mutex_);
      caller_sleeping_.store(true);
      done_.wait(lock, [&] { return (state_.load() & kJoinedMask) == 0; });
      caller_sleeping_.store(false);
      break;
    }
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  // The static contiguous split, the first n % team ranges one iteration longer (no n * i
  // products, so no overflow for any n).
  void split(int64_t n, int team) {
    const int64_t base = n / team, rem = n % team;
    int64_t begin = 0;
    for (int i = 0; i < team; ++i) {
      Range& r = ranges_[i];
      r.end = begin + base + (i < rem ? 1 : 0);
      r.piece = std::max<int64_t>(1, (r.end - begin + kPiecesPerRange - 1) / kPiecesPerRange);
      r.next.store(begin, std::memory_order_relaxed);
      begin = r.end;
    }
  }

  // Runs participant `self`'s range, then helps with the others', until nothing is left.
  void run_pieces(int self, int team) {
    KernelErrorScope errors(kernel_errors_);
    for (int k = 0; k < team; ++k) {
      Range& r = ranges_[(self + k) % team];
      while (!failed_.load(std::memory_order_relaxed)) {
        const int64_t begin = r.next.fetch_add(r.piece, std::memory_order_relaxed);
        if (begin >= r.end) break;
        run(begin, std::min(begin + r.piece, r.end));
      }
    }
  }

  void run(int64_t begin, int64_t end) {
    try {
      body_(begin, end, closure_);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
      failed_.store(true, std::memory_order_relaxed);
    }
  }

  // Joins the loop published as `state`: one more joined worker, if it is still open and
  // this worker is in its team.
  bool join(uint64_t state, int index) {
    while ((state & kOpen) && index < team_of(state)) {
      if (state_.compare_exchange_weak(state, state + 1)) return true;
      if (generation_of(state) != generation_of(state_.load())) return false;
    }
    return false;
  }

  void work(int index) {
    t_in_parallel = true;
    uint64_t seen = 0;
    while (true) {
      uint64_t state = wait_for_job(seen);
      if (state == 0) return;  // stopping
      seen = generation_of(state);
      if (!join(state, index)) continue;  // closed already, or this loop needs fewer threads
      run_pieces(index, team_of(state));
      // seq_cst, paired with the caller's store of caller_sleeping_ and load of state_.
      uint64_t before = state_.fetch_sub(1);
      if ((before & kJoinedMask) == 1 && caller_sleeping_.load()) {
        std::lock_guard<std::mutex> lock(mutex_);
        done_.notify_all();
      }
    }
  }

  // The state of a loop of a generation after `seen`, or 0 when the pool stops.
  uint64_t wait_for_job(uint64_t seen) {
    for (Spin spin(spin_ns_); spin.more();) {
      uint64_t state = state_.load(std::memory_order_acquire);
      if (generation_of(state) != seen) return state;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    // Counted before the state is read again: a caller that publishes a loop after this
    // read sees sleepers_ > 0 and notifies (both are seq_cst).
    sleepers_.fetch_add(1);
    wake_.wait(lock, [&] { return stop_ || generation_of(state_.load()) != seen; });
    sleepers_.fetch_sub(1);
    return stop_ ? 0 : state_.load();
  }

  const int size_;         // workers + the caller
  const int64_t spin_ns_;  // how long to spin before sleeping
  std::vector<std::thread> threads_;
  std::mutex busy_;  // held by the caller of the loop in flight

  // The loop in flight, written by its caller before it publishes state_; read only by the
  // caller and the workers that joined, which finish before the next loop is written.
  std::vector<Range> ranges_;
  Body body_ = nullptr;
  void* closure_ = nullptr;
  KernelErrors* kernel_errors_ = nullptr;
  std::exception_ptr error_;
  std::mutex error_mutex_;
  std::atomic<bool> failed_{false};  // a piece threw: claim no more

  std::atomic<uint64_t> state_{0};
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

// Set in a forked child: libgomp's team of the parent does not exist there and its next
// parallel region would wait for it forever, so the child runs its loops on the pool.
bool g_forked = false;

void before_fork() { g_pool_mutex.lock(); }
void after_fork_in_parent() { g_pool_mutex.unlock(); }
void after_fork_in_child() {
  // The parent's workers do not exist here: abandon its pool (leaked, never touched again).
  g_pool = nullptr;
  g_forked = true;
  g_pool_mutex.unlock();
}

// Once, before the first parallel loop (on the pool or on OpenMP): a forked child must know
// it was forked whichever runtime the parent used.
void watch_fork() {
  static const bool registered = [] {
    pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
    return true;
  }();
  (void)registered;
}

std::shared_ptr<Pool> pool_for(int threads) {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  if (!g_pool) g_pool = new std::shared_ptr<Pool>();
  if (!*g_pool || (*g_pool)->size() != threads) *g_pool = std::make_shared<Pool>(threads - 1);
  return *g_pool;
}

// Which runtime runs a thread's loops. The pool, by default. EMBER_THREADING=openmp: the
// first thread that runs a parallel loop (a Python process's main thread, whose OpenMP team
// PyTorch's ops use too: one team, no second set of threads spinning on the same cores)
// runs its loops on OpenMP (libgomp), in pieces claimed dynamically; other threads run theirs
// on the pool, so no other calling thread gets a team of its own; a forked child runs on
// the pool (libgomp's team of the parent does not exist there and its next region would
// wait for it forever). OpenMP gains where the runtimes take turns call by call, but next
// to a spinning ONNX Runtime its barrier waits for a descheduled thread, where the pool's
// caller covers it: so the pool is the default (calibration: pool or OpenMP).
bool openmp_configured() {
  static const bool openmp = [] {
    const char* env = std::getenv("EMBER_THREADING");
    const std::string v = env && *env ? env : "pool";
    if (v == "pool") return false;
    if (v != "openmp")
      fail("EMBER_THREADING=", v, " is not a threading runtime: use openmp or pool");
#ifndef EMBER_HAVE_OPENMP
    fail(
        "EMBER_THREADING=openmp: this build of Ember has no OpenMP (configure it with an "
        "OpenMP compiler), so its loops run on its own pool: unset EMBER_THREADING");
#endif
    return true;
  }();
  return openmp;
}

std::atomic<std::thread::id> g_openmp_thread{};  // the one thread whose loops use OpenMP

bool use_openmp() {
  if (g_forked || !openmp_configured()) return false;
  const std::thread::id me = std::this_thread::get_id();
  std::thread::id owner{};
  return g_openmp_thread.compare_exchange_strong(owner, me) || owner == me;
}

#ifdef EMBER_HAVE_OPENMP
// One team (the calling thread's) and one region at a time on it: nested loops run inline.
void run_openmp(int64_t n, Body body, void* closure, int threads) {
  const int team = static_cast<int>(std::min<int64_t>(threads, n));
  const int64_t pieces = std::min<int64_t>(n, team * kPiecesPerRange);
  KernelErrors* errors = current_kernel_errors();
  std::exception_ptr error;
  std::mutex error_mutex;
#pragma omp parallel num_threads(team)
  {
    const bool outer = t_in_parallel;
    t_in_parallel = true;
    KernelErrorScope scope(errors);
#pragma omp for schedule(dynamic, 1)
    for (int64_t p = 0; p < pieces; ++p) {
      try {
        body(n / pieces * p + std::min(p, n % pieces),
             n / pieces * (p + 1) + std::min(p + 1, n % pieces), closure);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
    t_in_parallel = outer;
  }
  if (error) std::rethrow_exception(error);
}
#else
void run_openmp(int64_t n, Body body, void* closure, int) { body(0, n, closure); }
#endif

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
  watch_fork();
  const bool openmp = use_openmp();
  std::shared_ptr<Pool> pool = openmp ? nullptr : pool_for(threads);
  t_in_parallel = true;
  bool ran = true;
  try {
    if (openmp)
      run_openmp(n, body, closure, threads);
    else
      ran = pool->try_run(n, body, closure, threads);
  } catch (...) {
    t_in_parallel = false;
    throw;
  }
  t_in_parallel = false;
  if (!ran) body(0, n, closure);  // another thread's loop holds the pool: run on this one
  return 0;
}
