// FoldScaleAxis: before/expected structural tests, graphs that must stay unchanged, and
// numerical checks (the graph before and after gives the same outputs, compiled with
// ember::build and run by the GraphExecutor, within 1e-5). The last tests run the whole
// BatchNorm folding chain: SimplifyInference, FoldConstant, FoldScaleAxis, FoldConstant.
#include "ember/passes/fold_scale_axis.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ember/codegen/build.h"
#include "ember/ir/op.h"
#include "ember/passes/fold_constant.h"
#include "ember/passes/simplify_inference.h"
#include "ember/runtime/graph_executor.h"
#include "pass_test_util.h"

namespace ember::passes {
namespace {

using namespace ir;
using runtime::NDArray;
using namespace testing;

Expr weight(const std::vector<int64_t>& shape, unsigned seed, const std::string& name) {
  return constant(random_tensor(shape, -1.0f, 1.0f, seed), name);
}

// FoldConstant's evaluator, as the build driver provides it: build and run.
const ConstEvaluator kEvaluate = [](const Function& f) { return run(f); };

std::string str(const Function& f) { return to_string(Expr(f)); }

// Op names of the calls in `f`, producers first.
std::vector<std::string> ops_of(const Function& f) {
  std::vector<std::string> ops;
  for (auto& e : post_order(f->body))
    if (auto* c = as<CallNode>(e)) ops.push_back(c->op->name);
  return ops;
}

Attrs conv_attrs(int64_t groups = 1) {
  return Attrs({{"padding", std::vector<int64_t>{1}}, {"groups", groups}});
}

Expr reshape(const Expr& e, std::vector<int64_t> shape) {
  return call("reshape", {e}, Attrs({{"newshape", shape}}));
}

// conv(x, w) * s with s [C, 1, 1] folds to conv(x, w * s[C, 1, 1, 1]); `groups` 1, 2 and C.
void check_conv_fold(int64_t groups, bool scale_first) {
  const int64_t c_in = 4, c_out = 4;
  Expr x = f32("x", {1, c_in, 6, 6});
  Expr w = weight({c_out, c_in / groups, 3, 3}, 1, "conv1.weight");
  Expr s = constant(random_tensor({c_out, 1, 1}, 0.5f, 2.0f, 2), "bn1");
  Expr conv = call("nn.conv2d", {x, w}, conv_attrs(groups), "conv1");
  Expr mul = scale_first ? call("multiply", {s, conv}) : call("multiply", {conv, s});
  Function before = function({x}, call("nn.relu", {mul}, {}, "relu"));
  Function after = fold_scale_axis(before);

  Expr new_w = call("multiply", {w, reshape(s, {c_out, 1, 1, 1})});
  Expr expected = call("nn.relu", {call("nn.conv2d", {x, new_w}, conv_attrs(groups))});
  EXPECT_TRUE(structural_equal(after, function({x}, expected))) << str(after);
  auto* new_conv = as<CallNode>(as<CallNode>(after->body)->args[0]);
  ASSERT_NE(new_conv, nullptr);
  EXPECT_EQ(new_conv->name, "conv1 + bn1");
  expect_same_outputs(before, after);
}

TEST(FoldScaleAxis, ConvScaleFoldsIntoWeight) { check_conv_fold(1, false); }
TEST(FoldScaleAxis, ScaleAsFirstOperand) { check_conv_fold(1, true); }
TEST(FoldScaleAxis, GroupedConv) { check_conv_fold(2, false); }
TEST(FoldScaleAxis, DepthwiseConv) { check_conv_fold(4, false); }

TEST(FoldScaleAxis, DenseScaleAlongOutputFeatures) {
  Expr x = f32("x", {3, 5});
  Expr w = weight({4, 5}, 3, "fc.weight");
  Expr s = constant(random_tensor({4}, 0.5f, 2.0f, 4), "scale");
  Function before = function({x}, call("multiply", {call("nn.dense", {x, w}, {}, "fc"), s}));
  Function after = fold_scale_axis(before);
  Expr expected = call("nn.dense", {x, call("multiply", {w, reshape(s, {4, 1})})});
  EXPECT_TRUE(structural_equal(after, function({x}, expected))) << str(after);
  EXPECT_EQ(after->body->name, "fc + scale");
  expect_same_outputs(before, after);
}

TEST(FoldScaleAxis, BiasAddIsScaledWithTheConv) {
  Expr x = f32("x", {2, 3, 5, 5});
  Expr w = weight({4, 3, 3, 3}, 5, "conv.weight");
  Expr b = weight({4}, 6, "conv.bias");
  Expr s = constant(random_tensor({4, 1, 1}, 0.5f, 2.0f, 7), "bn");
  Expr conv = call("nn.conv2d", {x, w}, conv_attrs(), "conv");
  Expr biased = call("nn.bias_add", {conv, b}, {}, "conv.bias_add");
  Function before = function({x}, call("multiply", {biased, s}));
  Function after = fold_scale_axis(before);
  Expr new_conv =
      call("nn.conv2d", {x, call("multiply", {w, reshape(s, {4, 1, 1, 1})})}, conv_attrs());
  Expr expected = call("nn.bias_add", {new_conv, call("multiply", {b, reshape(s, {4})})});
  EXPECT_TRUE(structural_equal(after, function({x}, expected))) << str(after);
  expect_same_outputs(before, after);
}

TEST(FoldScaleAxis, ChainedScalesAndABiasOnEitherSide) {
  Expr x = f32("x", {1, 2, 4, 4});
  Expr w = weight({3, 2, 3, 3}, 22, "w");
  Expr b = weight({3, 1, 1}, 23, "b");
  auto scale = [](unsigned seed, const std::string& name) {
    return constant(random_tensor({3, 1, 1}, 0.5f, 2.0f, seed), name);
  };
  Expr conv = call("nn.conv2d", {x, w}, conv_attrs(), "conv");
  Expr once = call("multiply", {call("add", {b, conv}), scale(24, "s1")});
  Function before = function({x}, call("multiply", {scale(25, "s2"), once}));
  Function after = fold_scale_axis(before);
  // add(b * s1 * s2, conv(x, w * s1 * s2)): no multiply reads the conv's output any more.
  auto* add = as<CallNode>(after->body);
  ASSERT_TRUE(add && add->op->name == "add") << str(after);
  auto* new_conv = as<CallNode>(add->args[1]);
  ASSERT_TRUE(new_conv && new_conv->op->name == "nn.conv2d") << str(after);
  EXPECT_EQ(new_conv->name, "conv + s1 + s2");
  expect_same_outputs(before, after);
}

TEST(FoldScaleAxis, ScalarScaleFolds) {
  Expr x = f32("x", {1, 2, 4, 4});
  Expr w = weight({3, 2, 3, 3}, 8, "w");
  Expr s = constant(random_tensor({1}, 0.5f, 2.0f, 9), "s");
  Function before = function({x}, call("multiply", {call("nn.conv2d", {x, w}, conv_attrs()), s}));
  Function after = fold_scale_axis(before);
  EXPECT_EQ(ops_of(after), (std::vector<std::string>{"reshape", "multiply", "nn.conv2d"}));
  expect_same_outputs(before, after);
}

// Each of these must come back unchanged.
void expect_unchanged(const Function& before) {
  Function after = fold_scale_axis(before);
  EXPECT_TRUE(after == before) << str(after);
  EXPECT_TRUE(structural_equal(after, before));
}

struct ConvGraph {
  Expr x = f32("x", {1, 3, 5, 5});
  Expr conv = call("nn.conv2d", {x, weight({3, 3, 3, 3}, 10, "w")}, conv_attrs(), "conv");
  Function scaled_by(const Expr& s) { return function({x}, call("multiply", {conv, s})); }
};

TEST(FoldScaleAxis, ScaleAlongHeightIsLeftAlone) {
  ConvGraph g;
  expect_unchanged(g.scaled_by(constant(random_tensor({5, 1}, 1, 2, 11), "s")));
  expect_unchanged(g.scaled_by(constant(random_tensor({3, 5, 1}, 1, 2, 11), "s")));
}

TEST(FoldScaleAxis, FullShapeScaleIsLeftAlone) {
  ConvGraph g;
  expect_unchanged(g.scaled_by(constant(random_tensor({1, 3, 5, 5}, 1, 2, 12), "s")));
}

TEST(FoldScaleAxis, ScaleOnTheWrongAxisIsLeftAlone) {
  // A [3] scale of a [1, 3, 3, 3] output aligns with W, not with the channels.
  Expr x = f32("x", {1, 3, 3, 3});
  Expr conv = call("nn.conv2d", {x, weight({3, 3, 3, 3}, 13, "w")}, conv_attrs(), "conv");
  expect_unchanged(function({x}, call("multiply", {conv, constant(random_tensor({3}, 1, 2, 14))})));
  ConvGraph g;
  expect_unchanged(g.scaled_by(constant(random_tensor({1, 1, 1, 5}, 1, 2, 15), "s")));
  // Dense: a scale per row of the batch, not per output feature.
  Expr y = f32("y", {2, 5});
  Expr dense = call("nn.dense", {y, weight({4, 5}, 16, "fc")});
  expect_unchanged(
      function({y}, call("multiply", {dense, constant(random_tensor({2, 1}, 1, 2, 17))})));
}

TEST(FoldScaleAxis, NonConstantScaleIsLeftAlone) {
  ConvGraph g;
  Expr s = f32("s", {3, 1, 1});
  expect_unchanged(function({g.x, s}, call("multiply", {g.conv, s})));
}

TEST(FoldScaleAxis, ConvWithTwoUsersIsLeftAlone) {
  ConvGraph g;
  Expr mul = call("multiply", {g.conv, constant(random_tensor({3, 1, 1}, 1, 2, 18), "s")});
  expect_unchanged(function({g.x}, tuple({mul, g.conv})));
  // A bias add read twice cannot absorb the scale either.
  Expr biased = call("nn.bias_add", {g.conv, weight({3}, 19, "b")});
  Expr mul2 = call("multiply", {biased, constant(random_tensor({3, 1, 1}, 1, 2, 20), "s")});
  expect_unchanged(function({g.x}, tuple({mul2, biased})));
}

// conv -> batch_norm after SimplifyInference, FoldConstant, FoldScaleAxis, FoldConstant is
// one conv with new constant weights and an add of a constant bias.
Function fold_batch_norm(const Function& f) {
  Function g = simplify_inference(f);
  g = fold_constant(g, kEvaluate);
  g = fold_scale_axis(g);
  return fold_constant(g, kEvaluate);
}

Expr batch_norm(const Expr& x, int64_t c, unsigned seed, const std::string& name) {
  return call("nn.batch_norm",
              {x, constant(random_tensor({c}, 0.5f, 1.5f, seed), name + ".weight"),
               constant(random_tensor({c}, -0.5f, 0.5f, seed + 1), name + ".bias"),
               constant(random_tensor({c}, -0.5f, 0.5f, seed + 2), name + ".running_mean"),
               constant(random_tensor({c}, 0.5f, 2.0f, seed + 3), name + ".running_var")},
              Attrs({{"epsilon", 1e-5}}), name);
}

void check_conv_batch_norm(int64_t groups) {
  Expr x = f32("x", {2, 4, 7, 7});
  Expr w = weight({6, 4 / groups, 3, 3}, 21, "conv1.weight");
  Expr conv = call("nn.conv2d", {x, w}, conv_attrs(groups), "conv1");
  Function before = function({x}, call("nn.relu", {batch_norm(conv, 6, 30, "bn1")}, {}, "relu"));
  Function after = fold_batch_norm(before);
  ASSERT_EQ(ops_of(after), (std::vector<std::string>{"nn.conv2d", "add", "nn.relu"})) << str(after);
  auto* add = as<CallNode>(as<CallNode>(after->body)->args[0]);
  auto* new_conv = as<CallNode>(add->args[0]);
  ASSERT_NE(new_conv, nullptr);
  EXPECT_EQ(new_conv->args[0], x);
  EXPECT_EQ(new_conv->args[1]->kind, NodeKind::Constant);
  EXPECT_EQ(add->args[1]->kind, NodeKind::Constant);
  EXPECT_EQ(add->args[1]->type.tensor().shape, (std::vector<int64_t>{6, 1, 1}));
  EXPECT_EQ(new_conv->name, "conv1 + bn1");
  EXPECT_EQ(add->name, "bn1");
  expect_same_outputs(before, after);
}

TEST(FoldScaleAxis, ConvBatchNormEndsAsOneConvAndABiasAdd) { check_conv_batch_norm(1); }
TEST(FoldScaleAxis, GroupedConvBatchNorm) { check_conv_batch_norm(2); }

TEST(FoldScaleAxis, BatchNormAfterAConvWithTwoUsersStaysAScaleAndShift) {
  Expr x = f32("x", {1, 3, 5, 5});
  Expr conv = call("nn.conv2d", {x, weight({3, 3, 3, 3}, 40, "w")}, conv_attrs(), "conv");
  Function before = function({x}, tuple({batch_norm(conv, 3, 41, "bn"), conv}));
  Function after = fold_batch_norm(before);
  EXPECT_EQ(ops_of(after), (std::vector<std::string>{"nn.conv2d", "multiply", "add"}))
      << str(after);
  expect_same_outputs(before, after);
}

}  // namespace
}  // namespace ember::passes
