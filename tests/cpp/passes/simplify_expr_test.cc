// SimplifyExpr: before/expected structural tests for each rule, its names and pattern
// marks, and the cases that must be left alone (broadcasts, +0.0, non-inverse shuffles).
#include "ember/passes/simplify_expr.h"

#include <gtest/gtest.h>

#include "ember/ir/op.h"

namespace ember::passes {
namespace {

using namespace ir;

Expr f32(const std::string& name, std::vector<int64_t> shape) {
  return var(name, TensorType{std::move(shape), DType::Float32});
}

Expr scalar(float v) {
  runtime::NDArray t = runtime::NDArray::empty({}, DType::Float32);
  *t.data_as<float>() = v;
  return constant(t, "c");
}

Attrs pattern(const std::string& p, Attrs a = {}) { return a.with("fusion_pattern", p); }

void expect_equal(const Function& got, const Function& want) {
  EXPECT_TRUE(structural_equal(got, want)) << "got:\n"
                                           << to_string(Expr(got)) << "want:\n"
                                           << to_string(Expr(want));
}

TEST(SimplifyExpr, ReluReluBecomesOneReluWithBothNames) {
  Expr x = f32("x", {2, 8});
  Expr y = call("nn.relu", {call("nn.relu", {x}, {}, "r1")}, {}, "r2");
  Function got = simplify_expr(function({x}, y));
  expect_equal(got, function({x}, call("nn.relu", {x}, pattern("ReLU -> ReLU"))));
  EXPECT_EQ(got->body->name, "r1 + r2");
}

TEST(SimplifyExpr, IdentityScalesAreErased) {
  Expr x = f32("x", {2, 8});
  Expr e = call("exp", {x}, {}, "e");
  Expr y = call("subtract",
                {call("divide", {call("multiply", {scalar(1), e}), scalar(1)}), scalar(0.0f)});
  y = call("power", {call("add", {y, scalar(-0.0f)}), scalar(1)});
  Function got = simplify_expr(function({x}, y));
  expect_equal(got, function({x}, call("exp", {x}, pattern("identity scale erased"))));
}

TEST(SimplifyExpr, BroadcastsAndPlusZeroAreNotIdentities) {
  Expr x = f32("x", {4, 1});
  runtime::NDArray ones = runtime::NDArray::empty({1, 3}, DType::Float32);
  for (int i = 0; i < 3; ++i) ones.data_as<float>()[i] = 1.0f;
  Function grow = function({x}, call("multiply", {x, constant(ones)}));
  expect_equal(simplify_expr(grow), grow);
  Function plus_zero = function({x}, call("add", {x, scalar(0.0f)}));  // -0.0 + 0.0 = +0.0
  expect_equal(simplify_expr(plus_zero), plus_zero);
  Function minus_neg_zero = function({x}, call("subtract", {x, scalar(-0.0f)}));
  expect_equal(simplify_expr(minus_neg_zero), minus_neg_zero);
}

TEST(SimplifyExpr, TransposePairsMergeOrVanish) {
  Expr x = f32("x", {2, 3, 4});
  Expr r = call("nn.relu", {x}, {}, "relu");
  Expr t1 = call("transpose", {r}, Attrs({{"axes", std::vector<int64_t>{0, 2, 1}}}), "t1");
  Function inverse = function(
      {x}, call("transpose", {t1}, Attrs({{"axes", std::vector<int64_t>{0, 2, 1}}}), "t2"));
  Function got = simplify_expr(inverse);
  expect_equal(got, function({x}, call("nn.relu", {x}, pattern("shuffle -> shuffle"))));
  EXPECT_EQ(got->body->name, "relu + t2");

  Function pair = function(
      {x}, call("transpose", {t1}, Attrs({{"axes", std::vector<int64_t>{2, 0, 1}}}), "t2"));
  // out[k] = in[p1[p2[k]]]: p1 = [0, 2, 1], p2 = [2, 0, 1] -> [1, 0, 2].
  Expr want = call("transpose", {r},
                   pattern("shuffle -> shuffle", Attrs({{"axes", std::vector<int64_t>{1, 0, 2}}})));
  got = simplify_expr(pair);
  expect_equal(got, function({x}, want));
  EXPECT_EQ(got->body->name, "t1 + t2");
}

TEST(SimplifyExpr, ReshapeChainsMergeAndIdentityChainsVanish) {
  Expr x = f32("x", {2, 3, 4});
  Expr r1 = call("reshape", {x}, Attrs({{"newshape", std::vector<int64_t>{6, 4}}}), "a");
  Expr r2 = call("flatten", {r1}, Attrs({{"start_dim", int64_t{0}}}), "b");
  Function merged = simplify_expr(function({x}, r2));
  expect_equal(merged,
               function({x}, call("reshape", {x},
                                  pattern("shuffle -> shuffle",
                                          Attrs({{"newshape", std::vector<int64_t>{24}}})))));
  // reshape -> transpose of a size-1 axis -> reshape back: the identity.
  Expr a = call("reshape", {x}, Attrs({{"newshape", std::vector<int64_t>{2, 3, 4, 1}}}));
  Expr b = call("transpose", {a}, Attrs({{"axes", std::vector<int64_t>{0, 1, 3, 2}}}));
  Expr c = call("reshape", {b}, Attrs({{"newshape", std::vector<int64_t>{2, 3, 4}}}));
  Function chain = function({x}, call("exp", {c}));
  expect_equal(simplify_expr(chain), function({x}, call("exp", {x})));
  // A real transpose between the reshapes is not an identity.
  Expr d = call("transpose", {x}, Attrs({{"axes", std::vector<int64_t>{0, 2, 1}}}));
  Function real =
      function({x}, call("reshape", {d}, Attrs({{"newshape", std::vector<int64_t>{2, 3, 4}}})));
  expect_equal(simplify_expr(real), real);
}

TEST(SimplifyExpr, ReduceOfTransposeReducesThePermutedAxes) {
  Expr x = f32("x", {2, 16, 8});
  Expr t = call("transpose", {x}, Attrs({{"axes", std::vector<int64_t>{0, 2, 1}}}), "t");
  Function f = function({x}, call("sum", {t}, Attrs({{"axis", std::vector<int64_t>{1}}}), "s"));
  Expr want =
      call("sum", {x}, pattern("shuffle -> reduce", Attrs({{"axis", std::vector<int64_t>{2}}})));
  Function got = simplify_expr(f);
  expect_equal(got, function({x}, want));
  EXPECT_EQ(got->body->name, "t + s");
  // Kept axes would come out swapped: left alone.
  Expr t2 = call("transpose", {x}, Attrs({{"axes", std::vector<int64_t>{2, 1, 0}}}));
  Function g = function({x}, call("sum", {t2}, Attrs({{"axis", std::vector<int64_t>{1}}})));
  expect_equal(simplify_expr(g), g);
}

TEST(SimplifyExpr, MeanOverHWWithKeepdimsIsAGlobalPool) {
  Expr x = f32("x", {1, 8, 5, 5});
  Attrs hw({{"axis", std::vector<int64_t>{2, 3}}, {"keepdims", int64_t{1}}});
  Function got = simplify_expr(function({x}, call("mean", {x}, hw, "gap")));
  Expr want = call("nn.adaptive_avg_pool2d", {x},
                   pattern("average-reduce -> global average pool",
                           Attrs({{"output_size", std::vector<int64_t>{1, 1}}})));
  expect_equal(got, function({x}, want));
  Function flat = function({x}, call("mean", {x}, Attrs({{"axis", std::vector<int64_t>{2, 3}}})));
  expect_equal(simplify_expr(flat), flat);
  Function over_c = function(
      {x},
      call("mean", {x}, Attrs({{"axis", std::vector<int64_t>{1, 2}}, {"keepdims", int64_t{1}}})));
  expect_equal(simplify_expr(over_c), over_c);
}

}  // namespace
}  // namespace ember::passes
