// The executor's memory plan on its own (no memory, no kernels): roles, view roots, pool
// offsets (reuse after the last reader, never an output over its kernel's input, 64-byte
// alignment), and the graph checks it makes.
#include "ember/runtime/memory_plan.h"

#include <gtest/gtest.h>

#include "../expect_error.h"
#include "ember/support/error.h"

namespace ember::runtime {
namespace {

// A chain in -> a -> b -> c -> out of float32[16] values (64 bytes each), one kernel per
// step: value 0 is the input, 1..3 intermediates, 4 the output.
ExecGraph chain(int intermediates = 3) {
  ExecGraph g;
  const int n = intermediates + 2;
  for (int v = 0; v < n; ++v) g.values.push_back({{16}, DType::Float32});
  g.inputs = {{"x", 0}};
  for (int v = 0; v + 1 < n; ++v)
    g.kernels.push_back({"k", "k" + std::to_string(v), {v, v + 1}, 1});
  g.outputs = {n - 1};
  return g;
}

TEST(MemoryPlan, RolesOfInputsIntermediatesAndOutputs) {
  MemoryPlan plan = plan_memory(chain());
  EXPECT_EQ(plan.role, (std::vector<Role>{Role::Input, Role::Intermediate, Role::Intermediate,
                                          Role::Intermediate, Role::Output}));
  EXPECT_EQ(plan.root, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(plan.output_is_param, std::vector<bool>{false});
  // Only intermediates are in the pool.
  EXPECT_EQ(plan.offset[0], -1);
  EXPECT_EQ(plan.offset[4], -1);
}

TEST(MemoryPlan, AChainReusesTwoBlocks) {
  // a is written by k0 and read by k1, which writes b: a and b must differ; c reuses a's
  // block once k1 has run.
  MemoryPlan plan = plan_memory(chain());
  EXPECT_EQ(plan.pool_bytes, 128u);
  EXPECT_NE(plan.offset[1], plan.offset[2]);
  EXPECT_EQ(plan.offset[3], plan.offset[1]);
  for (int v : {1, 2, 3}) EXPECT_EQ(plan.offset[v] % 64, 0);
}

TEST(MemoryPlan, BestFitTakesTheSmallestFreeBlockThatFits) {
  // k0: x -> big (256 B); k1: big -> small (64 B); k2: small -> s2 (64 B); k3: s2 -> out.
  ExecGraph g;
  g.values = {{{16}, DType::Float32},
              {{64}, DType::Float32},
              {{16}, DType::Float32},
              {{16}, DType::Float32},
              {{16}, DType::Float32}};
  g.inputs = {{"x", 0}};
  g.kernels = {{"k", "k0", {0, 1}, 1},
               {"k", "k1", {1, 2}, 1},
               {"k", "k2", {2, 3}, 1},
               {"k", "k3", {3, 4}, 1}};
  g.outputs = {4};
  MemoryPlan plan = plan_memory(g);
  // s2 takes big's freed block (the only free one), so the pool is 256 + 64 bytes.
  EXPECT_EQ(plan.offset[3], plan.offset[1]);
  EXPECT_EQ(plan.pool_bytes, 320u);
}

TEST(MemoryPlan, SizesRoundUpTo64Bytes) {
  ExecGraph g = chain(1);
  g.values[1].shape = {3};  // 12 bytes
  MemoryPlan plan = plan_memory(g);
  EXPECT_EQ(plan.pool_bytes, 64u);
  EXPECT_EQ(plan.offset[1], 0);
}

TEST(MemoryPlan, ViewsShareTheirRootsMemory) {
  // k0 writes a (value 1); view 5 = a reshaped, view 6 = view of 5; k1 reads view 6.
  ExecGraph g = chain(1);  // values 0 (x), 1 (a), 2 (out)
  g.values.push_back({{4, 4}, DType::Float32});
  g.values.push_back({{2, 8}, DType::Float32});
  g.views = {{3, 1}, {4, 3}};
  g.kernels[1].args = {4, 2};
  MemoryPlan plan = plan_memory(g);
  EXPECT_EQ(plan.role[3], Role::View);
  EXPECT_EQ(plan.root[3], 1);
  EXPECT_EQ(plan.root[4], 1);
  EXPECT_EQ(plan.offset[3], -1);  // a view has no block of its own
  EXPECT_GE(plan.offset[1], 0);
}

TEST(MemoryPlan, AnOutputViewKeepsItsRootOutOfThePool) {
  ExecGraph g = chain(1);  // x -> a -> out
  g.values.push_back({{4, 4}, DType::Float32});
  g.views = {{3, 1}};  // an output view of the intermediate a
  g.outputs = {2, 3};
  MemoryPlan plan = plan_memory(g);
  EXPECT_EQ(plan.role[1], Role::Output);
  EXPECT_EQ(plan.offset[1], -1);
  EXPECT_EQ(plan.pool_bytes, 0u);
}

TEST(MemoryPlan, AParamOutputIsMarked) {
  ExecGraph g = chain(1);
  g.values.push_back({{16}, DType::Float32});
  g.params = {{"w", 3, NDArray::zeros({16}, DType::Float32)}};
  g.outputs = {2, 3};
  MemoryPlan plan = plan_memory(g);
  EXPECT_EQ(plan.role[3], Role::Param);
  EXPECT_EQ(plan.output_is_param, (std::vector<bool>{false, true}));
}

TEST(MemoryPlan, AValueNoKernelTouchesHasNoBlock) {
  ExecGraph g = chain(1);
  g.values.push_back({{16}, DType::Float32});  // value 3: nobody reads or writes it
  MemoryPlan plan = plan_memory(g);
  EXPECT_EQ(plan.role[3], Role::Intermediate);
  EXPECT_EQ(plan.offset[3], -1);
}

TEST(MemoryPlan, ChecksTheGraph) {
  ExecGraph g = chain(1);
  g.params = {{"w", 1, NDArray::zeros({3}, DType::Float32)}};
  EXPECT_ERROR_WITH(plan_memory(g), "parameter 'w'", "float32(3)", "float32(16)");
  g = chain(1);
  g.kernels[0].args = {0, 9};
  EXPECT_THROW(plan_memory(g), InternalError);
  g = chain(1);
  g.values.push_back({{16}, DType::Float32});
  g.views = {{1, 3}, {3, 1}};
  EXPECT_THROW(plan_memory(g), InternalError);  // a cycle of views
  g = chain(1);
  g.values.push_back({{8}, DType::Float32});
  g.views = {{3, 1}};
  EXPECT_THROW(plan_memory(g), InternalError);  // a view that changes the byte size
}

}  // namespace
}  // namespace ember::runtime
