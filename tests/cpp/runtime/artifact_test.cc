// Saved models: export, reload with the runtime alone, run bit for bit like the JIT; damaged
// and foreign files; several threads on one loaded model; the .npy reader and writer.
#include "ember/runtime/artifact.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "../expect_error.h"
#include "ember/codegen/build.h"
#include "ember/codegen/export.h"
#include "ember/runtime/library_module.h"
#include "ember/runtime/npy.h"
#include "ember/support/error.h"

namespace ember {
namespace {

using runtime::GraphExecutor;
using runtime::NDArray;

NDArray random_tensor(const runtime::Shape& shape, unsigned seed) {
  NDArray t = NDArray::empty(shape, DType::Float32);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = dist(rng);
  return t;
}

std::string temp_path(const std::string& name) {
  // With the process id: ctest runs each test as its own process, in parallel, and two
  // processes writing one file raced (ASan saw a test read a half-written file).
  return ::testing::TempDir() + "ember_artifact_test_" + std::to_string(::getpid()) + "_" + name;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// relu(dense(x, W) + b) and tanh(x) reshaped: a fused kernel with parameters, a
// transcendental, a view and two outputs. Big enough that the dense loop runs in parallel.
std::shared_ptr<Library> build_model() {
  ir::Expr x = ir::var("x", ir::TensorType{{64, 128}, DType::Float32});
  ir::Expr w = ir::constant(random_tensor({96, 128}, 1), "fc.weight");
  ir::Expr b = ir::constant(random_tensor({96}, 2), "fc.bias");
  ir::Expr fc = ir::call("nn.relu", {ir::call("add", {ir::call("nn.dense", {x, w}, {}, "fc"), b})});
  ir::Expr t = ir::call("reshape", {ir::call("tanh", {x})},
                        ir::Attrs({{"newshape", std::vector<int64_t>{8, 8, 128}}}));
  return build(ir::function({x}, ir::tuple({fc, t})));
}

std::vector<NDArray> run(GraphExecutor& ex, const NDArray& x) {
  ex.set_input(0, x);
  ex.run();
  std::vector<NDArray> out;
  for (int i = 0; i < ex.num_outputs(); ++i) out.push_back(ex.get_output(i).clone());
  return out;
}

bool same_bits(const NDArray& a, const NDArray& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

class ArtifactTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    lib_ = build_model();
    path_ = temp_path("model.ember");
    lib_->export_library(path_);
  }
  static void TearDownTestSuite() {
    std::remove(path_.c_str());
    lib_.reset();
  }
  static std::shared_ptr<Library> lib_;
  static std::string path_;
};
std::shared_ptr<Library> ArtifactTest::lib_;
std::string ArtifactTest::path_;

TEST_F(ArtifactTest, RoundTripMatchesTheJitBitForBit) {
  GraphExecutor jit(lib_->graph, lib_->module);
  auto loaded = runtime::load_library(path_);
  EXPECT_EQ(loaded->module->type_key(), "so");
  GraphExecutor saved(loaded->graph, loaded->module);
  NDArray x = random_tensor({64, 128}, 3);
  auto expected = run(jit, x), got = run(saved, x);
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(same_bits(got[i], expected[i])) << i;
  // Sanity of the numbers themselves: output 1 is tanh(x).
  EXPECT_NEAR(got[1].data_as<float>()[5], std::tanh(x.data_as<float>()[5]), 1e-6);
}

TEST_F(ArtifactTest, KeepsGraphReportAndAlignedParams) {
  runtime::Artifact a = runtime::read_artifact(path_);
  EXPECT_EQ(a.info.target, "llvm");
  EXPECT_FALSE(a.info.cpu.empty());
  // The dense loop is parallel: the code imports the runtime's thread pool.
  EXPECT_EQ(a.info.imports, std::vector<std::string>{"ember_parallel_for"});
  ASSERT_EQ(a.graph->inputs.size(), 1u);
  EXPECT_EQ(a.graph->inputs[0].name, "x");
  EXPECT_EQ(a.graph->views.size(), lib_->graph->views.size());
  ASSERT_EQ(a.graph->params.size(), lib_->graph->params.size());
  for (size_t i = 0; i < a.graph->params.size(); ++i) {
    EXPECT_EQ(a.graph->params[i].name, lib_->graph->params[i].name);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.graph->params[i].data.data()) % 64, 0u);
    EXPECT_TRUE(same_bits(a.graph->params[i].data, lib_->graph->params[i].data));
  }
  ASSERT_EQ(a.info.kernels.size(), lib_->kernels.size());
  for (size_t i = 0; i < a.info.kernels.size(); ++i) {
    EXPECT_EQ(a.info.kernels[i].ops, lib_->kernels[i].ops);
    EXPECT_EQ(a.info.kernels[i].anchor, lib_->kernels[i].anchor);
  }
  EXPECT_EQ(a.info.fusion.size(), lib_->fusion.size());
}

TEST_F(ArtifactTest, FourThreadsOnOneLoadedModel) {
  auto loaded = runtime::load_library(path_);
  GraphExecutor jit(lib_->graph, lib_->module);
  constexpr int kThreads = 4, kIters = 25;
  std::vector<NDArray> inputs;
  std::vector<std::vector<NDArray>> expected;
  for (int t = 0; t < kThreads; ++t) {
    inputs.push_back(random_tensor({64, 128}, 10 + t));
    expected.push_back(run(jit, inputs.back()));
  }
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      GraphExecutor ex(loaded->graph, loaded->module);  // own buffers, shared params/code
      for (int i = 0; i < kIters; ++i) {
        auto out = run(ex, inputs[t]);
        for (size_t o = 0; o < out.size(); ++o) mismatches[t] += !same_bits(out[o], expected[t][o]);
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

TEST_F(ArtifactTest, DamagedAndForeignFilesAreClearErrors) {
  const std::string good = read_bytes(path_), bad = temp_path("bad.ember");
  auto load_bytes = [&](const std::string& bytes) {
    write_bytes(bad, bytes);
    runtime::load_library(bad);
  };
  EXPECT_ERROR_WITH(runtime::load_library(temp_path("missing.ember")), "cannot open");
  EXPECT_ERROR_WITH(load_bytes(""), "not an Ember artifact");
  EXPECT_ERROR_WITH(load_bytes("def forward(x): return x\n"), "not an Ember artifact");
  EXPECT_ERROR_WITH(load_bytes(good.substr(0, 12)), "truncated");
  EXPECT_ERROR_WITH(load_bytes(good.substr(0, good.size() / 2)), "truncated");
  EXPECT_ERROR_WITH(load_bytes(good.substr(0, good.size() - 1)), "truncated");
  std::string version = good;
  version[8] = 7;
  EXPECT_ERROR_WITH(load_bytes(version), "format version 7", "this Ember reads version 1");
  std::string header = good;
  header[20] ^= 1;  // inside the section table
  EXPECT_ERROR_WITH(load_bytes(header), "corrupted", "header");
  std::string payload = good;
  payload[payload.size() - 100] ^= 0x10;  // inside the last section (the code)
  EXPECT_ERROR_WITH(load_bytes(payload), "corrupted", "cpu.so");
  std::remove(bad.c_str());
}

TEST(Artifact, ComputeObjectAndLinkErrors) {
  ir::Expr x = ir::var("x", ir::TensorType{{16}, DType::Float32});
  auto lib = build(ir::function({x}, ir::call("exp", {x})));
  codegen::CpuObject obj = codegen::compile_cpu_object(lib->prim_funcs);
  ASSERT_GT(obj.bytes.size(), 4u);
  EXPECT_EQ(obj.bytes.substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_FALSE(obj.cpu.empty());
  EXPECT_ERROR_WITH(codegen::link_shared_library("not an object file"), "linking", "failed");
}

TEST(Artifact, NpyRoundTripAndErrors) {
  const std::string path = temp_path("t.npy");
  for (auto shape : {runtime::Shape{}, runtime::Shape{5}, runtime::Shape{2, 3, 4}}) {
    NDArray t = random_tensor(shape, 7);
    runtime::save_npy(path, t);
    NDArray back = runtime::load_npy(path);
    EXPECT_TRUE(same_bits(back, t)) << runtime::shape_str(shape);
  }
  NDArray ints = NDArray::empty({3}, DType::Int64);
  for (int i = 0; i < 3; ++i) ints.data_as<int64_t>()[i] = -i;
  runtime::save_npy(path, ints);
  EXPECT_TRUE(same_bits(runtime::load_npy(path), ints));
  // NumPy has no bfloat16: refused, pointing at float32 (model files hold bfloat16).
  EXPECT_ERROR_WITH(runtime::save_npy(path, NDArray::empty({2}, DType::BFloat16)),
                    "NumPy has no bfloat16", "float32");
  write_bytes(path, "hello");
  EXPECT_ERROR_WITH(runtime::load_npy(path), "not a .npy file");
  runtime::save_npy(path, random_tensor({100}, 1));
  write_bytes(path, read_bytes(path).substr(0, 200));
  EXPECT_ERROR_WITH(runtime::load_npy(path), "truncated");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ember
