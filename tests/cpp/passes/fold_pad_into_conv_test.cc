// FoldPadIntoConv: before/expected structural tests; crops, non-zero values, pads on N/C
// and pools whose semantics differ are left alone.
#include "ember/passes/fold_pad_into_conv.h"

#include <gtest/gtest.h>

#include <limits>

#include "ember/ir/op.h"

namespace ember::passes {
namespace {

using namespace ir;

Expr pad(const Expr& x, std::vector<int64_t> w, double value = 0.0) {
  return call(
      "nn.pad", {x},
      Attrs({{"pad_width", w}, {"pad_value", value}, {"pad_mode", std::string("constant")}}),
      "pad");
}

Expr weight() { return var("w", TensorType{{8, 4, 3, 3}, DType::Float32}); }

TEST(FoldPadIntoConv, ZeroPadOnHWFoldsIntoConvPadding) {
  Expr x = var("x", TensorType{{1, 4, 9, 9}, DType::Float32}), w = weight();
  Attrs conv_attrs({{"padding", std::vector<int64_t>{1, 1, 1, 1}}});
  Function f = function(
      {x, w}, call("nn.conv2d", {pad(x, {0, 0, 0, 0, 1, 2, 0, 3}), w}, conv_attrs, "conv"));
  Function got = fold_pad_into_conv(f);
  Attrs want_attrs({{"padding", std::vector<int64_t>{2, 1, 3, 4}},
                    {"fusion_pattern", std::string("Padding + Convolution")}});
  Function want = function({x, w}, call("nn.conv2d", {x, w}, want_attrs));
  EXPECT_TRUE(structural_equal(got, want)) << to_string(Expr(got));
  EXPECT_EQ(got->body->name, "pad + conv");
}

TEST(FoldPadIntoConv, CropsValuesAndChannelPadsAreLeftAlone) {
  Expr x = var("x", TensorType{{1, 4, 9, 9}, DType::Float32}), w = weight();
  for (auto p : {pad(x, {0, 0, 0, 0, -1, -1, 0, 0}), pad(x, {0, 0, 0, 0, 1, 1, 1, 1}, 1.0)}) {
    Function f = function({x, w}, call("nn.conv2d", {p, w}));
    EXPECT_TRUE(structural_equal(fold_pad_into_conv(f), f));
  }
  Expr w5 = var("w", TensorType{{8, 5, 3, 3}, DType::Float32});
  Function c = function({x, w5}, call("nn.conv2d", {pad(x, {0, 0, 0, 1, 0, 0, 0, 0}), w5}));
  EXPECT_TRUE(structural_equal(fold_pad_into_conv(c), c));
}

TEST(FoldPadIntoConv, PoolsFoldOnlyWhenTheirPaddingMeansTheSame) {
  Expr x = var("x", TensorType{{1, 4, 8, 8}, DType::Float32});
  Attrs pool({{"pool_size", std::vector<int64_t>{3, 3}}});
  double inf = std::numeric_limits<double>::infinity();
  Function mx =
      function({x}, call("nn.max_pool2d", {pad(x, {0, 0, 0, 0, 1, 1, 1, 1}, -inf)}, pool));
  Function want =
      function({x}, call("nn.max_pool2d", {x},
                         pool.with("padding", std::vector<int64_t>{1, 1, 1, 1})
                             .with("fusion_pattern", std::string("Padding + Pooling"))));
  EXPECT_TRUE(structural_equal(fold_pad_into_conv(mx), want));
  // Zero padding before a max pool is not the pool's -inf padding.
  Function mx0 = function({x}, call("nn.max_pool2d", {pad(x, {0, 0, 0, 0, 1, 1, 1, 1})}, pool));
  EXPECT_TRUE(structural_equal(fold_pad_into_conv(mx0), mx0));
  // An average that does not count padding would divide by fewer elements.
  Function avg = function({x}, call("nn.avg_pool2d", {pad(x, {0, 0, 0, 0, 1, 1, 1, 1})},
                                    pool.with("count_include_pad", int64_t{0})));
  EXPECT_TRUE(structural_equal(fold_pad_into_conv(avg), avg));
  // More padding than the window allows stays a pad.
  Function big = function({x}, call("nn.avg_pool2d", {pad(x, {0, 0, 0, 0, 3, 3, 0, 0})}, pool));
  EXPECT_TRUE(structural_equal(fold_pad_into_conv(big), big));
}

}  // namespace
}  // namespace ember::passes
