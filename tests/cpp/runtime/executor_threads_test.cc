// GraphExecutor and threads: calls on one executor are serialized (run(inputs) is one step
// per caller, so each thread gets its own results), separate executors run in parallel, and
// an output that is a parameter is never a writable alias of the shared weights.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <thread>
#include <vector>

#include "../expect_error.h"
#include "ember/runtime/graph_executor.h"
#include "ember/support/error.h"

namespace ember::runtime {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kN = 256;

float* f(void* p) { return static_cast<float*>(p); }
// Slow enough (element by element, through memory) that unsynchronized runs would overlap.
void add_one(void** a) {
  for (int i = 0; i < kN; ++i) {
    volatile float v = f(a[0])[i];
    f(a[1])[i] = v + 1.0f;
  }
}
void reverse(void** a) {
  for (int i = 0; i < kN; ++i) f(a[1])[i] = f(a[0])[kN - 1 - i];
}
void add(void** a) {
  for (int i = 0; i < kN; ++i) f(a[2])[i] = f(a[0])[i] + f(a[1])[i];
}

// A kernel that waits (up to 5 s) until `g_release` is set, noting that it started.
std::atomic<bool> g_started{false}, g_release{false}, g_finished{false};
void wait_for_release(void** a) {
  g_started = true;
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (!g_release && Clock::now() < deadline) std::this_thread::yield();
  g_finished = true;
  add_one(a);
}
void release(void** a) {
  g_release = true;
  add_one(a);
}

class TestModule : public Module {
 public:
  KernelFn get_function(const std::string& name) const override {
    static const std::map<std::string, KernelFn> fns = {{"add_one", add_one},
                                                        {"reverse", reverse},
                                                        {"add", add},
                                                        {"wait_for_release", wait_for_release},
                                                        {"release", release}};
    auto it = fns.find(name);
    if (it == fns.end()) fail("test module has no kernel '", name, "'");
    return it->second;
  }
  std::string type_key() const override { return "test"; }
  std::string get_source(const std::string& format) const override {
    fail("no source '", format, "'");
  }
};

// x -> add_one -> reverse -> add_one -> reverse: y = x + 2, through two pooled intermediates.
std::shared_ptr<ExecGraph> chain(const std::string& first = "add_one") {
  auto g = std::make_shared<ExecGraph>();
  for (int v = 0; v < 5; ++v) g->values.push_back({{kN}, DType::Float32});
  g->inputs = {{"x", 0}};
  g->kernels = {{first, first, {0, 1}, 1},
                {"reverse", "r1", {1, 2}, 1},
                {"add_one", "a2", {2, 3}, 1},
                {"reverse", "r2", {3, 4}, 1}};
  g->outputs = {4};
  return g;
}

NDArray filled(float start) {
  NDArray t = NDArray::empty({kN}, DType::Float32);
  for (int i = 0; i < kN; ++i) t.data_as<float>()[i] = start + i;
  return t;
}

TEST(ExecutorThreads, RunWithInputsIsOneStepPerCaller) {
  GraphExecutor ex(chain(), std::make_shared<TestModule>());
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int call = 0; call < 100; ++call) {
        float start = 1000.0f * t + call;
        std::vector<NDArray> out = ex.run({filled(start)});
        for (int i = 0; i < kN; ++i)
          if (out[0].data_as<float>()[i] != start + i + 2.0f) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_ERROR_WITH(ex.run(std::vector<NDArray>{}), "0 input(s)", "(x)");
}

TEST(ExecutorThreads, CallsOnOneExecutorWaitForARun) {
  g_started = g_release = g_finished = false;
  GraphExecutor ex(chain("wait_for_release"), std::make_shared<TestModule>());
  std::thread runner([&] { ex.run(); });
  while (!g_started) std::this_thread::yield();
  std::thread releaser([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    g_release = true;
  });
  ex.set_input(0, filled(0));  // must wait for the run: it reads the input buffer
  EXPECT_TRUE(g_finished.load()) << "set_input ran while run() was using the buffers";
  runner.join();
  releaser.join();
}

TEST(ExecutorThreads, SeparateExecutorsRunInParallel) {
  g_started = g_release = g_finished = false;
  auto module = std::make_shared<TestModule>();
  GraphExecutor waiting(chain("wait_for_release"), module), releasing(chain("release"), module);
  auto t0 = Clock::now();
  std::thread runner([&] { waiting.run(); });
  while (!g_started) std::this_thread::yield();
  releasing.run();  // would wait for `waiting` (5 s) if executors shared one lock
  runner.join();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(4));
}

TEST(ExecutorThreads, ParameterOutputsAreCopies) {
  auto g = std::make_shared<ExecGraph>();
  for (int v = 0; v < 3; ++v) g->values.push_back({{kN}, DType::Float32});
  g->inputs = {{"x", 0}};
  g->params = {{"w", 1, filled(10)}};
  g->kernels = {{"add", "add", {0, 1, 2}, 2}};
  g->outputs = {2, 1};  // y = x + w, and the weight itself
  auto module = std::make_shared<TestModule>();
  GraphExecutor a(g, module), b(g, module);
  NDArray w = a.get_output(1);
  EXPECT_NE(w.data(), g->params[0].data.data());
  w.data_as<float>()[0] = -1e6f;  // must not reach the model's weights
  b.set_input(0, filled(0));
  b.run();
  EXPECT_EQ(b.get_output(0).data_as<float>()[0], 10.0f);
  EXPECT_EQ(a.get_output(1).data_as<float>()[0], 10.0f);
  EXPECT_EQ(g->params[0].data.data_as<float>()[0], 10.0f);
}

}  // namespace
}  // namespace ember::runtime
