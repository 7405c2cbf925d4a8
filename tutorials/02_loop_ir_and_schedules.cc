// Lesson 02: the loop IR and a schedule.
//
// Lesson 01 compiled a whole graph. Underneath, every kernel is a tensor expression (what
// to compute) plus a schedule (how to loop over it), lowered to Ember's loop IR and then
// compiled by LLVM. This lesson writes a small kernel by hand — a matrix-vector product
// followed by a ReLU — prints its loop IR with the naive schedule, schedules it, prints it
// again, then compiles and runs both versions and checks they agree.
//
// Build and run: it is built with the tests (`ctest -R tutorial_02`) and prints as it goes.

#include <cmath>
#include <cstdio>
#include <iostream>
#include <vector>

#include "ember/codegen/codegen.h"
#include "ember/ir/tensor_expr.h"
#include "ember/passes/schedule.h"
#include "ember/runtime/ndarray.h"

using namespace ember;
using namespace ember::ir;

int main() {
  const int64_t M = 37, K = 64;

  // 1. The algorithm: y[i] = relu(sum_k A[i, k] * x[k]). `compute` takes the shape and a
  //    function from loop indices to an expression; `sum` over a reduce axis is a reduction.
  Tensor A = placeholder("A", {M, K}, DType::Float32);
  Tensor x = placeholder("x", {K}, DType::Float32);
  IterVar k = reduce_axis(K, "k");
  Tensor mv = compute("mv", {M}, [&](const std::vector<PrimVar>& i) {
    return sum(A({i[0], k->var}) * x({k->var}), {k});
  });
  Tensor y = compute("y", {M}, [&](const std::vector<PrimVar>& i) {
    return max(mv({i[0]}), make_const(DType::Float32, 0));
  });

  // 2. The naive schedule: every stage is its own loop nest, in order. The matrix-vector
  //    product is written to a temporary buffer `mv` that the ReLU loop reads back.
  passes::Schedule naive({y});
  PrimFunc f0 = passes::lower_schedule(naive, "naive", {A, x});
  std::cout << "=== naive schedule ===\n" << f0 << "\n";

  // 3. A schedule of our choice: split y's loop into vectors of 8, run the outer loop in
  //    parallel, and compute the product for one vector of rows at a time inside y's outer
  //    loop (compute_at), with its reduction loop outside the vector loop. The temporary
  //    shrinks to 8 values and the ReLU reads them while they are still in registers.
  passes::Schedule sch({y});
  passes::Stage& sy = sch[y];
  auto [io, ii] = sy.split(sy.axes()[0], 8);
  sy.parallel(io);
  sy.vectorize(ii);
  passes::Stage& smv = sch[mv];
  smv.compute_at(sy, io);
  smv.reorder({smv.reduce_axes()[0], smv.axes()[0]});
  smv.vectorize(smv.axes()[0]);
  PrimFunc f1 = passes::lower_schedule(sch, "scheduled", {A, x});
  std::cout << "=== scheduled ===\n" << f1 << "\n";

  // 4. Compile both and run them on the same data.
  auto module = codegen::compile_cpu({f0, f1});
  auto a = runtime::NDArray::empty({M, K}, DType::Float32);
  auto v = runtime::NDArray::empty({K}, DType::Float32);
  for (int64_t i = 0; i < M * K; ++i) a.data_as<float>()[i] = std::sin(0.1f * i);
  for (int64_t i = 0; i < K; ++i) v.data_as<float>()[i] = std::cos(0.3f * i);
  std::vector<runtime::NDArray> outs;
  for (const char* name : {"naive", "scheduled"}) {
    auto out = runtime::NDArray::empty({M}, DType::Float32);
    void* args[] = {a.data(), v.data(), out.data()};
    module->get_function(name)(args);
    outs.push_back(out);
  }

  // 5. Check against a plain C++ loop.
  double max_err = 0;
  for (int64_t i = 0; i < M; ++i) {
    double ref = 0;
    for (int64_t j = 0; j < K; ++j)
      ref += double(a.data_as<float>()[i * K + j]) * v.data_as<float>()[j];
    ref = std::max(ref, 0.0);
    for (auto& o : outs) max_err = std::max(max_err, std::abs(o.data_as<float>()[i] - ref));
  }
  std::printf("max abs error of both schedules vs. a C++ loop: %.2e\n", max_err);
  return max_err < 1e-4 ? 0 : 1;
}
