// GraphExecutor with run-time shapes (ExecGraph::symbols, dynamic shapes): graphs built here
// around kernels that lower_schedule makes with run-time extents, compiled for the host and
// run at several sizes of one executor against a reference; outputs at the run's shape, the
// memory past a run's output untouched, run_bound and profile at the run's shape, the
// errors of a bad input shape, of inputs that disagree and of a graph whose symbols cannot
// be bound; and the model file round trip of such a graph.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../expect_error.h"
#include "ember/codegen/codegen.h"
#include "ember/codegen/export.h"
#include "ember/passes/schedule.h"
#include "ember/runtime/artifact.h"
#include "ember/runtime/graph_executor.h"
#include "ember/runtime/version.h"
#include "ember/support/error.h"

namespace ember::runtime {
namespace {

using passes::Schedule;
using passes::SplitTail;

constexpr int64_t kMaxRows = 64, kCols = 40;
constexpr float kUntouched = -12345.0f;

// y = 2x + 1 over [rows, 40], rows a symbol in [1, 64]: rows split by 4 with the last tile
// shifted back, the columns in vectors of 8, the tiles in parallel.
ir::PrimFunc affine_rows() {
  using namespace ir;
  Tensor x = placeholder("x", {kMaxRows, kCols}, DType::Float32);
  Tensor y = compute("y", {kMaxRows, kCols}, [&](const std::vector<PrimVar>& i) {
    return x({i[0], i[1]}) * make_const(DType::Float32, 2) + make_const(DType::Float32, 1);
  });
  Schedule sch({y});
  PrimVar rows("rows");
  sch.live().symbols = {{rows, 1, kMaxRows}};
  for (const Tensor& t : {x, y}) sch.live().dims[t.operator->()] = {rows, PrimExpr()};
  passes::Stage& s = sch[y];
  auto [io, ii] = s.split(s.axes()[0], 4, SplitTail::Shift);
  auto [jo, ji] = s.split(s.axes()[1], 8);
  s.reorder({io, jo, ii, ji});
  s.parallel(s.fuse(io, jo));
  s.vectorize(ji);
  return passes::lower_schedule(sch, "affine_rows", {x});
}

// z = a + b over [rows, 40], rows a symbol in [1, 64]; the last row tile guarded.
ir::PrimFunc add_rows() {
  using namespace ir;
  Tensor a = placeholder("a", {kMaxRows, kCols}, DType::Float32);
  Tensor b = placeholder("b", {kMaxRows, kCols}, DType::Float32);
  Tensor z = compute("z", {kMaxRows, kCols}, [&](const std::vector<PrimVar>& i) {
    return a({i[0], i[1]}) + b({i[0], i[1]});
  });
  Schedule sch({z});
  PrimVar rows("rows");
  sch.live().symbols = {{rows, 1, kMaxRows}};
  for (const Tensor& t : {a, b, z}) sch.live().dims[t.operator->()] = {rows, PrimExpr()};
  passes::Stage& s = sch[z];
  auto [io, ii] = s.split(s.axes()[0], 4);
  auto [jo, ji] = s.split(s.axes()[1], 8);
  s.reorder({io, jo, ii, ji});
  s.vectorize(ji);
  return passes::lower_schedule(sch, "add_rows", {a, b});
}

// y[i] = sum of x[i, k] over k < cols, x [8, cols], cols a symbol in [1, 512]: x's rows are
// cols apart, so a run's sums are right only with the run's cols.
constexpr int64_t kSumRows = 8, kMaxSumCols = 512;
ir::PrimFunc row_sums() {
  using namespace ir;
  Tensor x = placeholder("x", {kSumRows, kMaxSumCols}, DType::Float32);
  IterVar k = reduce_axis(kMaxSumCols, "k");
  Tensor y = compute("y", {kSumRows},
                     [&](const std::vector<PrimVar>& i) { return sum(x({i[0], k->var}), {k}); });
  Schedule sch({y});
  PrimVar cols("cols");
  sch.live().symbols = {{cols, 1, kMaxSumCols}};
  sch.live().dims[x.operator->()] = {PrimExpr(), cols};
  passes::Stage& s = sch[y];
  s.split(s.reduce_axes()[0], 8);
  return passes::lower_schedule(sch, "row_sums", {x});
}

// The kernels in one module, compiled once for every test.
const std::vector<ir::PrimFunc>& kernels() {
  static const std::vector<ir::PrimFunc> funcs = {affine_rows(), add_rows(), row_sums()};
  return funcs;
}
std::shared_ptr<Module> module() {
  static const std::shared_ptr<Module> m = codegen::compile_cpu(kernels());
  return m;
}

ExecGraph::Dim rows_dim(int64_t coef = 1) { return {coef, 0, {0}}; }
ExecGraph::Dim fixed(int64_t n) { return {0, n, {}}; }
ExecGraph::Value rows_by_cols() {
  return {{kMaxRows, kCols}, DType::Float32, {rows_dim(), fixed(kCols)}};
}
ExecGraph::Value flat_rows() { return {{kMaxRows * kCols}, DType::Float32, {rows_dim(kCols)}}; }

// x [rows, 40] -> affine_rows -> y [rows, 40] -> view -> out [rows*40] (the output).
std::shared_ptr<ExecGraph> affine_graph() {
  auto g = std::make_shared<ExecGraph>();
  g->symbols = {{"rows", 1, kMaxRows}};
  g->values = {rows_by_cols(), rows_by_cols(), flat_rows()};
  g->inputs = {{"x", 0}};
  g->kernels = {{"affine_rows", "affine", {0, 1}, 1}};
  g->kernels[0].symbols = {0};
  g->views = {{2, 1}};
  g->outputs = {2};
  return g;
}

// a [rows, 40] and b [40*rows] (viewed as [rows, 40]) -> add_rows -> z [rows, 40].
std::shared_ptr<ExecGraph> add_graph() {
  auto g = std::make_shared<ExecGraph>();
  g->symbols = {{"rows", 1, kMaxRows}};
  g->values = {rows_by_cols(), flat_rows(), rows_by_cols(), rows_by_cols()};
  g->inputs = {{"a", 0}, {"b", 1}};
  g->views = {{2, 1}};
  g->kernels = {{"add_rows", "add", {0, 2, 3}, 2}};
  g->kernels[0].symbols = {0};
  g->outputs = {3};
  return g;
}

// affine_graph with a second input s [8, cols] -> row_sums -> sums [8] (output 1): two
// symbols, each kernel taking one.
std::shared_ptr<ExecGraph> two_symbol_graph() {
  auto g = affine_graph();
  g->symbols.push_back({"cols", 1, kMaxSumCols});
  g->values.push_back({{kSumRows, kMaxSumCols}, DType::Float32, {fixed(kSumRows), {1, 0, {1}}}});
  g->values.push_back({{kSumRows}, DType::Float32});
  g->inputs.push_back({"s", 3});
  g->kernels.push_back({"row_sums", "sums", {3, 4}, 1});
  g->kernels.back().symbols = {1};
  g->outputs.push_back(4);
  return g;
}

NDArray ramp(const Shape& shape, float start = 0.0f) {
  NDArray t = NDArray::empty(shape, DType::Float32);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data_as<float>()[i] = start + static_cast<float>(i % 97) * 0.25f;
  return t;
}

void expect_sums(const NDArray& out, const NDArray& x) {
  ASSERT_EQ(out.shape(), (Shape{kSumRows}));
  const int64_t cols = x.shape()[1];
  for (int64_t i = 0; i < kSumRows; ++i) {
    double want = 0;
    for (int64_t j = 0; j < cols; ++j) want += x.data_as<float>()[i * cols + j];
    EXPECT_NEAR(out.data_as<float>()[i], want, 1e-3 * (1 + std::abs(want))) << cols << " cols";
  }
}

void expect_affine(const NDArray& out, const NDArray& x) {
  ASSERT_EQ(out.shape(), (Shape{x.numel()}));
  for (int64_t i = 0; i < x.numel(); ++i)
    ASSERT_EQ(out.data_as<float>()[i], 2 * x.data_as<float>()[i] + 1) << "at " << i;
}

TEST(DynamicExecutor, OneExecutorRunsAtEverySizeInItsRange) {
  GraphExecutor ex(affine_graph(), module());
  ASSERT_EQ(ex.symbols().size(), 1u);
  EXPECT_EQ(ex.symbols()[0].name, "rows");
  // Before the first run the buffers are at the maximum shape.
  EXPECT_EQ(ex.symbol_values(), (std::vector<std::pair<std::string, int64_t>>{{"rows", 64}}));
  NDArray whole = ex.get_output(0);
  ASSERT_EQ(whole.shape(), (Shape{kMaxRows * kCols}));
  for (int64_t i = 0; i < whole.numel(); ++i) whole.data_as<float>()[i] = kUntouched;
  for (int64_t n : {5, 64, 1, 17, 3}) {
    NDArray x = ramp({n, kCols}, static_cast<float>(n));
    ex.set_input("x", x);
    EXPECT_EQ(ex.get_input(0).shape(), (Shape{n, kCols}));
    ex.run();
    EXPECT_EQ(ex.symbol_values()[0].second, n);
    NDArray out = ex.get_output(0);
    EXPECT_EQ(out.data(), whole.data());  // a view of the buffer's first bytes
    expect_affine(out, x);
    if (n == 5)  // the first run: the buffer past its output is as it was
      for (int64_t i = n * kCols; i < kMaxRows * kCols; ++i)
        ASSERT_EQ(whole.data_as<float>()[i], kUntouched) << "at " << i;
    std::vector<NDArray> copies = ex.run({x});
    ASSERT_EQ(copies.size(), 1u);
    EXPECT_NE(copies[0].data(), out.data());
    expect_affine(copies[0], x);
  }
  // The profile shows the run's shapes.
  ex.set_input(0, ramp({7, kCols}));
  std::vector<KernelProfile> p = ex.profile(2);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].shapes, (std::vector<Shape>{{7, kCols}, {7, kCols}}));
  EXPECT_NE(GraphExecutor::profile_table(p).find("(7, 40), (7, 40)"), std::string::npos);
  BenchmarkResult r = ex.benchmark(1, 2, 0);
  EXPECT_EQ(r.results_ms.size(), 2u);
}

// The row sums are right only where the kernel reads the run's cols from its shape_args.
TEST(DynamicExecutor, EachKernelTakesItsSymbolsValues) {
  GraphExecutor ex(two_symbol_graph(), module());
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{3, 100}, {64, 1}, {1, 512}, {20, 7}}) {
    NDArray x = ramp({rows, kCols}), s = ramp({kSumRows, cols}, 1.0f);
    ex.set_input("x", x);
    ex.set_input("s", s);
    ex.run();
    EXPECT_EQ(ex.symbol_values(),
              (std::vector<std::pair<std::string, int64_t>>{{"rows", rows}, {"cols", cols}}));
    expect_affine(ex.get_output(0), x);
    expect_sums(ex.get_output(1), s);
    std::vector<NDArray> bound = ex.run_bound({x, s});
    expect_affine(bound[0], x);
    expect_sums(bound[1], s);
  }
}

TEST(DynamicExecutor, RunBoundTakesAnySizeAndLeavesTheExecutorsRunAlone) {
  GraphExecutor ex(affine_graph(), module());
  NDArray x9 = ramp({9, kCols});
  ex.set_input(0, x9);
  ex.run();
  for (int64_t n : {2, 64, 33}) {
    NDArray x = ramp({n, kCols}, 1.0f);
    std::vector<NDArray> out = ex.run_bound({x});
    ASSERT_EQ(out.size(), 1u);
    expect_affine(out[0], x);
  }
  // The executor's own inputs, outputs and binding are those of its last run.
  EXPECT_EQ(ex.symbol_values()[0].second, 9);
  expect_affine(ex.get_output(0), x9);
  ex.run();
  expect_affine(ex.get_output(0), x9);
  EXPECT_ERROR_WITH(ex.run_bound({ramp({65, kCols})}), "input 'x'", "rows = 65",
                    "outside rows's range [1, 64]");
}

TEST(DynamicExecutor, TwoInputsGiveOneSymbol) {
  GraphExecutor ex(add_graph(), module());
  for (int64_t n : {3, 64, 1, 30}) {
    NDArray a = ramp({n, kCols}), b = ramp({n * kCols}, 100.0f);
    std::vector<NDArray> outs = {ex.run({a, b})[0], ex.run_bound({a, b})[0]};
    ex.set_input(0, a);
    ex.set_input(1, b);
    ex.run();
    outs.push_back(ex.get_output(0));
    for (const NDArray& z : outs) {
      ASSERT_EQ(z.shape(), (Shape{n, kCols}));
      for (int64_t i = 0; i < n * kCols; ++i)
        ASSERT_EQ(z.data_as<float>()[i], a.data_as<float>()[i] + b.data_as<float>()[i]) << i;
    }
  }
  // Inputs that give rows two values: an error when the run starts, whichever call runs.
  ex.set_input("a", ramp({5, kCols}));
  ex.set_input("b", ramp({7 * kCols}));
  for (int call = 0; call < 3; ++call) {
    try {
      if (call == 0) ex.run();
      if (call == 1) ex.benchmark(1, 1, 0);
      if (call == 2) ex.profile(1);
      ADD_FAILURE() << "call " << call << " ran inputs that disagree";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(
                    "inputs 'a' and 'b' disagree on rows: 'a' gives rows = 5 and 'b' gives "
                    "rows = 7"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_ERROR_WITH(ex.run({ramp({5, kCols}), ramp({6 * kCols})}), "disagree on rows", "rows = 6");
  EXPECT_ERROR_WITH(ex.run_bound({ramp({5, kCols}), ramp({6 * kCols})}), "disagree on rows");
  // b's dimension is 40*rows: a size that no whole rows gives.
  EXPECT_ERROR_WITH(ex.set_input("b", ramp({41})), "input 'b' dimension 0 is 41",
                    "must be 40*rows for a whole rows in [1, 64]");
  ex.set_input("b", ramp({5 * kCols}));
  ex.run();  // agreeing again
  EXPECT_EQ(ex.get_output(0).shape(), (Shape{5, kCols}));
}

TEST(DynamicExecutor, InputShapeErrorsNameTheInputDimensionSymbolAndRange) {
  GraphExecutor ex(affine_graph(), module());
  EXPECT_ERROR_WITH(ex.set_input(0, ramp({65, kCols})),
                    "input 'x' dimension 0 is rows = 65, outside rows's range [1, 64]");
  EXPECT_ERROR_WITH(ex.set_input(0, ramp({0, kCols})),
                    "input 'x' dimension 0 is rows = 0, outside rows's range [1, 64]");
  EXPECT_ERROR_WITH(ex.set_input(0, ramp({5, 41})), "input 'x' dimension 1 is 41 but must be 40",
                    "float32(rows, 40) with rows in [1, 64]");
  EXPECT_ERROR_WITH(ex.set_input(0, ramp({5 * kCols})),
                    "input 'x' expects float32(rows, 40) with rows in [1, 64] but was given "
                    "float32(200)",
                    "rank");
  EXPECT_ERROR_WITH(ex.set_input(0, NDArray::zeros({5, kCols}, DType::Int32)), "input 'x'",
                    "int32(5, 40)");
  EXPECT_ERROR_WITH(ex.set_input(0, NDArray()), "undefined", "float32(rows, 40)");
  // A refused input leaves the last one in place.
  ex.set_input(0, ramp({4, kCols}));
  EXPECT_ERROR_WITH(ex.set_input(0, ramp({70, kCols})), "rows = 70");
  ex.run();
  EXPECT_EQ(ex.get_output(0).shape(), (Shape{4 * kCols}));
}

// ids [batch, seq] gives both symbols; mask [batch*seq] must match them, which is known only
// once both are bound. No kernels: the outputs are the inputs.
TEST(DynamicExecutor, DimensionsOfSeveralSymbolsAreCheckedWhenTheRunStarts) {
  auto g = std::make_shared<ExecGraph>();
  g->symbols = {{"batch", 1, 4}, {"seq", 1, 8}};
  g->values = {{{4, 8}, DType::Int64, {{1, 0, {0}}, {1, 0, {1}}}},
               {{32}, DType::Float32, {{1, 0, {0, 1}}}}};
  g->inputs = {{"ids", 0}, {"mask", 1}};
  g->outputs = {0, 1};
  GraphExecutor ex(g, nullptr);
  ex.set_input("ids", NDArray::zeros({2, 5}, DType::Int64));
  ex.set_input("mask", ramp({12}));
  EXPECT_ERROR_WITH(ex.run(), "input 'mask' dimension 0 is 12, but it must be batch*seq = 10",
                    "batch = 2, seq = 5");
  ex.set_input("mask", ramp({10}));
  ex.run();
  EXPECT_EQ(ex.get_output(0).shape(), (Shape{2, 5}));
  EXPECT_EQ(ex.get_output(1).shape(), (Shape{10}));
  EXPECT_EQ(ex.symbol_values(),
            (std::vector<std::pair<std::string, int64_t>>{{"batch", 2}, {"seq", 5}}));
  EXPECT_ERROR_WITH(ex.set_input("ids", NDArray::zeros({2, 9}, DType::Int64)),
                    "dimension 1 is seq = 9, outside seq's range [1, 8]");
}

TEST(DynamicExecutor, GraphsWhoseSymbolsCannotWorkAreRefusedAtConstruction) {
  // mask [batch*seq] alone gives neither symbol a value.
  auto g = std::make_shared<ExecGraph>();
  g->symbols = {{"batch", 1, 4}, {"seq", 1, 8}};
  g->values = {{{32}, DType::Float32, {{1, 0, {0, 1}}}}};
  g->inputs = {{"mask", 0}};
  g->outputs = {0};
  EXPECT_ERROR_WITH((void)GraphExecutor(g, nullptr), "symbol 'batch' cannot be bound at run time",
                    "no input has a dimension that is batch alone");
  auto bad = [](auto edit) {
    auto g = affine_graph();
    edit(*g);
    return g;
  };
  EXPECT_ERROR_WITH(
      GraphExecutor(bad([](ExecGraph& g) { g.values[0].shape = {32, kCols}; }), module()),
      "value 0 dimension 0 is rows = 64 with every symbol at its maximum", "(32, 40) has 32");
  EXPECT_ERROR_WITH(
      GraphExecutor(bad([](ExecGraph& g) { g.kernels[0].symbols.clear(); }), module()),
      "kernel 'affine'", "depends on 'rows', but does not take that symbol's value");
  EXPECT_ERROR_WITH(GraphExecutor(bad([](ExecGraph& g) { g.symbols[0].min = 65; }), module()),
                    "symbol 'rows' has the range [65, 64]");
  EXPECT_ERROR_WITH(
      GraphExecutor(bad([](ExecGraph& g) { g.values[0].dims[0].symbols = {3}; }), module()),
      "value 0 dimension 0 names symbol 3");
  // A view whose run-time dimensions were left out would see max-size data.
  EXPECT_ERROR_WITH(GraphExecutor(bad([](ExecGraph& g) { g.values[2].dims.clear(); }), module()),
                    "value 2 is a view of value 1 but holds 2560 elements where value 1 holds 40");
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "ember_dynamic_executor_test_" + std::to_string(::getpid()) + "_" +
         name;
}

// `g` over the compiled kernels as a model file (what export_library writes for a build).
std::string save(const std::shared_ptr<ExecGraph>& g, const std::vector<ir::PrimFunc>& funcs,
                 const std::string& name) {
  codegen::CpuObject obj = codegen::compile_cpu_object(funcs);
  Artifact a;
  a.graph = g;
  a.info.ember_version = ember_version();
  a.info.target = "llvm";
  a.info.cpu = obj.cpu;
  a.info.features = obj.features;
  a.info.imports = obj.imports;
  a.code = {{"cpu.so", codegen::link_shared_library(obj.bytes)}};
  const std::string path = temp_path(name);
  save_artifact(a, path);
  return path;
}

std::string graph_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();  // the whole file: the graph section is text inside it
}

TEST(DynamicExecutor, TheModelFileKeepsSymbolsDimsAndKernelSymbols) {
  const std::string path = save(two_symbol_graph(), kernels(), "dynamic.ember");
  const std::string text = graph_text(path);
  EXPECT_NE(text.find(R"({"name": "rows", "min": 1, "max": 64})"), std::string::npos);
  EXPECT_NE(text.find(R"({"coef": 40, "offset": 0, "symbols": [0]})"), std::string::npos);
  auto lib = load_library(path);
  const ExecGraph& g = *lib->graph;
  ASSERT_EQ(g.symbols.size(), 2u);
  EXPECT_EQ(g.symbols[0].name, "rows");
  EXPECT_EQ(g.symbols[0].min, 1);
  EXPECT_EQ(g.symbols[0].max, kMaxRows);
  EXPECT_EQ(g.symbols[1].name, "cols");
  ASSERT_EQ(g.values[2].dims.size(), 1u);
  EXPECT_EQ(g.values[2].dims[0].coef, kCols);
  EXPECT_EQ(g.values[0].dims[1].offset, kCols);
  EXPECT_EQ(g.values[3].dims[1].symbols, std::vector<int>{1});
  EXPECT_TRUE(g.values[4].dims.empty());
  EXPECT_EQ(g.kernels[0].symbols, std::vector<int>{0});
  EXPECT_EQ(g.kernels[1].symbols, std::vector<int>{1});
  GraphExecutor ex(lib->graph, lib->module);
  for (int64_t n : {6, 51}) {
    NDArray x = ramp({n, kCols}), s = ramp({kSumRows, 3 * n});
    std::vector<NDArray> out = ex.run({x, s});
    expect_affine(out[0], x);
    expect_sums(out[1], s);
  }
  std::remove(path.c_str());
}

// A static graph writes no "symbols" or "dims", so its file is what Ember wrote before
// run-time shapes, and such a file loads and runs as a static graph.
TEST(DynamicExecutor, AStaticModelFileIsAsBeforeAndLoads) {
  using namespace ir;
  Tensor x = placeholder("x", {8, kCols}, DType::Float32);
  Tensor y = compute("y", {8, kCols}, [&](const std::vector<PrimVar>& i) {
    return x({i[0], i[1]}) + make_const(DType::Float32, 1);
  });
  Schedule sch({y});
  std::vector<PrimFunc> funcs = {passes::lower_schedule(sch, "add_one", {x})};
  auto g = std::make_shared<ExecGraph>();
  g->values = {{{8, kCols}, DType::Float32}, {{8, kCols}, DType::Float32}};
  g->inputs = {{"x", 0}};
  g->kernels = {{"add_one", "add_one", {0, 1}, 1}};
  g->outputs = {1};
  const std::string path = save(g, funcs, "static.ember");
  const std::string text = graph_text(path);
  EXPECT_EQ(text.find("\"symbols\""), std::string::npos);
  EXPECT_EQ(text.find("\"dims\""), std::string::npos);
  auto lib = load_library(path);
  EXPECT_TRUE(lib->graph->symbols.empty());
  GraphExecutor ex(lib->graph, lib->module);
  EXPECT_TRUE(ex.symbols().empty());
  EXPECT_TRUE(ex.symbol_values().empty());
  NDArray in = ramp({8, kCols});
  NDArray out = ex.run({in})[0];
  ASSERT_EQ(out.shape(), (Shape{8, kCols}));
  EXPECT_EQ(out.data_as<float>()[9], in.data_as<float>()[9] + 1);
  EXPECT_ERROR_WITH(ex.set_input(0, ramp({4, kCols})), "input 'x' expects float32(8, 40)",
                    "but was given float32(4, 40)");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ember::runtime
