// BatchSharedDense: before/expected structural tests (independent calls sharing a constant
// weight become one dense over their concatenated rows; a recurrence, distinct weights and
// a lone call are left alone) and numerics before/after.
#include "ember/passes/batch_shared_dense.h"

#include <gtest/gtest.h>

#include "ember/ir/op.h"
#include "pass_test_util.h"

namespace ember::passes {
namespace {

using namespace ir;
using testing::expect_same_outputs;
using testing::f32;
using testing::normal_tensor;

Expr weight(unsigned seed) { return constant(normal_tensor({6, 4}, seed), "w"); }

Expr dense(const Expr& x, const Expr& w, const std::string& name) {
  return call("nn.dense", {x, w}, {}, name);
}

int count_op(const Function& f, const std::string& op) {
  int n = 0;
  for (const Expr& e : post_order(f->body))
    if (auto* c = as<CallNode>(e); c && c->op && c->op->name == op) ++n;
  return n;
}

TEST(BatchSharedDense, IndependentCallsSharingAWeightBecomeOneDense) {
  Expr a = f32("a", {1, 4}), b = f32("b", {3, 4}), w = weight(1);
  Function f = function({a, b}, tuple({dense(a, w, "d1"), dense(b, w, "d2")}));
  Function got = batch_shared_dense(f);
  Expr rows = call("concatenate", {a, b}, Attrs().with("axis", int64_t{0}));
  Expr d = dense(rows, w, "d1 + d2");
  auto slice = [&](int64_t begin, int64_t end) {
    return call(
        "strided_slice", {d},
        Attrs().with("begin", std::vector<int64_t>{begin}).with("end", std::vector<int64_t>{end}));
  };
  Function want = function({a, b}, tuple({slice(0, 1), slice(1, 4)}));
  EXPECT_TRUE(structural_equal(got, want)) << to_string(Expr(got));
  EXPECT_EQ(count_op(got, "nn.dense"), 1);
  expect_same_outputs(f, got);
}

TEST(BatchSharedDense, ARecurrenceKeepsItsStateProjections) {
  // h1 = tanh(x0 W + h0 U), h2 = tanh(x1 W + h1 U): the input projections batch, the state
  // projections (h1 U reads h0 U) do not.
  Expr x0 = f32("x0", {1, 4}), x1 = f32("x1", {1, 4}), h0 = f32("h0", {1, 6});
  Expr w = weight(2), u = constant(normal_tensor({6, 6}, 3), "u");
  Expr h1 = call("tanh", {call("add", {dense(x0, w, "x0w"), dense(h0, u, "h0u")})});
  Expr h2 = call("tanh", {call("add", {dense(x1, w, "x1w"), dense(h1, u, "h1u")})});
  Function f = function({x0, x1, h0}, h2);
  Function got = batch_shared_dense(f);
  EXPECT_EQ(count_op(got, "nn.dense"), 3);  // x0w + x1w, h0u, h1u
  EXPECT_EQ(count_op(got, "concatenate"), 1);
  expect_same_outputs(f, got);
}

TEST(BatchSharedDense, OnlyCallsThatReadNoneOfTheGroupJoin) {
  // d2 reads d1, so it stays; d1 and d3 batch.
  Expr a = f32("a", {2, 4}), c = f32("c", {1, 4}), w = weight(4);
  Expr d1 = dense(a, w, "d1");
  Expr d2 = dense(call("strided_slice", {d1},
                       Attrs()
                           .with("begin", std::vector<int64_t>{0, 0})
                           .with("end", std::vector<int64_t>{2, 4})),
                  w, "d2");
  Function f = function({a, c}, tuple({d2, dense(c, w, "d3")}));
  Function got = batch_shared_dense(f);
  EXPECT_EQ(count_op(got, "nn.dense"), 2);
  EXPECT_EQ(count_op(got, "concatenate"), 1);
  expect_same_outputs(f, got);
}

TEST(BatchSharedDense, DistinctWeightsLoneCallsAndInputWeightsAreLeftAlone) {
  Expr a = f32("a", {1, 4}), b = f32("b", {1, 4}), wv = f32("wv", {6, 4}), w = weight(8);
  for (const Function& f :
       {function({a, b}, tuple({dense(a, weight(5), "d1"), dense(b, weight(6), "d2")})),
        function({a}, dense(a, weight(7), "d")),
        // Two calls on one input compute the same rows: nothing to batch.
        function({a}, tuple({dense(a, w, "d1"), call("nn.relu", {dense(a, w, "d2")})})),
        function({a, b, wv}, tuple({dense(a, wv, "d1"), dense(b, wv, "d2")}))})
    EXPECT_TRUE(structural_equal(batch_shared_dense(f), f)) << to_string(Expr(f));
}

}  // namespace
}  // namespace ember::passes
