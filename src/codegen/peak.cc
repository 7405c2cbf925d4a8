// The machine's single-thread FMA peak, measured with code Ember compiles itself, so that
// kernel efficiency is reported against what Ember's own code generator can reach.
//
//   acc[c][v] = fma(a[v], b[v], acc[c][v])   for r in [0, R), c in [0, C) unrolled,
//                                           v one vector of the target's width
//
// C independent chains cover the FMA latency (4 cycles x 2 ports needs >= 8 vectors in
// flight); the accumulators stay in registers (a cache_write tile unrolled over c). Every
// chain multiplies the same two vectors, so the loop has no loads: with one load per FMA
// (a[c][v]) the measurement fell at times below what Ember's GEMMs ran at (calibration: FMA
// peak kernel).
#include <algorithm>
#include <chrono>

#include "ember/codegen/codegen.h"
#include "ember/codegen/target.h"
#include "ember/ir/tensor_expr.h"
#include "ember/passes/schedule.h"
#include "ember/runtime/ndarray.h"
#include "ember/support/error.h"

namespace ember::codegen {

double measure_fma_peak(const std::string& target, double seconds) {
  Target t = parse_target(target);
  if (t.is_cuda()) fail("measure_fma_peak measures the CPU; use an \"llvm\" target");
  if (!(seconds > 0)) fail("measure_fma_peak: seconds must be > 0, got ", seconds);
  const int64_t lanes = t.resolved_vector_bits() / 32, chains = 12, reps = 1 << 16;
  using namespace ir;
  Tensor a = placeholder("a", {lanes}, DType::Float32);
  Tensor b = placeholder("b", {lanes}, DType::Float32);
  IterVar r = reduce_axis(reps, "r");
  Tensor p = compute("peak", {chains, lanes}, [&](const std::vector<PrimVar>& i) {
    return sum(a({i[1]}) * b({i[1]}), {r});
  });
  passes::Schedule sch({p});
  passes::Stage& acc = sch[sch.cache_write(p)];
  acc.reorder({acc.reduce_axes()[0], acc.axes()[0], acc.axes()[1]});
  acc.unroll(acc.axes()[0]);
  acc.vectorize(acc.axes()[1]);
  CpuOptions options;
  options.cpu = t.cpu;
  options.vector_bits = t.vector_bits;
  auto module = compile_cpu({passes::lower_schedule(sch, "fma_peak", {a, b})}, options);
  runtime::KernelFn fn = module->get_function("fma_peak");

  auto ta = runtime::NDArray::empty({lanes}, DType::Float32);
  auto tb = runtime::NDArray::empty({lanes}, DType::Float32);
  auto out = runtime::NDArray::empty({chains, lanes}, DType::Float32);
  std::fill_n(ta.data_as<float>(), lanes, 1e-3f);
  std::fill_n(tb.data_as<float>(), lanes, 0.999f);
  void* args[] = {ta.data(), tb.data(), out.data()};
  using clock = std::chrono::steady_clock;
  fn(args);  // warm up
  double best = 0;
  auto start = clock::now();
  do {
    auto t0 = clock::now();
    fn(args);
    double s = std::chrono::duration<double>(clock::now() - t0).count();
    best = std::max(best, 2.0 * chains * lanes * reps / s / 1e9);
  } while (std::chrono::duration<double>(clock::now() - start).count() < seconds);
  return best;
}

}  // namespace ember::codegen
