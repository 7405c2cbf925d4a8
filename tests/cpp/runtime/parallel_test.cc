// The runtime's thread pool under several callers: every loop covers its range once whether
// it gets the pool or runs on its caller (the pool is busy), the number of threads stays
// bounded, and the thread count can change between loops.
#include "ember/runtime/parallel.h"

#include <dirent.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

namespace ember::runtime {
namespace {

struct Sum {
  std::vector<std::atomic<int>> hits;
  explicit Sum(int64_t n) : hits(static_cast<size_t>(n)) {}
};

void count(int64_t begin, int64_t end, void* closure) {
  auto* s = static_cast<Sum*>(closure);
  for (int64_t i = begin; i < end; ++i) s->hits[i]++;
}

int os_threads() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n;
}

// Runs `f` on a thread other than the first to run a parallel loop (this test's main thread,
// which makes itself that first here): its loops run on the pool even with
// EMBER_THREADING=openmp.
template <typename F>
void on_a_pool_thread(F f) {
  Sum first(8);
  ember_parallel_for(8, count, &first);  // with EMBER_THREADING=openmp, the OpenMP team's
  std::thread t(f);
  t.join();
}

TEST(ThreadPool, ConcurrentCallersEachCoverTheirRange) {
  int saved = get_num_threads();
  set_num_threads(4);
  Sum warm_up(8);
  ember_parallel_for(8, count, &warm_up);  // the main thread's pool or OpenMP team
  on_a_pool_thread([] {
    Sum s(8);
    ember_parallel_for(8, count, &s);  // starts the pool
  });
  int before = os_threads();
  std::atomic<int> wrong{0}, peak{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 6; ++t)
    callers.emplace_back([&] {
      for (int call = 0; call < 200; ++call) {
        Sum s(97);
        ember_parallel_for(97, count, &s);
        for (auto& h : s.hits)
          if (h.load() != 1) ++wrong;
        int now = os_threads();
        for (int p = peak.load(); now > p && !peak.compare_exchange_weak(p, now);) {
        }
      }
    });
  for (auto& c : callers) c.join();
  set_num_threads(saved);
  EXPECT_EQ(wrong.load(), 0);
  // The callers themselves and no more: the pool is shared, not one team per caller (and
  // OpenMP's team is the main thread's alone).
  EXPECT_LE(peak.load(), before + 6);
}

// On the main thread and on another (the pool; with EMBER_THREADING=openmp the main thread's
// loops run on OpenMP).
TEST(ThreadPool, ThreadCountChangesBetweenLoops) {
  int saved = get_num_threads();
  auto loops = [] {
    for (int threads : {3, 1, 5, 2}) {
      set_num_threads(threads);
      Sum s(1000);
      ember_parallel_for(1000, count, &s);
      for (auto& h : s.hits) ASSERT_EQ(h.load(), 1) << threads << " threads";
    }
  };
  loops();
  on_a_pool_thread(loops);
  set_num_threads(saved);
}

// A worker that loses its core (here: sleeps inside its first piece) does not hold up the rest
// of its range: the caller, done with its own, claims the worker's remaining pieces.
struct Stalled {
  std::thread::id caller = std::this_thread::get_id();
  std::vector<std::atomic<int>> hits, by_caller;
  std::atomic<bool> slept{false};
  explicit Stalled(int64_t n) : hits(static_cast<size_t>(n)), by_caller(static_cast<size_t>(n)) {}
};

void stall_a_worker(int64_t begin, int64_t end, void* closure) {
  auto* s = static_cast<Stalled*>(closure);
  const bool on_caller = std::this_thread::get_id() == s->caller;
  if (!on_caller && !s->slept.exchange(true))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (int64_t i = begin; i < end; ++i) {
    s->hits[i]++;
    if (on_caller) s->by_caller[i]++;
  }
}

TEST(ThreadPool, TheCallerCoversAWorkerThatStalls) {
  int saved = get_num_threads();
  set_num_threads(2);
  std::unique_ptr<Stalled> stalled;
  on_a_pool_thread([&] {
    Sum warm_up(8);
    ember_parallel_for(8, count, &warm_up);  // starts the pool
    stalled = std::make_unique<Stalled>(64);
    ember_parallel_for(64, stall_a_worker, stalled.get());
  });
  set_num_threads(saved);
  Stalled& s = *stalled;
  int worker_range_on_caller = 0;
  for (int64_t i = 0; i < 64; ++i) {
    EXPECT_EQ(s.hits[i].load(), 1) << i;
    if (i >= 32) worker_range_on_caller += s.by_caller[i].load();
  }
  // The worker's range is 32..63 in pieces of 8: it holds at most the piece it sleeps in.
  EXPECT_GE(worker_range_on_caller, 24);
}

}  // namespace
}  // namespace ember::runtime
