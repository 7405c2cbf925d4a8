// GPU artifacts without a GPU: a target="cuda" build exported and read back keeps its PTX,
// arch and launch dims exactly; loading it makes a CudaModule with no GPU; running it is the
// clear no-driver error (or, with a GPU, matches the CPU build); a damaged launch table is a
// clear "corrupted" error naming the file and the field.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>

#include "../expect_error.h"
#include "ember/codegen/build.h"
#include "ember/runtime/artifact.h"
#include "ember/runtime/cuda.h"
#include "ember/runtime/manifest.h"
#include "ember/support/error.h"

namespace ember {
namespace {

using runtime::NDArray;
using runtime::cuda::CudaModule;
using runtime::cuda::LaunchDims;

std::string temp_path(const std::string& name) {
  // With the process id: ctest runs each test as its own process, in parallel, and two
  // processes writing one file raced (ASan saw a test read a half-written file).
  return ::testing::TempDir() + "ember_cuda_artifact_test_" + std::to_string(::getpid()) + "_" +
         name;
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

// The file format of artifact.h, written independently of the runtime so that a test can
// damage a field of the graph JSON and still pass the checksums (what a buggy or foreign
// writer would produce).
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

template <class T>
T get(const std::string& s, size_t at) {
  T v;
  std::memcpy(&v, s.data() + at, sizeof(T));
  return v;
}

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

std::vector<std::pair<std::string, std::string>> sections_of(const std::string& file) {
  std::vector<std::pair<std::string, std::string>> out;
  uint32_t n = get<uint32_t>(file, 12);
  for (uint32_t s = 0; s < n; ++s) {
    size_t entry = 16 + 32 * s;
    std::string kind(file.data() + entry, strnlen(file.data() + entry, 8));
    out.emplace_back(kind,
                     file.substr(get<uint64_t>(file, entry + 8), get<uint64_t>(file, entry + 16)));
  }
  return out;
}

std::string file_of(const std::vector<std::pair<std::string, std::string>>& sections) {
  auto align = [](size_t n) { return (n + 63) / 64 * 64; };
  std::string head = "EMBERLIB";
  put<uint32_t>(head, runtime::kArtifactVersion);
  put<uint32_t>(head, static_cast<uint32_t>(sections.size()));
  size_t offset = align(16 + 32 * sections.size() + 8);
  for (const auto& [kind, bytes] : sections) {
    char name[8] = {};
    std::memcpy(name, kind.data(), kind.size());
    head.append(name, 8);
    put<uint64_t>(head, offset);
    put<uint64_t>(head, bytes.size());
    put<uint64_t>(head, fnv1a(bytes));
    offset = align(offset + bytes.size());
  }
  put<uint64_t>(head, fnv1a(head));
  std::string file = head;
  for (const auto& [kind, bytes] : sections) {
    file.resize(align(file.size()), '\0');
    file += bytes;
  }
  return file;
}

// The artifact at `path` with its graph JSON edited by `edit` (checksums made right again).
std::string with_graph(const std::string& path, const std::function<void(std::string&)>& edit) {
  auto sections = sections_of(read_bytes(path));
  EXPECT_EQ(sections.at(0).first, "graph");
  edit(sections.at(0).second);
  return file_of(sections);
}

void replace_once(std::string& s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  ASSERT_NE(at, std::string::npos) << "'" << from << "' not in the graph";
  s.replace(at, from.size(), to);
}

// dense + bias + relu, then softmax: two kernels with different launch shapes.
ir::Function model() {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  NDArray w = NDArray::empty({24, 32}, DType::Float32), b = NDArray::empty({24}, DType::Float32);
  for (int64_t i = 0; i < w.numel(); ++i) w.data_as<float>()[i] = dist(rng);
  for (int64_t i = 0; i < b.numel(); ++i) b.data_as<float>()[i] = dist(rng);
  ir::Expr x = ir::var("x", ir::TensorType{{4, 32}, DType::Float32});
  ir::Expr fc = ir::call("add", {ir::call("nn.dense", {x, ir::constant(w, "fc.weight")}, {}, "fc"),
                                 ir::constant(b, "fc.bias")});
  return ir::function({x}, ir::call("nn.softmax", {ir::call("nn.relu", {fc})}));
}

void expect_same_dims(const std::map<std::string, LaunchDims>& got,
                      const std::map<std::string, LaunchDims>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [func, w] : want) {
    ASSERT_TRUE(got.count(func)) << func;
    const LaunchDims& g = got.at(func);
    EXPECT_EQ(g.grid, w.grid) << func;
    EXPECT_EQ(g.block, w.block) << func;
    EXPECT_EQ(g.num_params, w.num_params) << func;
    EXPECT_EQ(g.symbol, w.symbol) << func;
  }
}

class CudaArtifactTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    lib_ = build(model(), "cuda -arch=sm_90");
    path_ = temp_path("model.ember");
    lib_->export_library(path_);
  }
  static void TearDownTestSuite() {
    std::remove(path_.c_str());
    lib_.reset();
  }
  static const CudaModule& built() { return dynamic_cast<const CudaModule&>(*lib_->module); }
  static std::shared_ptr<Library> lib_;
  static std::string path_;
};
std::shared_ptr<Library> CudaArtifactTest::lib_;
std::string CudaArtifactTest::path_;

// `saved` is `built` followed by comment lines only (the kernel manifest).
void expect_ptx_and_manifest(const std::string& saved, const std::string& built) {
  ASSERT_GE(saved.size(), built.size());
  EXPECT_EQ(saved.compare(0, built.size(), built), 0);
  std::istringstream rest(saved.substr(built.size()));
  for (std::string line; std::getline(rest, line);)
    EXPECT_TRUE(line.empty() || line.rfind("// ", 0) == 0) << line;
  EXPECT_NE(saved.find(runtime::kManifestBegin, built.size()), std::string::npos);
}

TEST_F(CudaArtifactTest, ReadBackKeepsPtxArchAndLaunchDimsExactly) {
  runtime::Artifact a = runtime::read_artifact(path_);
  EXPECT_EQ(a.info.target, "cuda -arch=sm_90");
  EXPECT_EQ(a.info.arch, "sm_90");
  EXPECT_EQ(a.info.cpu, "");
  ASSERT_EQ(a.code.size(), 1u);
  EXPECT_EQ(a.code[0].first, "ptx");
  // The PTX as built, then the kernel manifest as PTX comments.
  expect_ptx_and_manifest(a.code[0].second, lib_->module->get_source("ptx"));
  ASSERT_GE(built().kernels().size(), 2u);
  expect_same_dims(a.info.launch, built().kernels());
  // Not all kernels are launched alike: the table is per kernel, not one shape for all.
  auto first = built().kernels().begin(), last = std::prev(built().kernels().end());
  EXPECT_TRUE(first->second.grid != last->second.grid || first->second.block != last->second.block);
}

TEST_F(CudaArtifactTest, LoadsAsACudaModuleWithoutAGpu) {
  auto loaded = runtime::load_library(path_);
  EXPECT_EQ(loaded->module->type_key(), "ptx");
  auto gpu = std::dynamic_pointer_cast<CudaModule>(loaded->module);
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->arch(), "sm_90");
  expect_same_dims(gpu->kernels(), built().kernels());
  EXPECT_EQ(gpu->get_source("ptx"), lib_->module->get_source("ptx"));  // without the manifest
  EXPECT_ERROR_WITH(gpu->get_source("ll"), "no 'll' source", "only the PTX");
  ASSERT_EQ(loaded->graph->kernels.size(), lib_->graph->kernels.size());
  for (size_t i = 0; i < loaded->graph->kernels.size(); ++i)
    EXPECT_EQ(loaded->graph->kernels[i].func, lib_->graph->kernels[i].func);
}

TEST_F(CudaArtifactTest, RunningWithoutAGpuIsTheClearError) {
  if (runtime::cuda::available()) GTEST_SKIP() << "a GPU is present";
  auto loaded = runtime::load_library(path_);
  EXPECT_ERROR_WITH(runtime::GraphExecutor(loaded->graph, loaded->module), "no CUDA",
                    "target=\"llvm\"");
  runtime::ExecutorOptions no_graph;
  no_graph.cuda_graph = false;
  EXPECT_ERROR_WITH(runtime::GraphExecutor(loaded->graph, loaded->module, no_graph), "no CUDA");
  EXPECT_ERROR_WITH(runtime::cuda::Stream(), "no CUDA");
  EXPECT_FALSE(runtime::cuda::Graph().defined());  // an empty graph needs no driver
}

TEST(CudaArtifact, LoadedGpuModelMatchesTheCpuBuild) {
  if (!runtime::cuda::available()) GTEST_SKIP() << "no CUDA GPU: GPU kernels are not run";
  const std::string path = temp_path("native.ember");
  build(model(), "cuda -arch=" + runtime::cuda::device_arch())->export_library(path);
  auto loaded = runtime::load_library(path);
  auto cpu = build(model(), "llvm");
  NDArray x = NDArray::empty({4, 32}, DType::Float32);
  for (int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = std::sin(0.37 * i);
  std::vector<NDArray> outs;
  for (auto [graph, module] :
       {std::pair{loaded->graph, loaded->module}, std::pair{cpu->graph, cpu->module}}) {
    runtime::GraphExecutor ex(graph, module);
    ex.set_input(0, x);
    ex.run();
    outs.push_back(runtime::cuda::to_host(ex.get_output(0)).clone());
  }
  ASSERT_EQ(outs[0].numel(), outs[1].numel());
  for (int64_t i = 0; i < outs[0].numel(); ++i)
    EXPECT_NEAR(outs[0].data_as<float>()[i], outs[1].data_as<float>()[i], 1e-5) << i;
  std::remove(path.c_str());
}

// CUDA graphs: the run that records and the runs that replay give what launching every
// kernel gives, and a replay reads the input set after the recording.
TEST(CudaArtifact, CudaGraphReplayMatchesKernelLaunches) {
  if (!runtime::cuda::available()) GTEST_SKIP() << "no CUDA GPU: GPU kernels are not run";
  auto lib = build(model(), "cuda -arch=" + runtime::cuda::device_arch());
  NDArray x = NDArray::empty({4, 32}, DType::Float32);
  for (int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = std::sin(0.37 * i);
  runtime::ExecutorOptions no_graph;
  no_graph.cuda_graph = false;
  runtime::GraphExecutor eager(lib->graph, lib->module, no_graph);
  runtime::GraphExecutor replay(lib->graph, lib->module);
  ASSERT_TRUE(replay.cuda_graph());
  ASSERT_FALSE(eager.cuda_graph());
  auto output = [](runtime::GraphExecutor& ex) {
    return runtime::cuda::to_host(ex.get_output(0)).clone();
  };
  auto same = [](const NDArray& a, const NDArray& b) {
    return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
  };
  for (float shift : {0.0f, 1.5f}) {  // the second input comes after the graph is recorded
    for (int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] += shift;
    eager.set_input(0, x);
    eager.run();
    replay.set_input(0, x);
    for (int run = 0; run < 3; ++run) {
      replay.run();
      EXPECT_TRUE(same(output(replay), output(eager))) << "shift " << shift << ", run " << run;
    }
  }
  EXPECT_GT(replay.benchmark(5, 2, 0).mean, 0.0);
}

TEST_F(CudaArtifactTest, DamagedLaunchTableIsAClearError) {
  const std::string bad = temp_path("bad.ember");
  const std::string func = built().kernels().begin()->first;
  const LaunchDims& dims = built().kernels().begin()->second;
  auto load = [&](const std::function<void(std::string&)>& edit) {
    write_bytes(bad, with_graph(path_, edit));
    runtime::load_library(bad);
  };
  // The rewriting itself keeps a good file good.
  load([](std::string&) {});
  const std::string where = "artifact '" + bad + "' is corrupted";
  std::string np = "\"num_params\": " + std::to_string(dims.num_params);
  EXPECT_ERROR_WITH(load([&](std::string& g) { replace_once(g, np, "\"num_params\": \"2\""); }),
                    where.c_str(), "launch[0].num_params is not an integer");
  std::string block = "\"block\": [" + std::to_string(dims.block[0]) + ",";
  EXPECT_ERROR_WITH(load([&](std::string& g) { replace_once(g, block, "\"block\": ["); }),
                    where.c_str(), "launch[0].block does not have 3 dimensions");
  EXPECT_ERROR_WITH(load([&](std::string& g) { replace_once(g, block, "\"block\": [0,"); }),
                    where.c_str(), "launch[0].block holds a dimension that is not a positive");
  EXPECT_ERROR_WITH(load([&](std::string& g) { replace_once(g, block, "\"block\": [4096,"); }),
                    where.c_str(), "launch[0].block has more than 1024 threads");
  EXPECT_ERROR_WITH(load([&](std::string& g) { replace_once(g, np, "\"num_params\": 99"); }),
                    where.c_str(), ".args do not match the 99 parameters");
  EXPECT_ERROR_WITH(load([&](std::string& g) { replace_once(g, "\"arch\": \"sm_90\",", ""); }),
                    where.c_str(), "graph.arch is missing");
  EXPECT_ERROR_WITH(load([&](std::string& g) { replace_once(g, "\"sm_90\"", "90"); }),
                    where.c_str(), "graph.arch is not a string");
  EXPECT_ERROR_WITH(load([&](std::string& g) { replace_once(g, "\"sm_90\"", "\"gfx90a\""); }),
                    where.c_str(), "graph.arch is 'gfx90a', not a GPU architecture");
  EXPECT_ERROR_WITH(load([&](std::string& g) { replace_once(g, "\"launch\": [", "\"lunch\": ["); }),
                    where.c_str(), "graph.launch is missing");
  EXPECT_ERROR_WITH(load([&](std::string& g) {
                      replace_once(g, "{\"func\": \"" + func + "\", \"grid\"",
                                   "{\"func\": \"other\", \"grid\"");
                    }),
                    where.c_str(), "has no entry in graph.launch");
  EXPECT_ERROR_WITH(load([&](std::string& g) {
                      replace_once(g, "\"symbol\": \"" + dims.symbol + "\"",
                                   "\"symbol\": \"nowhere\"");
                    }),
                    where.c_str(), "PTX entry 'nowhere', which its PTX does not define");
  std::remove(bad.c_str());
}

}  // namespace
}  // namespace ember
