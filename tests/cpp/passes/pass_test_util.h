#pragma once
// Helpers shared by the graph-pass tests: random inputs, and running a graph as it is given
// (the passes under test switched off) to compare before and after numerically.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "ember/codegen/build.h"
#include "ember/runtime/graph_executor.h"

namespace ember::passes::testing {

inline runtime::NDArray random_tensor(const std::vector<int64_t>& shape, float lo, float hi,
                                      unsigned seed) {
  runtime::NDArray t = runtime::NDArray::empty(shape, DType::Float32);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = dist(gen);
  return t;
}

/// Standard-normal float32 values, reproducible from `seed`.
inline runtime::NDArray normal_tensor(const std::vector<int64_t>& shape, unsigned seed) {
  runtime::NDArray t = runtime::NDArray::empty(shape, DType::Float32);
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = dist(gen);
  return t;
}

inline ir::Expr f32(const std::string& name, std::vector<int64_t> shape) {
  return ir::var(name, ir::TensorType{std::move(shape), DType::Float32});
}

// Compiles `f` with ember::build, runs it on `inputs` and returns copies of its outputs.
// The folding and batching passes are off, so the graph runs as it is given.
inline std::vector<runtime::NDArray> run(const ir::Function& f,
                                         const std::vector<runtime::NDArray>& inputs = {}) {
  PassContext ctx;
  ctx.disabled_passes = {"SimplifyInference", "FoldConstant", "FoldScaleAxis", "BatchSharedDense"};
  auto lib = ember::build(f, "llvm", {}, ctx);
  runtime::GraphExecutor ex(lib->graph, lib->module);
  for (size_t i = 0; i < inputs.size(); ++i) ex.set_input(static_cast<int>(i), inputs[i]);
  ex.run();
  std::vector<runtime::NDArray> out;
  for (int i = 0; i < ex.num_outputs(); ++i) out.push_back(ex.get_output(i).clone());
  return out;
}

// `before` and `after` give the same outputs on random inputs, within 1e-5.
inline void expect_same_outputs(const ir::Function& before, const ir::Function& after) {
  std::vector<runtime::NDArray> inputs;
  for (size_t i = 0; i < before->params.size(); ++i)
    inputs.push_back(random_tensor(before->params[i]->type.tensor().shape, -1, 1, 100 + i));
  std::vector<runtime::NDArray> want = run(before, inputs), got = run(after, inputs);
  ASSERT_EQ(want.size(), got.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(want[o].shape(), got[o].shape());
    for (int64_t i = 0; i < want[o].numel(); ++i)
      ASSERT_NEAR(want[o].data_as<float>()[i], got[o].data_as<float>()[i], 1e-5)
          << "output " << o << " element " << i;
  }
}

}  // namespace ember::passes::testing
