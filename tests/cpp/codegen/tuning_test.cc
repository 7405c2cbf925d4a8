// Schedule tuning support: workload keys, knob spaces, knob overrides (issue #13).
#include "ember/codegen/tuning.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "../expect_error.h"
#include "../passes/pass_test_util.h"
#include "ember/ir/op.h"
#include "ember/passes/lower.h"
#include "ember/passes/tuning.h"
#include "ember/runtime/graph_executor.h"

namespace ember {
namespace {

using namespace ir;
using runtime::NDArray;

NDArray random_tensor(std::vector<int64_t> shape, unsigned seed) {
  return passes::testing::normal_tensor(shape, seed);
}

// conv2d (3x3, padding 1) + relu as one fused group, named `name`.
Function conv_relu_group(int64_t c, int64_t k, int64_t hw, const std::string& name) {
  Expr x = var("x", TensorType{{1, c, hw, hw}, DType::Float32});
  Expr w = var("w", TensorType{{k, c, 3, 3}, DType::Float32});
  Expr y = call("nn.conv2d", {x, w}, Attrs({{"padding", std::vector<int64_t>{1, 1}}}), name);
  return function({x, w}, call("nn.relu", {y}, {}, name + ".relu"), name);
}

Function dense_group(int64_t m, int64_t n, int64_t k) {
  Expr a = var("a", TensorType{{m, k}, DType::Float32});
  Expr b = var("b", TensorType{{n, k}, DType::Float32});
  return function({a, b}, call("nn.dense", {a, b}, {}, "fc"), "fc");
}

// conv2d (3x3, padding 1) + relu + 3x3/2 max pooling: a two-anchor kernel.
Function conv_pool_group(int64_t c, int64_t k, int64_t hw) {
  Expr x = var("x", TensorType{{1, c, hw, hw}, DType::Float32});
  Expr w = var("w", TensorType{{k, c, 3, 3}, DType::Float32});
  Expr y = call("nn.conv2d", {x, w}, Attrs({{"padding", std::vector<int64_t>{1, 1}}}), "c");
  y = call("nn.max_pool2d", {call("nn.relu", {y}, {}, "r")},
           Attrs({{"pool_size", std::vector<int64_t>{3, 3}},
                  {"strides", std::vector<int64_t>{2, 2}},
                  {"padding", std::vector<int64_t>{1, 1}}}),
           "mp");
  return function({x, w}, y, "conv_pool");
}

// dense + residual add + layer norm: a GEMM computed in row blocks under a row statistic.
Function dense_norm_group(int64_t m, int64_t n, int64_t k) {
  Expr a = var("a", TensorType{{m, k}, DType::Float32});
  Expr b = var("b", TensorType{{n, k}, DType::Float32});
  Expr r = var("r", TensorType{{m, n}, DType::Float32});
  Expr g = var("g", TensorType{{n}, DType::Float32});
  Expr be = var("be", TensorType{{n}, DType::Float32});
  Expr y = call("add", {call("nn.dense", {a, b}, {}, "fc"), r}, {}, "add");
  return function({a, b, r, g, be}, call("nn.layer_norm", {y, g, be}, {}, "norm"), "fc_norm");
}

// A one-row dense on packed weight panels [n / 8, k, 8] + bias (ResNet-50's fc: a GEMV).
Function gemv_group(int64_t n, int64_t k) {
  Expr a = var("a", TensorType{{1, k}, DType::Float32});
  Expr w = var("w", TensorType{{(n + 7) / 8, k, 8}, DType::Float32});
  Expr bias = var("bias", TensorType{{n}, DType::Float32});
  Expr y = call("nn.dense_packed", {a, w}, Attrs({{"units", n}}), "fc");
  return function({a, w, bias}, call("nn.bias_add", {y, bias}, {}, "fc.bias"), "fc");
}

std::vector<Function> tunable_groups() {
  return {conv_relu_group(8, 16, 14, "c"), dense_group(5, 64, 32), conv_pool_group(8, 16, 12),
          dense_norm_group(16, 32, 24), gemv_group(200, 96)};
}

// The pinned machine model of a width: knob spaces the same on every host.
passes::MachineModel pinned(int bits) { return passes::MachineModel::for_vector_bits(bits); }

// Every knob of `space` set to a value other than the default's somewhere.
std::set<std::string> knobs_varied(const std::vector<passes::ScheduleKnobs>& space) {
  std::set<std::string> out;
  for (auto& k : space)
    for (auto& [name, field] : passes::ScheduleKnobs::fields)
      if (k.*field != space[0].*field) out.insert(name);
  return out;
}

std::vector<float> run(const Function& group, const passes::ScheduleKnobs& knobs) {
  auto lib = build_kernel(group, "llvm -vector-bits=256", knobs);
  runtime::GraphExecutor exec(lib->graph, lib->module);
  for (size_t i = 0; i < group->params.size(); ++i)
    exec.set_input(static_cast<int>(i),
                   random_tensor(group->params[i]->type.tensor().shape, 7 + unsigned(i)));
  exec.run();
  NDArray out = exec.get_output(0);
  return std::vector<float>(out.data_as<float>(), out.data_as<float>() + out.numel());
}

TEST(Tuning, WorkloadKeyIgnoresNamesNotShapes) {
  std::string a = passes::workload_key(conv_relu_group(8, 16, 14, "layer1.conv"));
  EXPECT_EQ(a, passes::workload_key(conv_relu_group(8, 16, 14, "layer2.conv")));
  EXPECT_NE(a, passes::workload_key(conv_relu_group(8, 16, 12, "layer1.conv")));
  EXPECT_NE(a, passes::workload_key(conv_relu_group(8, 32, 14, "layer1.conv")));
  EXPECT_EQ(a.rfind("nn.conv2d float32[1, 16, 14, 14] #", 0), 0u) << a;
}

TEST(Tuning, KnobSpaceStartsWithDefaultAndIsDistinct) {
  for (const Function& g : {conv_relu_group(8, 16, 14, "c"), dense_group(4, 64, 32)}) {
    auto space = passes::knob_space(g, pinned(256));
    ASSERT_GT(space.size(), 4u) << g->name;
    std::set<passes::ScheduleKnobs> seen(space.begin(), space.end());
    EXPECT_EQ(seen.size(), space.size());
    for (auto& k : space) {
      EXPECT_GE(k.tile_rows, 1);
      // Accumulators within the 16 ymm registers of a 256-bit machine.
      EXPECT_LE(k.tile_rows * k.tile_vectors, 16) << k.str();
    }
  }
}

TEST(Tuning, EachKernelKindHasItsKnobs) {
  using Names = std::set<std::string>;
  Names tile = {"tile_rows", "tile_vectors", "loop_order", "unroll"};
  EXPECT_EQ(knobs_varied(passes::knob_space(dense_group(5, 64, 32), pinned(256))), tile);
  // A row of 14 pixels is one vector (no tile_vectors); its block of output channels fits
  // the L1, so its reduction may run in chunks (k_chunk; one pass by default).
  EXPECT_EQ(knobs_varied(passes::knob_space(conv_relu_group(8, 16, 14, "c"), pinned(256))),
            (Names{"tile_rows", "loop_order", "unroll", "k_chunk"}));
  // The two-anchor kernel's register tile (rows only: its vectors are one row of the pooling)
  // and the unrolled reduction of its pooling window.
  EXPECT_EQ(knobs_varied(passes::knob_space(conv_pool_group(8, 16, 12), pinned(256))),
            (Names{"tile_rows", "unroll"}));
  Names norm = knobs_varied(passes::knob_space(dense_norm_group(16, 32, 24), pinned(256)));
  EXPECT_TRUE(norm.count("row_block") && norm.count("unroll") && norm.count("tile_rows"));
}

TEST(Tuning, DefaultKnobsGiveTheSameLoopIR) {
  passes::LowerOptions opts;
  opts.machine = pinned(256);
  for (const Function& g : tunable_groups()) {
    std::string plain = ir::to_string(passes::lower_group(g, "k", opts));
    // All zero (the schedule's choices), and the values it chose spelt out.
    EXPECT_EQ(ir::to_string(passes::lower_group(g, "k", opts, {})), plain) << g->name;
    auto space = passes::knob_space(g, pinned(256));
    EXPECT_EQ(ir::to_string(passes::lower_group(g, "k", opts, space[0])), plain) << g->name;
    // Every other setting changes the code (the space lists each schedule once).
    for (size_t i = 1; i < space.size(); i += std::max<size_t>(1, space.size() / 12))
      EXPECT_NE(ir::to_string(passes::lower_group(g, "k", opts, space[i])), plain)
          << g->name << " " << space[i].str();
  }
}

TEST(Tuning, DefaultKnobsGiveTheDefaultCodeAndOthersTheSameNumbers) {
  for (const Function& g : tunable_groups()) {
    auto space = passes::knob_space(g, pinned(256));
    std::vector<float> ref = run(g, {});
    EXPECT_EQ(run(g, space[0]), ref);  // the default, spelt out: bit-identical
    for (size_t i = 1; i < space.size(); i += std::max<size_t>(1, space.size() / 6)) {
      std::vector<float> got = run(g, space[i]);
      ASSERT_EQ(got.size(), ref.size());
      for (size_t j = 0; j < ref.size(); ++j)
        ASSERT_NEAR(got[j], ref[j], 1e-4 * (1 + std::fabs(ref[j]))) << space[i].str();
    }
  }
}

// A GEMV streams each weight once: what it can tune is how many panels a tile reads at once
// (any count, the last tile shifted back), how many independent partial sums each vector
// keeps, and the unrolled steps; each setting is another loop nest with the same numbers.
TEST(Tuning, GemvTunesItsColumnTileAndPartialSums) {
  Function fc = gemv_group(1000, 2048);  // ResNet-50's fc
  auto space = passes::knob_space(fc, pinned(256));
  EXPECT_GE(space.size(), 100u);
  EXPECT_EQ(knobs_varied(space), (std::set<std::string>{"tile_vectors", "unroll", "partial_sums"}));
  std::set<int64_t> vectors;
  for (auto& k : space) {
    vectors.insert(k.tile_vectors);
    EXPECT_LE(k.tile_vectors * k.partial_sums, 16) << k.str();
  }
  EXPECT_EQ(vectors, (std::set<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));  // not only 1 and 5

  Function g = gemv_group(200, 96);
  passes::LowerOptions opts;
  opts.machine = pinned(256);
  passes::ScheduleKnobs one, four;
  one.tile_vectors = four.tile_vectors = 3;  // 25 vectors: the last tile shifted back
  four.partial_sums = 4;
  four.unroll = 2;
  std::string a = ir::to_string(passes::lower_group(g, "k", opts, one));
  std::string b = ir::to_string(passes::lower_group(g, "k", opts, four));
  EXPECT_NE(a, b);
  EXPECT_EQ(a.find("partial"), std::string::npos) << a;
  EXPECT_NE(b.find("dense.partial"), std::string::npos) << b;
  std::vector<float> ref = run(g, {}), x = run(g, one), y = run(g, four);
  ASSERT_EQ(x.size(), ref.size());
  ASSERT_EQ(y.size(), ref.size());
  for (size_t j = 0; j < ref.size(); ++j) {
    EXPECT_EQ(x[j], ref[j]);                                    // the same sum in the same order
    EXPECT_NEAR(y[j], ref[j], 1e-4 * (1 + std::fabs(ref[j])));  // four sums, then added
  }
  passes::ScheduleKnobs bad;
  bad.partial_sums = 5;
  EXPECT_ERROR_WITH(build_kernel(g, "llvm -vector-bits=256", bad), "partial_sums=5",
                    "96 iterations");
  bad = {};
  bad.tile_vectors = 26;
  EXPECT_ERROR_WITH(build_kernel(g, "llvm -vector-bits=256", bad), "tile_vectors=26",
                    "does not fit in the 25 vectors");
  // A kernel with rows keeps its accumulators in rows: no partial sums there.
  EXPECT_EQ(
      knobs_varied(passes::knob_space(dense_group(5, 64, 32), pinned(256))).count("partial_sums"),
      0u);
}

// x * x summed over the middle axis of [rows, k, 4], kept as [rows, 1, 4]: each output
// row is one quarter-width vector whose sum over k is one dependent FMA chain unless it is
// split. (Without the unit axis, rows of the first axis form the register tile instead.)
Function middle_sum_group(int64_t rows, int64_t k) {
  Expr x = var("x", TensorType{{rows, k, 4}, DType::Float32});
  Expr sq = call("multiply", {x, x}, {}, "sq");
  Attrs a({{"axis", std::vector<int64_t>{1}}, {"keepdims", int64_t{1}}});
  return function({x}, call("sum", {sq}, a, "ss"), "ss");
}

// By default such a sum runs as independent partial sums, as many as the FMA pipeline
// holds (2 ports x 4 cycles), each at least 8 steps: the same count at both vector widths,
// so both widths add in the same order. The knob still overrides it.
TEST(Tuning, ASumOverAMiddleAxisRunsAsPartialSums) {
  passes::LowerOptions opts;
  for (int bits : {256, 512}) {
    opts.machine = pinned(bits);
    std::string ir = ir::to_string(passes::lower_group(middle_sum_group(6, 768), "k", opts));
    EXPECT_NE(ir.find("partial"), std::string::npos) << bits << "\n" << ir;
    EXPECT_EQ(passes::knob_space(middle_sum_group(6, 768), pinned(bits))[0].partial_sums, 8)
        << bits;
  }
  opts.machine = pinned(256);
  // 24 steps: 3 partial sums of 8 steps.
  EXPECT_EQ(passes::knob_space(middle_sum_group(6, 24), pinned(256))[0].partial_sums, 3);
  // Too short to split.
  EXPECT_EQ(passes::knob_space(middle_sum_group(6, 12), pinned(256))[0].partial_sums, 1);
  passes::ScheduleKnobs one;
  one.partial_sums = 1;
  std::string chain = ir::to_string(passes::lower_group(middle_sum_group(6, 768), "k", opts, one));
  EXPECT_EQ(chain.find("partial"), std::string::npos) << chain;
  std::vector<float> split = run(middle_sum_group(6, 768), {}),
                     single = run(middle_sum_group(6, 768), one);
  ASSERT_EQ(split.size(), 24u);
  ASSERT_EQ(single.size(), 24u);
  for (size_t j = 0; j < split.size(); ++j)
    EXPECT_NEAR(split[j], single[j], 1e-5 * single[j]) << j;  // ~768, all positive
  // A GEMV over many outputs keeps one chain per vector: its tile has vectors enough.
  EXPECT_EQ(passes::knob_space(gemv_group(200, 96), pinned(256))[0].partial_sums, 1);
}

// A GEMV whose outputs are one tile (a classifier head) has too few vectors to fill the FMA
// pipeline, so by default its reduction runs as partial sums too.
TEST(Tuning, AOneTileGemvRunsAsPartialSums) {
  for (int bits : {256, 512}) {
    EXPECT_GT(passes::knob_space(gemv_group(10, 2048), pinned(bits))[0].partial_sums, 1) << bits;
    EXPECT_EQ(passes::knob_space(gemv_group(8, 768), pinned(bits))[0].partial_sums, 8) << bits;
  }
  // The numbers: against a double-precision reference and the one-chain kernel.
  passes::ScheduleKnobs one;
  one.partial_sums = 1;
  const int64_t n = 10, k = 2048;
  std::vector<float> split = run(gemv_group(n, k), {}), chain = run(gemv_group(n, k), one);
  NDArray a = random_tensor({1, k}, 7), w = random_tensor({(n + 7) / 8, k, 8}, 8),
          bias = random_tensor({n}, 9);
  ASSERT_EQ(split.size(), size_t(n));
  for (int64_t j = 0; j < n; ++j) {
    double want = bias.data_as<float>()[j];
    for (int64_t i = 0; i < k; ++i)
      want += double(a.data_as<float>()[i]) * w.data_as<float>()[((j / 8) * k + i) * 8 + j % 8];
    EXPECT_NEAR(split[j], want, 1e-4 * std::sqrt(double(k))) << j;
    EXPECT_NEAR(split[j], chain[j], 1e-4 * std::sqrt(double(k))) << j;
  }
}

TEST(Tuning, KnobsOutOfRangeAreUserErrors) {
  Function g = dense_group(4, 64, 32);
  passes::ScheduleKnobs k;
  k.tile_rows = 99;
  EXPECT_ERROR_WITH(build_kernel(g, "llvm -vector-bits=256", k), "tile_rows=99", "1..4");
  k = {};
  k.tile_vectors = 3;
  EXPECT_ERROR_WITH(build_kernel(g, "llvm -vector-bits=256", k), "tile_vectors=3");
  k = {};
  k.unroll = 3;
  EXPECT_ERROR_WITH(build_kernel(g, "llvm -vector-bits=256", k), "unroll=3", "32 iterations");
  k = {};
  k.loop_order = 7;
  EXPECT_ERROR_WITH(build_kernel(conv_relu_group(8, 16, 14, "c"), "llvm -vector-bits=256", k),
                    "loop_order=7");
  k = {};
  k.row_block = 9;
  EXPECT_ERROR_WITH(build_kernel(dense_norm_group(16, 32, 24), "llvm -vector-bits=256", k),
                    "row_block=9", "16 rows");
  k.row_block = 16;
  EXPECT_ERROR_WITH(build_kernel(dense_norm_group(16, 32, 24), "llvm -vector-bits=256", k),
                    "row_block=16", "two or more blocks");
  k = {};
  k.tile_rows = 40;
  EXPECT_ERROR_WITH(build_kernel(conv_pool_group(8, 16, 12), "llvm -vector-bits=256", k),
                    "tile_rows=40");
}

TEST(Tuning, PassContextRejectsUnknownConfigKeys) {
  passes::PassContext ctx;
  ctx.config["tunning_log"] = "x.json";
  EXPECT_ERROR_WITH(ctx.validated(), "unknown PassContext config key 'tunning_log'", "tuning_log",
                    "FuseOps.max_depth");
}

}  // namespace
}  // namespace ember
