// Graph IR utilities: structural equality on graphs that share nodes.
#include "ember/ir/graph.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "ember/ir/op.h"

namespace ember::ir {
namespace {

// `blocks` residual blocks, y = relu(x) + x: each block reads its input twice, so a graph of
// n blocks has 2^n paths from the output to the input.
Function residual_chain(int blocks, float scale) {
  Expr x = var("x", TensorType{{4}, DType::Float32});
  Expr y = x;
  for (int i = 0; i < blocks; ++i) y = call("add", {call("nn.relu", {y}), y});
  runtime::NDArray c = runtime::NDArray::empty({4}, DType::Float32);
  for (int i = 0; i < 4; ++i) c.data_as<float>()[i] = scale;
  return function({x}, call("multiply", {y, constant(c)}));
}

// Runs structural_equal on another thread and gives up after a few seconds (the answer is
// then "not finished": without memoisation the comparison is exponential in `blocks`).
int equal_within_seconds(const Function& a, const Function& b) {
  auto result = std::make_shared<std::atomic<int>>(-1);
  std::thread([a, b, result] { result->store(structural_equal(a, b) ? 1 : 0); }).detach();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (result->load() < 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return result->load();
}

TEST(StructuralEqual, ResidualDiamondsTakeLinearTime) {
  const int blocks = 64;
  EXPECT_EQ(equal_within_seconds(residual_chain(blocks, 2), residual_chain(blocks, 2)), 1)
      << "structural_equal did not finish (or said not equal)";
  EXPECT_EQ(equal_within_seconds(residual_chain(blocks, 2), residual_chain(blocks, 3)), 0)
      << "structural_equal did not finish (or said equal)";
  EXPECT_FALSE(structural_equal(residual_chain(3, 2), residual_chain(4, 2)));
}

// A chain of relus 200,000 deep: a recursive comparison overflowed the stack (a crash). The
// test holds every node, and releases them last first, so destroying the chain does not
// recurse either.
TEST(StructuralEqual, DeepChainsDoNotOverflowTheStack) {
  const int depth = 200000;
  auto chain = [&](std::vector<Expr>& nodes, const char* op) {
    nodes.push_back(var("x", TensorType{{4}, DType::Float32}));
    for (int i = 0; i < depth; ++i)
      nodes.push_back(call(i == depth / 2 ? op : "nn.relu", {nodes.back()}));
    return function({nodes.front()}, nodes.back());
  };
  std::vector<Expr> a_nodes, b_nodes, c_nodes;
  {
    Function a = chain(a_nodes, "nn.relu"), b = chain(b_nodes, "nn.relu"),
             c = chain(c_nodes, "sigmoid");
    EXPECT_TRUE(structural_equal(a, b));
    EXPECT_FALSE(structural_equal(a, c));
  }
  for (auto* nodes : {&a_nodes, &b_nodes, &c_nodes})
    while (!nodes->empty()) nodes->pop_back();
}

// Use counts and consumers count every input slot (a node read twice by one call counts
// twice) and the function's output once.
TEST(GraphDataflow, UseCountsAndConsumers) {
  Expr x = var("x", TensorType{{4}, DType::Float32});
  Expr r = call("nn.relu", {x});
  Expr sum = call("add", {r, r});
  Expr out = tuple({sum, r});
  Function f = function({x}, out);
  std::map<const ExprNode*, int> uses = use_counts(f);
  EXPECT_EQ(uses.at(x.get()), 1);
  EXPECT_EQ(uses.at(r.get()), 3);
  EXPECT_EQ(uses.at(sum.get()), 1);
  EXPECT_EQ(uses.at(out.get()), 1);
  std::map<const ExprNode*, std::vector<Expr>> readers = consumers(f);
  EXPECT_EQ(readers.at(r.get()), (std::vector<Expr>{sum, sum, out}));
  EXPECT_EQ(readers.at(x.get()), (std::vector<Expr>{r}));
  EXPECT_EQ(readers.count(out.get()), 0u);
}

TEST(GraphDataflow, JoinNamesKeepsEachPartOnce) {
  EXPECT_EQ(join_names({"conv1", "bn1"}), "conv1 + bn1");
  EXPECT_EQ(join_names({"conv1 + bn1", "bn1", "", "relu"}), "conv1 + bn1 + relu");
  EXPECT_EQ(join_names({"a", "a"}), "a");
  EXPECT_EQ(join_names({"", ""}), "");
}

}  // namespace
}  // namespace ember::ir
