// SimplifyInference: BatchNorm becomes x * scale + shift (before/expected structural tests),
// carrying the BatchNorm's name, and gives the same numbers (ember::build and the
// GraphExecutor, before and after, within 1e-5).
#include "ember/passes/simplify_inference.h"

#include <gtest/gtest.h>

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

// The four BatchNorm parameters of `c` channels: gamma, beta, mean, var (var > 0).
struct BnParams {
  Expr gamma, beta, mean, var;
  explicit BnParams(int64_t c)
      : gamma(constant(random_tensor({c}, 0.5f, 1.5f, 1), "bn.weight")),
        beta(constant(random_tensor({c}, -0.5f, 0.5f, 2), "bn.bias")),
        mean(constant(random_tensor({c}, -0.5f, 0.5f, 3), "bn.running_mean")),
        var(constant(random_tensor({c}, 0.5f, 2.0f, 4), "bn.running_var")) {}
};

Expr eps_constant(float eps) {
  NDArray t = NDArray::empty({1}, DType::Float32);
  *t.data_as<float>() = eps;
  return constant(t);
}

Expr reshape(const Expr& e, std::vector<int64_t> shape) {
  return call("reshape", {e}, Attrs({{"newshape", shape}}));
}

TEST(SimplifyInference, BatchNormBecomesScaleAndShift) {
  Expr x = f32("x", {2, 3, 4, 4});
  BnParams p(3);
  Expr bn =
      call("nn.batch_norm", {x, p.gamma, p.beta, p.mean, p.var}, Attrs({{"epsilon", 1e-3}}), "bn");
  Function before = function({x}, call("nn.relu", {bn}, {}, "relu"));
  Function after = simplify_inference(before);

  Expr scale = call("divide", {p.gamma, call("sqrt", {call("add", {p.var, eps_constant(1e-3f)})})});
  Expr shift = call("subtract", {p.beta, call("multiply", {p.mean, scale})});
  Expr expected =
      call("add", {call("multiply", {x, reshape(scale, {3, 1, 1})}), reshape(shift, {3, 1, 1})});
  EXPECT_TRUE(structural_equal(after, function({x}, call("nn.relu", {expected})))) << str(after);
  // Every new node carries the BatchNorm's name.
  for (auto& e : post_order(as<CallNode>(after->body)->args[0]))
    if (e->kind == NodeKind::Call ||
        (e->kind == NodeKind::Constant && e->type.tensor().shape[0] == 1))
      EXPECT_EQ(e->name, "bn") << to_string(e);
  expect_same_outputs(before, after);
}

TEST(SimplifyInference, BatchNormAlongTheLastAxisNeedsNoReshape) {
  Expr x = f32("x", {5, 3});
  BnParams p(3);
  Function before = function({x}, call("nn.batch_norm", {x, p.gamma, p.beta, p.mean, p.var}));
  Function after = simplify_inference(before);
  for (auto& e : post_order(after->body))
    if (auto* c = as<CallNode>(e)) EXPECT_NE(c->op->name, "reshape");
  Expr scale = call("divide", {p.gamma, call("sqrt", {call("add", {p.var, eps_constant(1e-5f)})})});
  Expr shift = call("subtract", {p.beta, call("multiply", {p.mean, scale})});
  Expr expected = call("add", {call("multiply", {x, scale}), shift});
  EXPECT_TRUE(structural_equal(after, function({x}, expected))) << str(after);
  expect_same_outputs(before, after);
}

TEST(SimplifyInference, BatchNormOnAnInnerAxis) {
  Expr x = f32("x", {2, 4, 3, 5});
  BnParams p(3);
  Function before = function({x}, call("nn.batch_norm", {x, p.gamma, p.beta, p.mean, p.var},
                                       Attrs({{"axis", int64_t{2}}})));
  Function after = simplify_inference(before);
  expect_same_outputs(before, after);
}

TEST(SimplifyInference, GraphsWithoutInferenceOpsStayTheSame) {
  Expr x = f32("x", {1, 2, 4, 4});
  Expr w = constant(random_tensor({2, 2, 3, 3}, -1, 1, 5), "w");
  Function f = function({x}, call("nn.relu", {call("nn.conv2d", {x, w})}));
  EXPECT_TRUE(simplify_inference(f) == f);
}

}  // namespace
}  // namespace ember::passes
