// FoldConstant: all-constant subgraphs become constants (evaluated by Ember's own compiler,
// as the build driver does it: ember::build, then the GraphExecutor), input-dependent
// subgraphs stay, names are joined with " + ", and the graph before and after gives the same
// outputs within 1e-5.
#include "ember/passes/fold_constant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ember/codegen/build.h"
#include "ember/ir/op.h"
#include "ember/runtime/graph_executor.h"
#include "pass_test_util.h"

namespace ember::passes {
namespace {

using namespace ir;
using runtime::NDArray;
using namespace testing;

std::string str(const Function& f) { return to_string(Expr(f)); }

// The build driver's evaluator; counts its calls (each is one compilation).
int g_evaluations = 0;
const ConstEvaluator kEvaluate = [](const Function& f) {
  ++g_evaluations;
  EXPECT_TRUE(f->params.empty());
  return run(f);
};

void expect_near(const NDArray& got, const std::vector<float>& want) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got.data_as<float>()[i], want[i], 1e-5) << "element " << i;
}

std::vector<float> values(const NDArray& t) {
  return std::vector<float>(t.data_as<float>(), t.data_as<float>() + t.numel());
}

const ConstantNode* constant_arg(const Expr& e, size_t i) {
  auto* c = as<CallNode>(e);
  return c ? as<ConstantNode>(c->args.at(i)) : nullptr;
}

TEST(FoldConstant, ChainOfConstantOpsBecomesOneConstant) {
  Expr x = f32("x", {2, 4});
  NDArray a = random_tensor({4}, -1, 1, 1), b = random_tensor({4}, -1, 1, 2);
  Expr sum = call("add", {constant(a, "a"), constant(b, "b")}, {}, "sum");
  Expr e = call("exp", {sum}, {}, "exp");
  Expr sq = call("sqrt", {e}, {}, "exp");  // a name already used: it appears once
  Function before = function({x}, call("multiply", {x, sq}, {}, "scale"));
  g_evaluations = 0;
  Function after = fold_constant(before, kEvaluate);
  EXPECT_EQ(g_evaluations, 1);

  const ConstantNode* folded = constant_arg(after->body, 1);
  ASSERT_NE(folded, nullptr) << str(after);
  EXPECT_EQ(folded->name, "sum + exp");
  std::vector<float> want;
  for (int i = 0; i < 4; ++i)
    want.push_back(std::sqrt(std::exp(a.data_as<float>()[i] + b.data_as<float>()[i])));
  expect_near(folded->value, want);
  // Before/expected: the same multiply, of x by the folded constant.
  Expr expected = call("multiply", {x, constant(folded->value)});
  EXPECT_TRUE(structural_equal(after, function({x}, expected))) << str(after);
  expect_same_outputs(before, after);
}

TEST(FoldConstant, InputDependentSubgraphsStay) {
  Expr x = f32("x", {3});
  Expr c = constant(random_tensor({3}, -1, 1, 3), "c");
  Expr y = call("exp", {call("add", {x, c})});
  Function before = function({x}, call("multiply", {y, c}));
  g_evaluations = 0;
  Function after = fold_constant(before, kEvaluate);
  EXPECT_EQ(g_evaluations, 0);
  EXPECT_TRUE(after == before) << str(after);
}

TEST(FoldConstant, OnlyTheConstantPartOfAMixedGraphFolds) {
  Expr x = f32("x", {2, 3});
  NDArray a = random_tensor({3}, 0, 1, 4), b = random_tensor({3}, 0, 1, 5);
  NDArray c = random_tensor({2, 3}, 0, 1, 6);
  Expr prod = call("multiply", {constant(a), constant(b)}, {}, "prod");
  Expr lhs = call("add", {x, prod}, {}, "lhs");
  // Two separate constant subgraphs, evaluated by one compilation.
  Expr neg = call("subtract", {constant(c), constant(a)}, {}, "neg");
  Function before = function({x}, call("divide", {lhs, call("exp", {neg})}, {}, "out"));
  g_evaluations = 0;
  Function after = fold_constant(before, kEvaluate);
  EXPECT_EQ(g_evaluations, 1);
  ASSERT_EQ(after->params.size(), 1u);

  auto* div = as<CallNode>(after->body);
  const ConstantNode* p = constant_arg(div->args[0], 1);
  const ConstantNode* q = constant_arg(after->body, 1);
  ASSERT_TRUE(p && q) << str(after);
  std::vector<float> want_p, want_q;
  for (int i = 0; i < 3; ++i) want_p.push_back(a.data_as<float>()[i] * b.data_as<float>()[i]);
  for (int i = 0; i < 6; ++i)
    want_q.push_back(std::exp(c.data_as<float>()[i] - a.data_as<float>()[i % 3]));
  expect_near(p->value, want_p);
  expect_near(q->value, want_q);
  EXPECT_EQ(p->name, "prod");
  EXPECT_EQ(q->name, "neg");  // the exp has no name of its own
  Expr expected = call("divide", {call("add", {x, constant(p->value)}), constant(q->value)});
  EXPECT_TRUE(structural_equal(after, function({x}, expected))) << str(after);
  expect_same_outputs(before, after);
}

TEST(FoldConstant, ReshapeOfAConstantFoldsAndKeepsItsName) {
  Expr x = f32("x", {2, 6});
  NDArray w = random_tensor({12}, -1, 1, 7);
  Expr w2 = call("reshape", {constant(w, "fc.weight")},
                 Attrs({{"newshape", std::vector<int64_t>{2, 6}}}));
  Function before = function({x}, call("nn.dense", {x, w2}, {}, "fc"));
  Function after = fold_constant(before, kEvaluate);
  const ConstantNode* folded = constant_arg(after->body, 1);
  ASSERT_NE(folded, nullptr) << str(after);
  EXPECT_EQ(folded->name, "fc.weight");
  EXPECT_EQ(folded->value.shape(), (std::vector<int64_t>{2, 6}));
  expect_near(folded->value, values(w));
  expect_same_outputs(before, after);
}

TEST(FoldConstant, AllConstantOutputsFoldAndConstantOutputsStay) {
  NDArray a = random_tensor({2, 2}, -1, 1, 8);
  Expr k = constant(a, "k");
  Expr x = f32("x", {2, 2});
  Function before =
      function({x}, tuple({call("tanh", {k}, {}, "t"), k, call("add", {x, k}, {}, "sum")}));
  Function after = fold_constant(before, kEvaluate);
  auto* out = as<TupleNode>(after->body);
  ASSERT_NE(out, nullptr);
  auto* t = as<ConstantNode>(out->fields[0]);
  ASSERT_NE(t, nullptr) << str(after);
  std::vector<float> want;
  for (float v : values(a)) want.push_back(std::tanh(v));
  expect_near(t->value, want);
  EXPECT_EQ(out->fields[1], k);                         // stays as it is
  EXPECT_EQ(as<CallNode>(out->fields[2])->args[1], k);  // input-dependent
  expect_same_outputs(before, after);

  // A function that is constant as a whole folds to a constant output.
  Function whole = function({}, call("exp", {k}, {}, "e"));
  Function folded = fold_constant(whole, kEvaluate);
  ASSERT_EQ(folded->body->kind, NodeKind::Constant);
  EXPECT_EQ(folded->body->name, "e");
  // And a constant output is left alone.
  Function just_k = function({}, k);
  EXPECT_TRUE(fold_constant(just_k, kEvaluate) == just_k);
}

}  // namespace
}  // namespace ember::passes
