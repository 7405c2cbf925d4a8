// Model files that must not be trusted blindly: the code's kernel manifest against the graph,
// every recorded CPU feature checked (with the runtime's cpuid table, which must agree with
// LLVM's host detection), SHA-256 pinning, and reading without loading the code.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "../expect_error.h"
#include "ember/codegen/build.h"
#include "ember/runtime/artifact.h"
#include "ember/runtime/cpu_features.h"
#include "ember/runtime/manifest.h"
#include "ember/support/error.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/Host.h"

namespace ember {
namespace {

using runtime::Artifact;

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "ember_model_file_test_" + name;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// relu(x + w) for x (4, 8): one kernel with a parameter.
std::string exported_model() {
  static const std::string path = [] {
    ir::Expr x = ir::var("x", ir::TensorType{{4, 8}, DType::Float32});
    runtime::NDArray w = runtime::NDArray::zeros({8}, DType::Float32);
    auto lib =
        build(ir::function({x}, ir::call("nn.relu", {ir::call("add", {x, ir::constant(w, "w")})})));
    std::string p = temp_path("model.ember");
    lib->export_library(p);
    return p;
  }();
  return path;
}

// The exported model with `change` applied, written back with valid checksums.
template <class F>
std::string changed_model(const std::string& name, F change) {
  Artifact a = runtime::read_artifact(exported_model());
  change(a);
  std::string path = temp_path(name);
  runtime::save_artifact(a, path);
  return path;
}

TEST(CpuFeatures, TheRuntimeAgreesWithLlvmOnThisHost) {
  llvm::StringMap<bool> llvm_features = llvm::sys::getHostCPUFeatures();
  ASSERT_FALSE(llvm_features.empty());
  for (const auto& f : llvm_features) {
    std::string name = f.getKey().str();
    std::optional<bool> ours = runtime::host_has_cpu_feature(name);
    ASSERT_TRUE(ours.has_value()) << "the runtime cannot check '" << name << "'";
    EXPECT_EQ(*ours, f.getValue()) << name;
  }
  EXPECT_FALSE(runtime::host_has_cpu_feature("no-such-feature").has_value());
}

TEST(ModelFile, RecordsOnlyInstructionSetFeatures) {
  Artifact a = runtime::read_artifact(exported_model());
  llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
  std::stringstream features(a.info.features);
  int n = 0;
  for (std::string f; std::getline(features, f, ','); ++n) {
    ASSERT_EQ(f[0], '+') << a.info.features;
    EXPECT_TRUE(host.count(f.substr(1))) << f;
  }
  EXPECT_GT(n, 0);
}

TEST(ModelFile, EveryCpuFeatureIsChecked) {
  std::string lacking;
  for (const auto& f : llvm::sys::getHostCPUFeatures())
    if (!f.getValue()) lacking = f.getKey().str();
  if (lacking.empty()) GTEST_SKIP() << "this CPU has every feature LLVM knows";
  auto path =
      changed_model("lacking.ember", [&](Artifact& a) { a.info.features += ",+" + lacking; });
  EXPECT_ERROR_WITH(runtime::load_library(path), "this CPU lacks", lacking.c_str());
  path =
      changed_model("unknown.ember", [](Artifact& a) { a.info.features += ",+made-up-feature"; });
  EXPECT_ERROR_WITH(runtime::load_library(path), "made-up-feature", "cannot check");
  // Inspecting reads the file on any machine.
  runtime::LoadOptions inspect;
  inspect.load_code = false;
  EXPECT_EQ(runtime::load_library(path, inspect)->module, nullptr);
  std::remove(path.c_str());
}

TEST(ModelFile, AGraphThatDisagreesWithTheCodeIsRefused) {
  auto shrink_output = [](Artifact& a) {
    auto g = std::make_shared<runtime::ExecGraph>(*a.graph);
    g->values[g->outputs[0]].shape = {2, 8};  // the kernel writes (4, 8)
    a.graph = g;
  };
  std::string path = changed_model("shrunk.ember", shrink_output);
  EXPECT_ERROR_WITH(runtime::load_library(path), "inconsistent", "float32(4, 8)", "float32(2, 8)",
                    "export the model again");
  path = changed_model("renamed.ember", [](Artifact& a) {
    auto g = std::make_shared<runtime::ExecGraph>(*a.graph);
    g->kernels[0].func = "not_compiled";
    a.graph = g;
  });
  EXPECT_ERROR_WITH(runtime::load_library(path), "not_compiled", "does not have");
  path = changed_model("no_manifest.ember", [](Artifact& a) {
    std::string& code = a.code[0].second;
    code.replace(code.find(runtime::kManifestBegin), 5, "XXXXX");
  });
  EXPECT_ERROR_WITH(runtime::load_library(path), "no record");
  std::remove(path.c_str());
}

TEST(ModelFile, KernelManifestRoundTrips) {
  std::vector<runtime::KernelSignature> k = {{"f", {{{1, 8}, DType::Float32}, {{}, DType::Int64}}},
                                             {"g", {}}};
  for (std::string prefix : {"", "// "}) {
    std::string text = "junk\n" + runtime::write_kernel_manifest(k, prefix) + "more junk";
    auto back = runtime::read_kernel_manifest(text, prefix, "test");
    ASSERT_EQ(back.size(), 2u);
    EXPECT_EQ(back[0].func, "f");
    ASSERT_EQ(back[0].buffers.size(), 2u);
    EXPECT_EQ(back[0].buffers[0].shape, (runtime::Shape{1, 8}));
    EXPECT_EQ(back[0].buffers[1].shape, runtime::Shape{});
    EXPECT_EQ(back[0].buffers[1].dtype, DType::Int64);
    EXPECT_TRUE(back[1].buffers.empty());
  }
  std::string bad = runtime::write_kernel_manifest(k);
  bad.replace(bad.find("float32"), 7, "float99");
  EXPECT_ERROR_WITH(runtime::read_kernel_manifest(bad, "", "test"), "malformed");
}

TEST(ModelFile, Sha256PinsTheFile) {
  EXPECT_EQ(runtime::sha256_hex("", 0),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(runtime::sha256_hex("abc", 3),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(runtime::sha256_hex(two_blocks.data(), two_blocks.size()),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  std::string million(1000000, 'a');
  EXPECT_EQ(runtime::sha256_hex(million.data(), million.size()),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");

  const std::string path = exported_model(), bytes = read_bytes(path);
  runtime::LoadOptions pinned;
  pinned.sha256 = runtime::sha256_hex(bytes.data(), bytes.size());
  EXPECT_NE(runtime::load_library(path, pinned)->module, nullptr);
  pinned.sha256[0] = pinned.sha256[0] == '0' ? '1' : '0';
  EXPECT_ERROR_WITH(runtime::load_library(path, pinned), "SHA-256", "refusing");
  pinned.sha256 = "abc";
  EXPECT_ERROR_WITH(runtime::load_library(path, pinned), "64 hex digits");
}

}  // namespace
}  // namespace ember
