// GraphExecutor over a hand-made module whose kernels are plain C++ functions: results,
// memory planning (reuse, no output/input aliasing, outputs kept), views, errors,
// benchmark statistics and profiling.
#include "ember/runtime/graph_executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>

#include "../expect_error.h"
#include "ember/runtime/kernel_error.h"
#include "ember/support/error.h"

namespace ember::runtime {
namespace {

// Every test value holds kN float32 elements (64 bytes), whatever its shape.
constexpr int kN = 16;

float* f(void* p) { return static_cast<float*>(p); }
void add_one(void** a) {
  for (int i = 0; i < kN; ++i) f(a[1])[i] = f(a[0])[i] + 1.0f;
}
void twice(void** a) {
  for (int i = 0; i < kN; ++i) f(a[1])[i] = 2.0f * f(a[0])[i];
}
void add(void** a) {
  for (int i = 0; i < kN; ++i) f(a[2])[i] = f(a[0])[i] + f(a[1])[i];
}
// Reads element kN-1-i for output i: wrong results if the output aliased the input.
void reverse(void** a) {
  for (int i = 0; i < kN; ++i) f(a[1])[i] = f(a[0])[kN - 1 - i];
}
int g_calls = 0;
void count(void** a) {
  ++g_calls;
  add_one(a);
}
void spin_2ms(void** a) {
  auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(2)) {
  }
  add_one(a);
}

// A kernel whose scratch buffer cannot be had, as generated code meets it (ember_alloc
// returns null after recording the failure; the kernel skips its work).
constexpr int64_t kImpossibleBytes = int64_t{1} << 62;
void no_memory(void** a) {
  if (void* scratch = ember_alloc(kImpossibleBytes, 64)) {
    free(scratch);
    add_one(a);
  }
}

class TestModule : public Module {
 public:
  KernelFn get_function(const std::string& name) const override {
    static const std::map<std::string, KernelFn> fns = {
        {"add_one", add_one},    {"twice", twice}, {"add", add},
        {"reverse", reverse},    {"count", count}, {"spin_2ms", spin_2ms},
        {"no_memory", no_memory}};
    auto it = fns.find(name);
    if (it == fns.end()) fail("test module has no kernel '", name, "'");
    return it->second;
  }
  std::string type_key() const override { return "test"; }
  std::string get_source(const std::string& format) const override {
    fail("test module has no source in format '", format, "'");
  }
};

// Small builder so each test reads as its graph.
struct GraphBuilder {
  std::shared_ptr<ExecGraph> g = std::make_shared<ExecGraph>();
  int value(Shape shape = {kN}, DType dtype = DType::Float32) {
    g->values.push_back({shape, dtype});
    return static_cast<int>(g->values.size()) - 1;
  }
  int input(const std::string& name, Shape shape = {kN}) {
    int v = value(shape);
    g->inputs.push_back({name, v});
    return v;
  }
  int kernel(const std::string& func, std::vector<int> ins, Shape out_shape = {kN}) {
    int out = value(out_shape);
    int num_inputs = static_cast<int>(ins.size());
    ins.push_back(out);
    g->kernels.push_back({func, func + std::to_string(g->kernels.size()), ins, num_inputs});
    return out;
  }
  int view(int src, Shape shape) {
    int v = value(shape);
    g->views.push_back({v, src});
    return v;
  }
  GraphExecutor make() { return GraphExecutor(g, std::make_shared<TestModule>()); }
};

NDArray iota(Shape shape = {kN}, float start = 0.0f) {
  NDArray t = NDArray::empty(shape, DType::Float32);
  for (int i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = start + i;
  return t;
}

TEST(GraphExecutor, ChainResultsAndBufferReuse) {
  GraphBuilder b;
  int x = b.input("x");
  int t1 = b.kernel("add_one", {x});
  int t2 = b.kernel("reverse", {t1});
  int t3 = b.kernel("twice", {t2});
  int t4 = b.kernel("reverse", {t3});
  int out = b.kernel("add_one", {t4});
  b.g->outputs = {out};
  GraphExecutor ex = b.make();
  ex.set_input(0, iota());
  ex.run();
  NDArray y = ex.get_output(0);
  ASSERT_EQ(y.shape(), (Shape{kN}));
  // reverse twice is the identity: y = 2 (x + 1) + 1. Any output/input aliasing would break
  // a reverse and show here.
  for (int i = 0; i < kN; ++i) EXPECT_FLOAT_EQ(y.data_as<float>()[i], 2.0f * (i + 1) + 1) << i;
  // Four 64-byte intermediates in a chain need only two buffers (ping-pong).
  EXPECT_EQ(ex.pool_bytes(), 2u * 64);
  EXPECT_LT(ex.pool_bytes(), 4u * 64);
  (void)t2;
  (void)t3;
  // Running again with a new input gives the new answer (no stale state).
  ex.set_input("x", iota({kN}, 100.0f));
  ex.run();
  EXPECT_FLOAT_EQ(ex.get_output(0).data_as<float>()[3], 2.0f * 104 + 1);
}

TEST(GraphExecutor, CudaGraphOptionIsIgnoredOnTheCpu) {
  GraphBuilder b;
  b.g->outputs = {b.kernel("add_one", {b.input("x")})};
  for (bool graph : {true, false}) {
    ExecutorOptions options;
    options.cuda_graph = graph;
    GraphExecutor ex(b.g, std::make_shared<TestModule>(), options);
    EXPECT_FALSE(ex.cuda_graph());
    for (float start : {0.0f, 10.0f}) {
      ex.set_input(0, iota({kN}, start));
      ex.run();
      EXPECT_FLOAT_EQ(ex.get_output(0).data_as<float>()[2], start + 3.0f);
    }
  }
}

TEST(GraphExecutor, OutputsAreNotOverwrittenByLaterKernels) {
  GraphBuilder b;
  int x = b.input("x");
  int o1 = b.kernel("add_one", {x});  // output, also read by later kernels
  int t1 = b.kernel("twice", {o1});
  int t2 = b.kernel("reverse", {t1});
  int t3 = b.kernel("twice", {t2});
  int o2 = b.kernel("add", {t3, o1});
  b.g->outputs = {o1, o2};
  GraphExecutor ex = b.make();
  ex.set_input(0, iota());
  ex.run();
  NDArray y1 = ex.get_output(0), y2 = ex.get_output(1);
  EXPECT_NE(y1.data(), y2.data());
  for (int i = 0; i < kN; ++i) {
    EXPECT_FLOAT_EQ(y1.data_as<float>()[i], i + 1.0f);
    EXPECT_FLOAT_EQ(y2.data_as<float>()[i], 4.0f * (kN - 1 - i + 1) + (i + 1));
  }
  // Outputs live outside the pool: only t1..t3 are planned, in two buffers.
  EXPECT_EQ(ex.pool_bytes(), 2u * 64);
}

TEST(GraphExecutor, ViewsAliasTheirSource) {
  GraphBuilder b;
  int x = b.input("x", {4, 4});
  int x_flat = b.view(x, {kN});  // view of an input
  int t = b.kernel("add_one", {x_flat}, {kN});
  int t_2d = b.view(t, {2, 8});        // view of an intermediate...
  int t_3d = b.view(t_2d, {2, 2, 4});  // ...and a chain of views
  int out = b.kernel("twice", {t_3d}, {8, 2});
  int out_view = b.view(out, {kN});         // an output that is a view
  b.g->outputs = {out, out_view, x, t_2d};  // an input and an intermediate's view as outputs
  GraphExecutor ex = b.make();
  ex.set_input(0, iota({4, 4}));
  ex.run();
  NDArray y = ex.get_output(0), yv = ex.get_output(1), xi = ex.get_output(2), tv = ex.get_output(3);
  EXPECT_EQ(y.shape(), (Shape{8, 2}));
  EXPECT_EQ(yv.shape(), (Shape{kN}));
  EXPECT_EQ(yv.data(), y.data());
  EXPECT_EQ(xi.data(), ex.get_input(0).data());
  EXPECT_EQ(xi.shape(), (Shape{4, 4}));
  EXPECT_EQ(tv.shape(), (Shape{2, 8}));
  for (int i = 0; i < kN; ++i) {
    EXPECT_FLOAT_EQ(yv.data_as<float>()[i], 2.0f * (i + 1));
    EXPECT_FLOAT_EQ(tv.data_as<float>()[i], i + 1.0f);  // kept: its root became an output
  }
}

TEST(GraphExecutor, ParamsAndViewsOfParams) {
  GraphBuilder b;
  int x = b.input("x");
  int w = b.value({4, 4});
  b.g->params.push_back({"w", w, iota({4, 4}, 10.0f)});
  int w_flat = b.view(w, {kN});
  int out = b.kernel("add", {x, w_flat});
  b.g->outputs = {out};
  GraphExecutor ex = b.make();
  ex.set_input(0, iota());
  ex.run();
  for (int i = 0; i < kN; ++i) EXPECT_FLOAT_EQ(ex.get_output(0).data_as<float>()[i], 2.0f * i + 10);
  EXPECT_EQ(ex.pool_bytes(), 0u);

  GraphBuilder bad;
  int v = bad.value({4, 4});
  bad.g->params.push_back({"conv.weight", v, iota({kN})});
  EXPECT_ERROR_WITH(bad.make(), "conv.weight", "float32(16)", "float32(4, 4)");
}

TEST(GraphExecutor, RunBoundReadsCallerMemoryAndReturnsFreshOutputs) {
  GraphBuilder b;
  int x = b.input("x", {4, 4});
  int x_flat = b.view(x, {kN});
  int o1 = b.kernel("add_one", {x_flat});
  int t = b.kernel("reverse", {o1});
  int o2 = b.kernel("twice", {t}, {2, 8});
  int w = b.value({kN});
  b.g->params.push_back({"w", w, iota({kN}, 5.0f)});
  b.g->outputs = {o1, b.view(o2, {kN}), x, w};
  GraphExecutor ex = b.make();
  NDArray in1 = iota({4, 4}), in2 = iota({4, 4}, 100.0f);
  std::vector<NDArray> r1 = ex.run_bound({in1});
  std::vector<NDArray> r2 = ex.run_bound({in2});
  // Fresh outputs per call: the first results survive the second call.
  EXPECT_NE(r1[0].data(), r2[0].data());
  EXPECT_NE(r1[0].data(), ex.get_output(0).data());
  for (int i = 0; i < kN; ++i) {
    EXPECT_FLOAT_EQ(r1[0].data_as<float>()[i], i + 1.0f);
    EXPECT_FLOAT_EQ(r1[1].data_as<float>()[i], 2.0f * (kN - i));
    EXPECT_FLOAT_EQ(r2[0].data_as<float>()[i], i + 101.0f);
  }
  EXPECT_EQ(r1[1].shape(), (Shape{kN}));
  // An output that is an input or a parameter is a copy, not the caller's or model's memory.
  EXPECT_NE(r1[2].data(), in1.data());
  EXPECT_FLOAT_EQ(r1[2].data_as<float>()[3], 3.0f);
  EXPECT_NE(r1[3].data(), ex.get_output(3).data());
  EXPECT_FLOAT_EQ(r1[3].data_as<float>()[0], 5.0f);
  // The executor's own buffers are back in place for run().
  ex.set_input(0, iota({4, 4}, 1000.0f));
  ex.run();
  EXPECT_FLOAT_EQ(ex.get_output(0).data_as<float>()[0], 1001.0f);
  EXPECT_FLOAT_EQ(r1[0].data_as<float>()[0], 1.0f);
  EXPECT_ERROR_WITH(ex.run_bound({iota({kN})}), "input 'x'", "float32(4, 4)");
  EXPECT_ERROR_WITH(ex.run_bound({}), "given 0 input(s)", "(x)");
}

TEST(GraphExecutor, InputErrors) {
  GraphBuilder b;
  int x = b.input("x", {1, 3, 32, 32});
  int y = b.input("y");
  b.g->outputs = {x, y};
  GraphExecutor ex = b.make();
  EXPECT_EQ(ex.num_inputs(), 2);
  EXPECT_EQ(ex.input_names(), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(ex.input_index("y"), 1);
  EXPECT_ERROR_WITH(ex.set_input(5, iota()),
                    "input index 5 out of range: the model has 2 inputs (x, y)");
  EXPECT_ERROR_WITH(ex.set_input(-1, iota()), "input index -1 out of range");
  EXPECT_ERROR_WITH(ex.set_input(0, iota({1, 3, 16, 16})), "'x'", "float32(1, 3, 32, 32)",
                    "float32(1, 3, 16, 16)", "pass a tensor");
  EXPECT_ERROR_WITH(ex.set_input("y", NDArray::zeros({kN}, DType::Int32)), "'y'", "float32(16)",
                    "int32(16)");
  EXPECT_ERROR_WITH(ex.set_input("z", iota()), "'z'", "(x, y)");
  EXPECT_ERROR_WITH(ex.input_index("w"), "'w'", "(x, y)");
  EXPECT_ERROR_WITH(ex.get_output(2), "output index 2 out of range", "2 outputs");
  EXPECT_ERROR_WITH(ex.get_input(2), "input index 2 out of range");
  // The input is copied, not aliased.
  NDArray v = iota();
  ex.set_input("y", v);
  v.data_as<float>()[0] = -1.0f;
  EXPECT_FLOAT_EQ(ex.get_output(1).data_as<float>()[0], 0.0f);
}

TEST(GraphExecutor, MissingKernelNamesIt) {
  GraphBuilder b;
  int x = b.input("x");
  b.g->outputs = {b.kernel("softmax", {x})};
  EXPECT_ERROR_WITH(b.make(), "softmax");
}

TEST(GraphExecutor, FailedScratchAllocationNamesKernelAndBytes) {
  GraphBuilder b;
  int x = b.input("x");
  b.g->outputs = {b.kernel("no_memory", {b.kernel("add_one", {x})})};
  GraphExecutor ex = b.make();
  ex.set_input(0, iota());
  const char* bytes = "4611686018427387904 bytes";  // kImpossibleBytes
  EXPECT_ERROR_WITH(ex.run(), "kernel 'no_memory1'", bytes, "out of memory", "fewer threads");
  EXPECT_ERROR_WITH(ex.run_bound({iota()}), "kernel 'no_memory1'", bytes);
  EXPECT_ERROR_WITH(ex.profile(1), "kernel 'no_memory1'", bytes);
}

TEST(GraphExecutor, BenchmarkRunsAndStatistics) {
  GraphBuilder b;
  int x = b.input("x");
  b.g->outputs = {b.kernel("count", {x})};
  GraphExecutor ex = b.make();
  g_calls = 0;
  BenchmarkResult r = ex.benchmark(/*number=*/3, /*repeat=*/4, /*warmup=*/2);
  EXPECT_EQ(g_calls, 2 + 3 * 4);
  ASSERT_EQ(r.results_ms.size(), 4u);
  double mean = 0;
  for (double t : r.results_ms) mean += t / 4;
  double var = 0;
  for (double t : r.results_ms) var += (t - mean) * (t - mean) / 4;
  std::vector<double> s = r.results_ms;
  std::sort(s.begin(), s.end());
  EXPECT_NEAR(r.mean, mean, 1e-12);
  EXPECT_NEAR(r.std, std::sqrt(var), 1e-12);
  EXPECT_DOUBLE_EQ(r.median, (s[1] + s[2]) / 2);
  EXPECT_DOUBLE_EQ(r.min, s[0]);
  EXPECT_DOUBLE_EQ(r.max, s[3]);
  EXPECT_ERROR_WITH(ex.benchmark(0, 1, 0), "number", "at least 1");
}

TEST(BenchmarkResult, StrMatchesTvmLayout) {
  BenchmarkResult r;
  r.mean = 0.1234;
  r.median = 0.12;
  r.max = 0.2;
  r.min = 0.11;
  r.std = 0.01;
  EXPECT_EQ(r.str(),
            "Execution time summary:\n"
            " mean (ms)   median (ms)    max (ms)     min (ms)     std (ms)  \n"
            "   0.1234       0.1200       0.2000       0.1100       0.0100   ");
  r.mean = 1234.56789;
  EXPECT_NE(r.str().find(" 1234.5679  "), std::string::npos);
}

TEST(GraphExecutor, ProfileRowsAndTable) {
  GraphBuilder b;
  int x = b.input("x", {4, 4});
  int t = b.kernel("spin_2ms", {x}, {4, 4});
  int out = b.kernel("add_one", {t});
  b.g->outputs = {out};
  b.g->kernels[0].schedule = "conv.chunked";
  b.g->kernels[0].schedule_knobs = {{"tile_rows", 4}, {"k_chunk", 16}};
  GraphExecutor ex = b.make();
  std::vector<KernelProfile> p = ex.profile(3);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].func, "spin_2ms");
  EXPECT_EQ(p[0].name, "spin_2ms0");
  EXPECT_EQ(p[0].shapes, (std::vector<Shape>{{4, 4}, {4, 4}}));
  EXPECT_EQ(p[1].shapes, (std::vector<Shape>{{4, 4}, {kN}}));
  EXPECT_GE(p[0].mean_ms, 2.0);
  EXPECT_LT(p[1].mean_ms, p[0].mean_ms);
  EXPECT_GT(p[0].percent, 90.0);
  EXPECT_NEAR(p[0].percent + p[1].percent, 100.0, 1e-9);
  EXPECT_ERROR_WITH(ex.profile(0), "repeat");

  std::string table = GraphExecutor::profile_table(p);
  std::istringstream lines(table);
  std::vector<std::string> rows;
  for (std::string l; std::getline(lines, l);) rows.push_back(l);
  ASSERT_EQ(rows.size(), 4u);  // header, two kernels, total
  for (const char* h : {"Name", "Func", "Time(ms)", "Percent", "Schedule", "Shapes"})
    EXPECT_NE(rows[0].find(h), std::string::npos) << h;
  EXPECT_EQ(rows[1].rfind("spin_2ms0", 0), 0u);
  EXPECT_NE(rows[1].find("conv.chunked(tile_rows=4,k_chunk=16)"), std::string::npos) << rows[1];
  EXPECT_EQ(p[1].schedule, "");  // a kernel with no recorded schedule
  EXPECT_NE(rows[1].find("(4, 4), (4, 4)"), std::string::npos);
  EXPECT_EQ(rows[3].rfind("Total", 0), 0u);
  EXPECT_NE(rows[3].find("100.00"), std::string::npos);
  // Numbers are right-aligned under their header: the Percent column ends at one place.
  size_t pct_end = rows[0].find("Percent") + 7;
  for (size_t r = 1; r < rows.size(); ++r) {
    ASSERT_GE(rows[r].size(), pct_end);
    EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(rows[r][pct_end - 1]))) << rows[r];
    EXPECT_EQ(rows[r][pct_end - 3], '.') << rows[r];
  }
}

}  // namespace
}  // namespace ember::runtime
