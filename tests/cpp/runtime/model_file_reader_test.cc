// The model-file reader on files the compiler never writes: what the fuzzer
// (tests/fuzz/model_file_fuzz.cc) and reading the reader found. Each file is written by
// save_artifact (valid checksums) from a graph built here, with a code section that holds
// only the kernel manifest: the files are read with load_code = false, as `ember inspect`
// does, so no code is needed. Every defect must be an ember::Error naming what is wrong;
// before the fixes these loaded (and the executor then failed with an internal error, or
// read a wrapped-around integer).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "../expect_error.h"
#include "ember/runtime/artifact.h"
#include "ember/runtime/graph_executor.h"
#include "ember/runtime/manifest.h"

namespace ember::runtime {
namespace {

std::string temp_path(const std::string& name) {
  // With the process id: ctest runs each test as its own process, in parallel, and two
  // processes writing one file raced (ASan saw a test read a half-written file).
  return ::testing::TempDir() + "ember_model_file_reader_test_" + std::to_string(::getpid()) + "_" +
         name;
}

// x + w -> y, all float32[4]: value 0 is the input x, 1 the parameter w, 2 the output y;
// value 3 (float32[2, 2]) is not used unless a test uses it.
ExecGraph small_graph() {
  ExecGraph g;
  g.values = {{{4}, DType::Float32},
              {{4}, DType::Float32},
              {{4}, DType::Float32},
              {{2, 2}, DType::Float32}};
  g.inputs = {{"x", 0}};
  g.params = {{"w", 1, NDArray::zeros({4}, DType::Float32)}};
  g.kernels = {{"k", "add", {0, 1, 2}, 2}};
  g.outputs = {2};
  return g;
}

// Writes g as a model file whose code section holds just the manifest of its kernels (the
// buffers `code_for`, by default g, gives them, so the graph-vs-code check passes when it is
// g; a kernel that takes symbols takes its shape_args after its inputs), and returns the
// path.
std::string write_model(const ExecGraph& g, const std::string& name,
                        const ExecGraph* code_for = nullptr) {
  Artifact a;
  a.graph = std::make_shared<ExecGraph>(g);
  std::vector<KernelSignature> signatures;
  for (const ExecGraph::Kernel& k : (code_for ? *code_for : g).kernels) {
    KernelSignature s{k.func, {}};
    for (int v : k.args) s.buffers.push_back(g.values.at(v));
    if (!k.symbols.empty())
      s.buffers.insert(s.buffers.begin() + k.num_inputs,
                       {{static_cast<int64_t>(k.symbols.size())}, DType::Int64});
    signatures.push_back(s);
  }
  a.code = {{"cpu.so", write_kernel_manifest(signatures)}};
  const std::string path = temp_path(name);
  save_artifact(a, path);
  return path;
}

std::shared_ptr<LoadedLibrary> inspect(const std::string& path) {
  LoadOptions options;
  options.load_code = false;
  return load_library(path, options);
}

// FNV-1a 64, the artifact's section checksum.
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Replaces `from` with `to` in the graph JSON of the file at `path` and fixes the checksums
// (what someone editing a file would do). The graph section is the first.
void edit_graph_text(const std::string& path, const std::string& from, const std::string& to) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  std::string file = buf.str();
  uint32_t count;
  std::memcpy(&count, file.data() + 12, 4);
  ASSERT_EQ(std::string(file.data() + 16, 5), "graph");
  uint64_t offset, size;
  std::memcpy(&offset, file.data() + 24, 8);
  std::memcpy(&size, file.data() + 32, 8);
  std::string graph = file.substr(offset, size);
  size_t at = graph.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  graph.replace(at, from.size(), to);
  ASSERT_EQ(graph.size(), size) << "the edit must keep the section's size";
  file.replace(offset, size, graph);
  uint64_t sum = fnv1a(graph), table_end = 16 + 32 * uint64_t{count};
  std::memcpy(file.data() + 40, &sum, 8);
  uint64_t head = fnv1a(file.substr(0, table_end));
  std::memcpy(file.data() + table_end, &head, 8);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << file;
}

class Kernels final : public Module {
 public:
  KernelFn get_function(const std::string&) const override {
    return [](void**) {};
  }
  std::string type_key() const override { return "none"; }
  std::string get_source(const std::string&) const override { return ""; }
};

TEST(ModelFileReader, TheSmallGraphLoadsAndPlans) {
  std::string path = write_model(small_graph(), "good.ember");
  auto lib = inspect(path);
  EXPECT_EQ(lib->graph->kernels.size(), 1u);
  GraphExecutor executor(lib->graph, std::make_shared<Kernels>());
  EXPECT_EQ(executor.num_inputs(), 1);
  std::remove(path.c_str());
}

TEST(ModelFileReader, AValueHasOneOwner) {
  ExecGraph g = small_graph();
  g.params[0].value = 0;  // the input is a parameter too
  std::string path = write_model(g, "input_param.ember");
  EXPECT_ERROR_WITH(inspect(path), "params[0].value", "already an input, a parameter or a view");
  std::remove(path.c_str());
  g = small_graph();
  g.params.push_back({"w2", 1, NDArray::zeros({4}, DType::Float32)});  // two params, one value
  path = write_model(g, "param_twice.ember");
  EXPECT_ERROR_WITH(inspect(path), "params[1].value", "already");
  std::remove(path.c_str());
  g = small_graph();
  g.views = {{1, 3}};  // the parameter is a view as well
  path = write_model(g, "param_view.ember");
  EXPECT_ERROR_WITH(inspect(path), "views[0].dst", "already");
  std::remove(path.c_str());
}

TEST(ModelFileReader, ViewsFormNoCycle) {
  ExecGraph g = small_graph();
  g.values.push_back({{4}, DType::Float32});  // value 4
  g.views = {{3, 4}, {4, 3}};
  std::string path = write_model(g, "view_cycle.ember");
  EXPECT_ERROR_WITH(inspect(path), "cycle of views");
  std::remove(path.c_str());
}

TEST(ModelFileReader, NoKernelWritesAnInputOrAParameter) {
  ExecGraph g = small_graph();
  g.kernels[0].args = {0, 2, 1};  // writes w, which every executor of the model shares
  std::string path = write_model(g, "writes_param.ember");
  EXPECT_ERROR_WITH(inspect(path), "kernels[0].args[2]", "input or a parameter");
  std::remove(path.c_str());
  g = small_graph();
  g.kernels[0].args = {1, 2, 0};  // writes the input
  path = write_model(g, "writes_input.ember");
  EXPECT_ERROR_WITH(inspect(path), "kernels[0].args[2]");
  std::remove(path.c_str());
  g = small_graph();
  g.views = {{3, 1}};  // writes the parameter through a view of it
  g.kernels[0].args = {0, 2, 3};
  path = write_model(g, "writes_param_view.ember");
  EXPECT_ERROR_WITH(inspect(path), "kernels[0].args[2]");
  std::remove(path.c_str());
}

// 18446744073709551620 = 2^64 + 4: its digits used to wrap around to 4, a valid dimension.
TEST(ModelFileReader, IntegersPast64BitsAreRefused) {
  ExecGraph g = small_graph();
  g.values[3].shape = {2, 111111111111111111};  // as long as the number put in its place
  std::string path = write_model(g, "big_int.ember");
  edit_graph_text(path, "[2,111111111111111111]", "[18446744073709551620]");
  EXPECT_ERROR_WITH(inspect(path), "integer out of range");
  std::remove(path.c_str());
}

// small_graph with run-time shapes: x and y are [n], n a symbol in [1, 4] that the kernel
// takes.
ExecGraph dynamic_graph() {
  ExecGraph g = small_graph();
  g.symbols = {{"n", 1, 4}};
  g.values[0].dims = g.values[2].dims = {{1, 0, {0}}};
  g.kernels[0].symbols = {0};
  return g;
}

TEST(ModelFileReader, RunTimeShapesLoadAndTheirIdsAreChecked) {
  std::string path = write_model(dynamic_graph(), "dynamic.ember");
  auto lib = inspect(path);
  EXPECT_EQ(lib->graph->symbols.size(), 1u);
  EXPECT_EQ(lib->graph->values[0].dims.size(), 1u);
  EXPECT_EQ(lib->graph->kernels[0].symbols, std::vector<int>{0});
  GraphExecutor executor(lib->graph, std::make_shared<Kernels>());
  EXPECT_EQ(executor.symbols()[0].name, "n");
  std::remove(path.c_str());

  ExecGraph g = dynamic_graph();
  g.values[2].dims[0].symbols = {1};
  path = write_model(g, "dims_symbol.ember");
  EXPECT_ERROR_WITH(inspect(path), "values[2].dims[0].symbols[0]", "is not a symbol id in [0, 1)");
  std::remove(path.c_str());
  g = dynamic_graph();
  g.kernels[0].symbols = {-1};
  path = write_model(g, "kernel_symbol.ember");
  EXPECT_ERROR_WITH(inspect(path), "kernels[0].symbols[0]", "is not a symbol id");
  std::remove(path.c_str());
  g = dynamic_graph();
  g.values[0].dims.push_back({0, 1, {}});
  path = write_model(g, "dims_rank.ember");
  EXPECT_ERROR_WITH(inspect(path), "values[0].dims", "does not match the shape's rank");
  std::remove(path.c_str());
}

// The code of a kernel that takes symbols takes its shape_args: a graph that drops the
// kernel's symbols no longer matches its code.
TEST(ModelFileReader, AKernelsSymbolsMustMatchItsCode) {
  const ExecGraph compiled = dynamic_graph();
  ExecGraph g = compiled;
  g.kernels[0].symbols.clear();
  std::string path = write_model(g, "no_shape_args.ember", &compiled);
  EXPECT_ERROR_WITH(inspect(path), "kernel 'add' passes 3 buffers but its code takes 4");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ember::runtime
