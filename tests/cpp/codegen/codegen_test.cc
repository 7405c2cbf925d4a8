// CPU code generation: hand-built loop IR compiled with compile_cpu and run on real data.
#include "ember/codegen/codegen.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <regex>
#include <string>
#include <vector>

#include "ember/ir/loop.h"
#include "ember/passes/annotate_loops.h"
#include "ember/runtime/cpu_features.h"
#include "ember/runtime/kernel_error.h"
#include "ember/support/error.h"

namespace ember::codegen {
namespace {

using namespace ember::ir;

const float kNaN = std::numeric_limits<float>::quiet_NaN();

// The function as the kernel pipeline hands it to the code generator: its loops annotated
// (AnnotateLoops, for 256-bit vectors), which the code generator obeys.
PrimFunc make_func(std::string name, std::vector<Buffer> params, int num_inputs, Stmt body) {
  PrimFunc f;
  f.name = std::move(name);
  f.params = std::move(params);
  f.num_inputs = num_inputs;
  f.body = std::move(body);
  return passes::annotate_loops(f, passes::MachineModel::for_vector_bits(256));
}

// Compiles one function and calls it on the given host arrays.
std::shared_ptr<runtime::Module> run(const PrimFunc& f, std::vector<void*> args) {
  auto m = compile_cpu({f});
  m->get_function(f.name)(args.data());
  return m;
}

// The LLVM IR of `f` compiled for each of a few named CPUs (compile only): what LLVM's own
// vectorizers make of a loop depends on the CPU it compiles for, so IR assertions read these,
// never the host's, and hold on every host. Zen 1 (AVX2 on 128-bit units), Zen 3 (AVX2),
// Skylake-X (AVX-512).
std::vector<std::pair<std::string, std::string>> ll_on_cpus(const PrimFunc& f,
                                                            int vector_bits = 0) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const char* cpu : {"znver1", "znver3", "skylake-avx512"}) {
    CpuOptions options;
    options.cpu = cpu;
    options.vector_bits = vector_bits;
    out.emplace_back(cpu, compile_cpu({f}, options)->get_source("ll"));
  }
  return out;
}

std::vector<float> iota_floats(size_t n, float start, float step) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// C[i] = A[i] + B[i] over n elements, the loop built by `loop(i, body)`.
PrimFunc add_func(const std::string& name, int64_t n,
                  const std::function<Stmt(std::function<Stmt(PrimExpr)>)>& loop) {
  auto a = make_buffer("A", DType::Float32, {n});
  auto b = make_buffer("B", DType::Float32, {n});
  auto c = make_buffer("C", DType::Float32, {n});
  Stmt body = loop([&](PrimExpr i) { return store(c, i, load(a, i) + load(b, i)); });
  return make_func(name, {a, b, c}, 2, body);
}

TEST(CodegenCpu, SerialAdd) {
  const int64_t n = 37;
  // Kernel names are PyTorch module paths: dots, spaces and '+' must survive.
  PrimFunc f = add_func("layer1.0.conv1 + relu", n, [&](auto body) {
    PrimVar i("i");
    return for_loop(i, 0, n, ForKind::Serial, body(i));
  });
  auto a = iota_floats(n, 1.0f, 0.5f), b = iota_floats(n, -3.0f, 2.0f);
  std::vector<float> c(n, 0.0f);
  run(f, {a.data(), b.data(), c.data()});
  for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(c[i], a[i] + b[i]) << i;
}

TEST(CodegenCpu, VectorizedAddExactLanes) {
  const int64_t lanes = native_vector_lanes(DType::Float32);
  const int64_t n = 4 * lanes;
  PrimFunc f = add_func("add_vec", n, [&](auto body) {
    PrimVar io("io"), ii("ii");
    return for_loop(io, 0, 4, ForKind::Serial,
                    for_loop(ii, 0, lanes, ForKind::Vectorized, body(io * lanes + ii)));
  });
  auto a = iota_floats(n, 0.25f, 1.0f), b = iota_floats(n, 100.0f, -3.0f);
  std::vector<float> c(n, 0.0f);
  auto m = run(f, {a.data(), b.data(), c.data()});
  for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(c[i], a[i] + b[i]) << i;
  EXPECT_EQ(m->type_key(), "llvm-jit");
  // The vector body is one contiguous load per input, not a gather.
  for (auto& [cpu, ll] : ll_on_cpus(f))
    EXPECT_EQ(ll.find("masked.gather"), std::string::npos) << cpu;
}

TEST(CodegenCpu, ParallelRowsWithClosure) {
  const int64_t rows = 7, cols = 33;
  auto a = make_buffer("A", DType::Float32, {rows, cols});
  auto b = make_buffer("B", DType::Float32, {rows, cols});
  auto c = make_buffer("C", DType::Float32, {rows, cols});
  PrimVar r("r"), k("k"), scale("scale", DType::Float32), offset("offset");
  // A free float variable and a free index variable travel in the closure; the nested
  // parallel loop runs serially inside the outlined body.
  Stmt body =
      let_stmt(scale, make_const(DType::Float32, 2.0),
               let_stmt(offset, PrimExpr(1),
                        for_loop(r, 0, rows, ForKind::Parallel,
                                 for_loop(k, 0, cols - 1, ForKind::Parallel,
                                          store(c, r * cols + k + offset,
                                                load(a, r * cols + k + offset) +
                                                    load(b, r * cols + k + offset) * scale)))));
  PrimFunc f = make_func("add_parallel", {a, b, c}, 2, body);
  auto av = iota_floats(rows * cols, -5.0f, 0.125f), bv = iota_floats(rows * cols, 3.0f, 0.5f);
  std::vector<float> cv(rows * cols, -1.0f);
  run(f, {av.data(), bv.data(), cv.data()});
  for (int64_t i = 0; i < rows * cols; ++i) {
    float want = i % cols == 0 ? -1.0f : av[i] + bv[i] * 2.0f;
    EXPECT_FLOAT_EQ(cv[i], want) << i;
  }
}

TEST(CodegenCpu, GuardedVectorizedTail) {
  const int64_t lanes = native_vector_lanes(DType::Float32);
  const int64_t n = 2 * lanes + 3, blocks = (n + lanes - 1) / lanes;
  auto a = make_buffer("A", DType::Float32, {n});
  auto c = make_buffer("C", DType::Float32, {n});
  PrimVar io("io"), ii("ii");
  PrimExpr i = io * lanes + ii;
  // if (i < n) C[i] = A[i] * 2 else-nothing; an else branch writes nothing either, so the
  // sentinel past n stays.
  Stmt body = for_loop(
      io, 0, blocks, ForKind::Serial,
      for_loop(ii, 0, lanes, ForKind::Vectorized,
               if_then_else(i < n, store(c, i, load(a, i) * make_const(DType::Float32, 2.0)))));
  PrimFunc f = make_func("guarded", {a, c}, 1, body);
  // Host arrays are longer than n: a write (or a faulting read) past n would show.
  auto av = iota_floats(blocks * lanes, 1.0f, 1.0f);
  std::vector<float> cv(blocks * lanes, -7.0f);
  run(f, {av.data(), cv.data()});
  for (int64_t j = 0; j < blocks * lanes; ++j)
    EXPECT_FLOAT_EQ(cv[j], j < n ? av[j] * 2.0f : -7.0f) << j;
}

TEST(CodegenCpu, VectorizedIfElseSelectsPerLane) {
  const int64_t lanes = native_vector_lanes(DType::Int32);
  auto a = make_buffer("A", DType::Int32, {lanes});
  auto c = make_buffer("C", DType::Int32, {lanes});
  PrimVar i("i");
  PrimExpr x = load(a, i);
  Stmt body =
      for_loop(i, 0, lanes, ForKind::Vectorized,
               if_then_else(x % make_const(DType::Int32, 2) == make_const(DType::Int32, 0),
                            store(c, i, x * make_const(DType::Int32, 10)), store(c, i, -x)));
  PrimFunc f = make_func("if_else_vec", {a, c}, 1, body);
  std::vector<int32_t> av(lanes), cv(lanes, 0);
  for (int64_t j = 0; j < lanes; ++j) av[j] = static_cast<int32_t>(j * 3 - 7);
  run(f, {av.data(), cv.data()});
  for (int64_t j = 0; j < lanes; ++j) EXPECT_EQ(cv[j], (av[j] % 2 == 0) ? av[j] * 10 : -av[j]) << j;
}

TEST(CodegenCpu, StridedAndIndirectGather) {
  const int64_t lanes = native_vector_lanes(DType::Float32), n = 3 * lanes + 1;
  auto a = make_buffer("A", DType::Float32, {n});
  auto idx = make_buffer("idx", DType::Int64, {lanes});
  auto out = make_buffer("out", DType::Float32, {lanes});
  auto out2 = make_buffer("out2", DType::Float32, {2 * lanes});
  PrimVar i("i");
  // A stride-3 gather, and an indirect gather stored at stride 2 (lane by lane).
  Stmt body = for_loop(
      i, 0, lanes, ForKind::Vectorized,
      seq({store(out, i, load(a, i * 3 + 1)), store(out2, i * 2 + 1, load(a, load(idx, i)))}));
  PrimFunc f = make_func("gather", {a, idx, out, out2}, 2, body);
  auto av = iota_floats(n, 0.0f, 1.5f);
  std::vector<int64_t> iv(lanes);
  for (int64_t j = 0; j < lanes; ++j) iv[j] = (j * 7) % n;
  std::vector<float> ov(lanes, 0.0f), o2v(2 * lanes, -1.0f);
  run(f, {av.data(), iv.data(), ov.data(), o2v.data()});
  for (auto& [cpu, ll] : ll_on_cpus(f))
    EXPECT_NE(ll.find("masked.gather"), std::string::npos) << cpu;
  for (int64_t j = 0; j < lanes; ++j) EXPECT_FLOAT_EQ(ov[j], av[j * 3 + 1]) << j;
  for (int64_t j = 0; j < 2 * lanes; ++j)
    EXPECT_FLOAT_EQ(o2v[j], j % 2 ? av[iv[j / 2]] : -1.0f) << j;
}

// A larger constant stride (a matrix column) loads and stores lane by lane at constant
// offsets: no gather or scatter, negative strides too.
TEST(CodegenCpu, ColumnLoadsAndStoresAreScalarPerLane) {
  const int64_t lanes = native_vector_lanes(DType::Float32), cols = 7, n = lanes * cols;
  auto a = make_buffer("A", DType::Float32, {n});
  auto out = make_buffer("out", DType::Float32, {n});
  PrimVar c("c"), i("i");
  // out[i * 7 + c] = A[(lanes - 1 - i) * 7 + c] * 2: a column read bottom-up, written down.
  Stmt body = for_loop(c, 0, cols, ForKind::Serial,
                       for_loop(i, 0, lanes, ForKind::Vectorized,
                                store(out, i * cols + c,
                                      load(a, (PrimExpr(lanes - 1) - i) * cols + c) *
                                          make_const(DType::Float32, 2))));
  PrimFunc f = make_func("columns", {a, out}, 1, body);
  auto av = iota_floats(n, 0.0f, 1.5f);
  std::vector<float> ov(n, 0.0f);
  // For a CPU whose gathers are slow (LLVM's SLP vectorizer turns the lanes back into a
  // gather where its cost model says gathers pay: znver5, for one), so the verdict does not
  // depend on the host.
  CpuOptions options;
  options.cpu = "znver3";
  auto m = compile_cpu({f}, options);
  std::vector<void*> args{av.data(), ov.data()};
  m->get_function(f.name)(args.data());
  std::string ll = m->get_source("ll");
  EXPECT_EQ(ll.find("masked.gather"), std::string::npos);
  EXPECT_EQ(ll.find("masked.scatter"), std::string::npos);
  for (int64_t r = 0; r < lanes; ++r)
    for (int64_t k = 0; k < cols; ++k)
      EXPECT_FLOAT_EQ(ov[r * cols + k], 2 * av[(lanes - 1 - r) * cols + k]) << r << ", " << k;
}

// Columns read along the loop around the vector loop (ir::transposed_loads) are read as
// V x V blocks transposed in registers: every element lands where the per-lane loads would
// put it, for 4 to 16 lanes whatever the host's width, a block's worth of rows and a tail
// that runs as written, an upward and a downward column, and types of 1 to 8 bytes.
TEST(CodegenCpu, ColumnBlocksAreTransposedInRegisters) {
  for (int64_t lanes : {4, 8, 16}) {
    for (DType t : {DType::Float32, DType::Bool, DType::Float64, DType::Int64}) {
      const int64_t rows = 2 * lanes + 3, stride = rows + 5, n = lanes * stride;
      auto a = make_buffer("A", t, {n});
      auto out = make_buffer("out", t, {2 * rows * lanes});
      PrimVar c("c"), i("i");
      PrimExpr down = load(a, (PrimExpr(lanes - 1) - i) * stride + c + 2);
      Stmt body = for_loop(
          c, 0, rows, ForKind::Serial,
          for_loop(i, 0, lanes, ForKind::Vectorized,
                   seq({store(out, c * lanes + i, load(a, i * stride + c)),
                        store(out, (c + rows) * lanes + i,
                              t == DType::Bool ? logical_not(down) : down + make_const(t, 1))})));
      PrimFunc f = make_func("columns", {a, out}, 1, body);
      const size_t bytes = dtype_bytes(t);
      std::vector<uint8_t> av(n * bytes), ov(2 * rows * lanes * bytes, 0);
      for (int64_t k = 0; k < n; ++k) {  // element k holds k (bools: whether 3 divides k)
        if (t == DType::Float32) reinterpret_cast<float*>(av.data())[k] = static_cast<float>(k);
        if (t == DType::Float64) reinterpret_cast<double*>(av.data())[k] = static_cast<double>(k);
        if (t == DType::Int64) reinterpret_cast<int64_t*>(av.data())[k] = k;
        if (t == DType::Bool) av[k] = k % 3 == 0;
      }
      run(f, {av.data(), ov.data()});
      // Read as written, a column is one scalar load per lane: no vector load of A at all.
      const char* elem = t == DType::Float32   ? " x float>"
                         : t == DType::Float64 ? " x double>"
                         : t == DType::Int64   ? " x i64>"
                                               : " x i8>";
      for (auto& [cpu, ll] : ll_on_cpus(f))
        EXPECT_NE(ll.find("load <" + std::to_string(lanes) + elem), std::string::npos) << cpu;
      auto at = [&](const std::vector<uint8_t>& v, int64_t k) -> double {
        if (t == DType::Float32) return reinterpret_cast<const float*>(v.data())[k];
        if (t == DType::Float64) return reinterpret_cast<const double*>(v.data())[k];
        if (t == DType::Int64)
          return static_cast<double>(reinterpret_cast<const int64_t*>(v.data())[k]);
        return v[k];
      };
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t l = 0; l < lanes; ++l) {
          ASSERT_EQ(at(ov, r * lanes + l), at(av, l * stride + r)) << lanes << " " << r << " " << l;
          const double d = at(av, (lanes - 1 - l) * stride + r + 2);
          ASSERT_EQ(at(ov, (r + rows) * lanes + l), t == DType::Bool ? double(d == 0) : d + 1)
              << lanes << " " << r << " " << l;
        }
    }
  }
}

// Through unrolled loops between the serial loop and the vector loop (a reduction's register
// tile of 3 x 2 vectors summing along rows): one transposed block per combination of them.
TEST(CodegenCpu, ColumnBlocksThroughUnrolledLoops) {
  const int64_t lanes = 8, rows = 3 * lanes + 5, n = 6 * lanes * rows;
  auto a = make_buffer("A", DType::Float32, {n});
  auto sum = make_buffer("sum", DType::Float32, {6 * lanes});
  PrimVar r("r"), u("u"), w("w"), i("i");
  // sum[u, w, i] += A[u, w, i, r]: the rows of A summed, 6 x 8 of them at a time.
  PrimExpr at = (u * 2 + w) * lanes + i;
  Stmt body = for_loop(
      r, 0, rows, ForKind::Serial,
      for_loop(u, 0, 3, ForKind::Unrolled,
               for_loop(w, 0, 2, ForKind::Unrolled,
                        for_loop(i, 0, lanes, ForKind::Vectorized,
                                 store(sum, at, load(sum, at) + load(a, at * rows + r))))));
  PrimFunc f = make_func("row_sums", {a, sum}, 1, body);
  auto av = iota_floats(n, 0.0f, 0.25f);
  std::vector<float> sv(6 * lanes, 1.0f);
  run(f, {av.data(), sv.data()});
  // Each block's 6 x 8 rows of A are vector loads (the sums' loads are 6 more at most).
  for (auto& [cpu, ll] : ll_on_cpus(f, 256)) {
    size_t vector_loads = 0;
    for (size_t p = ll.find("load <8 x float>"); p != std::string::npos;
         p = ll.find("load <8 x float>", p + 1))
      ++vector_loads;
    EXPECT_GE(vector_loads, 48u) << cpu;
  }
  for (int64_t k = 0; k < 6 * lanes; ++k) {
    float expected = 1.0f;
    for (int64_t j = 0; j < rows; ++j) expected += av[k * rows + j];
    EXPECT_FLOAT_EQ(sv[k], expected) << k;
  }
}

TEST(CodegenCpu, FloorDivModOfNegatives) {
  const std::vector<int64_t> xs = {-7, 7, -7, 7, -6, 6, 0, -1, 5, -9, 9, -8, 13, -13, 1, -2};
  const std::vector<int64_t> ys = {2, -2, -2, 2, 3, -3, 5, 4, -5, 4, -4, 8, 5, 5, -1, 7};
  const int64_t n = static_cast<int64_t>(xs.size());
  for (ForKind kind : {ForKind::Serial, ForKind::Vectorized}) {
    for (DType t : {DType::Int64, DType::Int32}) {
      auto x = make_buffer("x", t, {n});
      auto y = make_buffer("y", t, {n});
      auto q = make_buffer("q", t, {n});
      auto r = make_buffer("r", t, {n});
      auto q7 = make_buffer("q7", t, {n});  // by a constant divisor
      PrimVar i("i");
      PrimExpr xv = load(x, i), yv = load(y, i), seven = make_const(t, 7);
      Stmt body = for_loop(
          i, 0, n, kind,
          seq({store(q, i, xv / yv), store(r, i, xv % yv), store(q7, i, xv / seven - xv % seven)}));
      PrimFunc f = make_func("floor_divmod", {x, y, q, r, q7}, 2, body);
      std::vector<int64_t> qv(n), rv(n), q7v(n);
      auto check = [&](auto zero) {
        using T = decltype(zero);
        std::vector<T> xt(xs.begin(), xs.end()), yt(ys.begin(), ys.end());
        std::vector<T> qt(n), rt(n), q7t(n);
        run(f, {xt.data(), yt.data(), qt.data(), rt.data(), q7t.data()});
        for (int64_t j = 0; j < n; ++j) {
          int64_t fq = floor_div(xs[j], ys[j]);
          EXPECT_EQ(qt[j], fq) << xs[j] << " / " << ys[j];
          EXPECT_EQ(rt[j], xs[j] - fq * ys[j]) << xs[j] << " % " << ys[j];
          EXPECT_EQ(q7t[j], floor_div(xs[j], 7) - (xs[j] - floor_div(xs[j], 7) * 7)) << xs[j];
        }
      };
      if (t == DType::Int64)
        check(int64_t{0});
      else
        check(int32_t{0});
    }
  }
}

TEST(CodegenCpu, MinMaxPropagateNaN) {
  const int64_t lanes = native_vector_lanes(DType::Float32);
  auto a = make_buffer("A", DType::Float32, {lanes});
  auto b = make_buffer("B", DType::Float32, {lanes});
  auto mx = make_buffer("mx", DType::Float32, {lanes});
  auto mn = make_buffer("mn", DType::Float32, {lanes});
  PrimVar i("i");
  Stmt body = for_loop(
      i, 0, lanes, ForKind::Vectorized,
      seq({store(mx, i, max(load(a, i), load(b, i))), store(mn, i, min(load(a, i), load(b, i)))}));
  PrimFunc f = make_func("nan_minmax", {a, b, mx, mn}, 2, body);
  std::vector<float> av(lanes), bv(lanes), mxv(lanes), mnv(lanes);
  for (int64_t j = 0; j < lanes; ++j) {
    av[j] = j % 3 == 0 ? kNaN : static_cast<float>(j) - 4.0f;
    bv[j] = j % 4 == 1 ? kNaN : 2.0f;
  }
  run(f, {av.data(), bv.data(), mxv.data(), mnv.data()});
  // No order of -0 and +0 (nsz): x86 would test the sign per step (a row max ran 3x slower).
  for (auto& [cpu, ll] : ll_on_cpus(f)) {
    EXPECT_NE(ll.find("call nsz <" + std::to_string(lanes) + " x float> @llvm.maximum"),
              std::string::npos)
        << cpu << "\n"
        << ll;
    EXPECT_NE(ll.find("call nsz <" + std::to_string(lanes) + " x float> @llvm.minimum"),
              std::string::npos)
        << cpu;
  }
  for (int64_t j = 0; j < lanes; ++j) {
    if (std::isnan(av[j]) || std::isnan(bv[j])) {
      EXPECT_TRUE(std::isnan(mxv[j])) << j;
      EXPECT_TRUE(std::isnan(mnv[j])) << j;
    } else {
      EXPECT_FLOAT_EQ(mxv[j], std::max(av[j], bv[j])) << j;
      EXPECT_FLOAT_EQ(mnv[j], std::min(av[j], bv[j])) << j;
    }
  }
}

TEST(CodegenCpu, LocalAccumulatorAndHeapBuffer) {
  const int64_t rows = 5, k_len = 19;
  auto a = make_buffer("A", DType::Float32, {rows, k_len});
  auto out = make_buffer("out", DType::Float32, {rows});
  auto acc = make_buffer("acc", DType::Float32, {1}, BufferScope::Local);
  PrimVar r("r"), k("k");
  Stmt body =
      for_loop(r, 0, rows, ForKind::Parallel,
               allocate(acc, seq({store(acc, 0, make_const(DType::Float32, 0.0)),
                                  for_loop(k, 0, k_len, ForKind::Serial,
                                           store(acc, 0, load(acc, 0) + load(a, r * k_len + k))),
                                  store(out, r, load(acc, 0))})));
  PrimFunc f = make_func("local_acc", {a, out}, 1, body);
  auto av = iota_floats(rows * k_len, -2.0f, 0.25f);
  std::vector<float> ov(rows, 0.0f);
  run(f, {av.data(), ov.data()});
  for (int64_t i = 0; i < rows; ++i) {
    float want = 0.0f;
    for (int64_t j = 0; j < k_len; ++j) want += av[i * k_len + j];
    EXPECT_NEAR(ov[i], want, 1e-4f) << i;
  }

  // 80 KB does not fit the stack limit: the buffer comes from the heap and is freed.
  const int64_t n = 20000;
  auto x = make_buffer("x", DType::Float32, {n});
  auto y = make_buffer("y", DType::Float32, {n});
  auto tmp = make_buffer("tmp", DType::Float32, {n}, BufferScope::Local);
  PrimVar i("i"), j("j");
  Stmt big = allocate(
      tmp, seq({for_loop(i, 0, n, ForKind::Serial, store(tmp, n - 1 - i, load(x, i) * 2.0)),
                for_loop(j, 0, n, ForKind::Serial, store(y, j, load(tmp, j) + 1.0))}));
  PrimFunc g = make_func("heap_tmp", {x, y}, 1, big);
  auto xv = iota_floats(n, 0.0f, 1.0f);
  std::vector<float> yv(n, 0.0f);
  auto m = run(g, {xv.data(), yv.data()});
  EXPECT_NE(m->get_source("ll").find("ember_alloc"), std::string::npos);
  for (int64_t q = 0; q < n; ++q) EXPECT_FLOAT_EQ(yv[q], xv[n - 1 - q] * 2.0f + 1.0f) << q;
}

// A scratch buffer that cannot be allocated (2^60 bytes) is reported through the kernel
// error channel, from the calling thread and from the pool's, and the kernel skips the
// work that needed it instead of writing through a null pointer.
TEST(CodegenCpu, FailedHeapAllocationIsReported) {
  const int64_t huge = int64_t{1} << 58, rows = 4;  // float32 elements
  auto y = make_buffer("y", DType::Float32, {rows});
  auto tmp = make_buffer("tmp", DType::Float32, {huge}, BufferScope::Local);
  for (ForKind kind : {ForKind::Serial, ForKind::Parallel}) {
    PrimVar r("r");
    Stmt body = for_loop(r, 0, rows, kind,
                         allocate(tmp, seq({store(tmp, huge - 1, make_const(DType::Float32, 1.0)),
                                            store(y, r, load(tmp, huge - 1))})));
    auto m = compile_cpu({make_func("huge_tmp", {y}, 0, body)});
    std::vector<float> yv(rows, -1.0f);
    void* args[] = {yv.data()};
    runtime::KernelErrors errors;
    {
      runtime::KernelErrorScope scope(&errors);
      m->get_function("huge_tmp")(args);
    }
    ASSERT_TRUE(errors.failed());
    std::string msg = errors.take_message("huge_tmp");
    EXPECT_NE(msg.find("kernel 'huge_tmp'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(huge * 4) + " bytes"), std::string::npos) << msg;
    EXPECT_FALSE(errors.failed());           // taken
    for (float v : yv) EXPECT_EQ(v, -1.0f);  // the work that needed the buffer was skipped
  }
}

// out[r] = sum_k A[r, k], a serial loop nest over A's rows.
PrimFunc row_sums(const std::string& name, DType t, int64_t rows, int64_t cols) {
  auto a = make_buffer("A", t, {rows, cols});
  auto out = make_buffer("out", t, {rows});
  PrimVar r("r"), k("k");
  Stmt body = for_loop(r, 0, rows, ForKind::Serial,
                       seq({store(out, r, make_const(t, 0.0)),
                            for_loop(k, 0, cols, ForKind::Serial,
                                     store(out, r, load(out, r) + load(a, r * cols + k)))}));
  return make_func(name, {a, out}, 1, body);
}

TEST(CodegenCpu, SumReductionOverInnerLoop) {
  const int64_t rows = 6, cols = 45;
  PrimFunc f = row_sums("row_sum", DType::Float64, rows, cols);
  auto a = f.params[0];
  std::vector<double> av(rows * cols), ov(rows, -1.0);
  for (size_t i = 0; i < av.size(); ++i) av[i] = std::sin(static_cast<double>(i));
  run(f, {av.data(), ov.data()});
  for (int64_t i = 0; i < rows; ++i) {
    double want = 0.0;
    for (int64_t j = 0; j < cols; ++j) want += av[i * cols + j];
    EXPECT_NEAR(ov[i], want, 1e-12) << i;
  }

  // A "vectorized" loop whose lanes all update one element is run serially, keeping its
  // meaning (a vector store there would keep only the last lane).
  auto total = make_buffer("total", DType::Float64, {1});
  PrimVar v("v");
  Stmt racy = seq(
      {store(total, 0, make_const(DType::Float64, 0.0)),
       for_loop(v, 0, cols, ForKind::Vectorized, store(total, 0, load(total, 0) + load(a, v)))});
  PrimFunc g = make_func("racy_sum", {a, total}, 1, racy);
  double tv = 0.0;
  run(g, {av.data(), &tv});
  EXPECT_NEAR(tv, std::accumulate(av.begin(), av.begin() + cols, 0.0), 1e-12);
}

// A short row sum (16 floats, a layer norm's statistic) stays a loop for LLVM's vectorizer:
// unrolled first, its 16 dependent scalar adds were left in series.
TEST(CodegenCpu, ShortRowSumsAreVectorized) {
  const int64_t rows = 3, cols = 16;
  PrimFunc f = row_sums("short_rows", DType::Float32, rows, cols);
  auto av = iota_floats(rows * cols, -3.0f, 0.25f);
  std::vector<float> ov(rows, -1.0f);
  run(f, {av.data(), ov.data()});
  for (auto& [cpu, ll] : ll_on_cpus(f))
    EXPECT_NE(ll.find("vector.reduce.fadd"), std::string::npos) << cpu;
  for (int64_t i = 0; i < rows; ++i) {
    float want = 0.0f;
    for (int64_t j = 0; j < cols; ++j) want += av[i * cols + j];
    EXPECT_NEAR(ov[i], want, 1e-4) << i;
  }
}

// A row max of 16 floats stays a rolled loop that LLVM vectorizes: unrolled first, it was
// vectorized across rows with gathers (a log_sum_exp over rows of 16 ran 1.5x its unfused
// kernels). A NaN anywhere in a row is the row's max.
TEST(CodegenCpu, ShortRowMaxesAreVectorizedAndPropagateNaN) {
  const int64_t rows = 4, cols = 16;
  auto a = make_buffer("A", DType::Float32, {rows, cols});
  auto out = make_buffer("out", DType::Float32, {rows});
  PrimVar r("r"), k("k");
  Stmt body = for_loop(r, 0, rows, ForKind::Serial,
                       seq({store(out, r, make_const(DType::Float32, -1e30)),
                            for_loop(k, 0, cols, ForKind::Serial,
                                     store(out, r, max(load(out, r), load(a, r * cols + k))))}));
  PrimFunc f = make_func("row_max", {a, out}, 1, body);
  auto av = iota_floats(rows * cols, -3.0f, 0.37f);
  av[2 * cols + 9] = kNaN;
  std::vector<float> ov(rows, 0.0f);
  run(f, {av.data(), ov.data()});
  for (auto& [cpu, ll] : ll_on_cpus(f))
    EXPECT_NE(ll.find("vector.reduce.fmaximum"), std::string::npos) << cpu << "\n" << ll;
  for (int64_t i = 0; i < rows; ++i) {
    if (i == 2) {
      EXPECT_TRUE(std::isnan(ov[i]));
      continue;
    }
    float want = -1e30f;
    for (int64_t j = 0; j < cols; ++j) want = std::max(want, av[i * cols + j]);
    EXPECT_FLOAT_EQ(ov[i], want) << i;
  }
}

// A long rolled row sum (768 floats, a BERT layer norm's statistic) keeps four vector
// accumulators: as one, each vector add waited for the previous one (1.6x slower layer norm).
// The structure is checked in code for named CPUs (LLVM's vectorizer sizes its vectors and
// interleave from the CPU it compiles for: an AVX2 host has no 512-bit vectors to give), the
// numbers on the host.
TEST(CodegenCpu, LongRowSumsKeepIndependentAccumulators) {
  const int64_t rows = 3, cols = 768;
  auto av = iota_floats(rows * cols, -3.0f, 0.01f);
  for (auto [bits, cpu] : {std::pair{256, "znver1"},
                           {256, "znver3"},
                           {256, "haswell"},
                           {512, "znver4"},
                           {512, "skylake-avx512"},
                           {512, "sapphirerapids"}}) {
    CpuOptions named;
    named.vector_bits = bits;
    named.cpu = cpu;
    PrimFunc f = row_sums("long_rows", DType::Float32, rows, cols);
    const std::string ll = compile_cpu({f}, named)->get_source("ll");
    const std::string add = "fadd reassoc <" + std::to_string(bits / 32) + " x float>";
    size_t adds = 0;
    for (size_t at = ll.find(add); at != std::string::npos; at = ll.find(add, at + 1)) ++adds;
    EXPECT_GE(adds, 4u) << cpu << " at " << bits << " bits\n" << ll;
  }
  for (int bits : {256, 512}) {
    CpuOptions options;
    options.vector_bits = bits;
    PrimFunc f = row_sums("long_rows", DType::Float32, rows, cols);
    auto m = compile_cpu({f}, options);
    std::vector<float> ov(rows, -1.0f);
    std::vector<void*> args{av.data(), ov.data()};
    m->get_function(f.name)(args.data());
    for (int64_t i = 0; i < rows; ++i) {
      double want = 0.0;
      for (int64_t j = 0; j < cols; ++j) want += av[i * cols + j];
      EXPECT_NEAR(ov[i], want, 1e-3 * std::fabs(want) + 1e-3) << i;
    }
  }
}

TEST(CodegenCpu, CastsReinterpretAndBools) {
  const int64_t n = 8;
  auto x = make_buffer("x", DType::Float32, {n});
  auto to_i32 = make_buffer("to_i32", DType::Int32, {n});
  auto to_f64 = make_buffer("to_f64", DType::Float64, {n});
  auto bits = make_buffer("bits", DType::Int32, {n});
  auto back = make_buffer("back", DType::Float32, {n});
  auto nz = make_buffer("nz", DType::Bool, {n});
  auto from_bool = make_buffer("from_bool", DType::Float32, {n});
  for (ForKind kind : {ForKind::Serial, ForKind::Vectorized}) {
    PrimVar i("i");
    PrimExpr xv = load(x, i);
    Stmt body =
        for_loop(i, 0, n, kind,
                 seq({store(to_i32, i, cast(DType::Int32, xv)),
                      store(to_f64, i, cast(DType::Float64, cast(DType::Int32, xv)) * 0.5),
                      store(bits, i, reinterpret(DType::Int32, xv)),
                      store(back, i, reinterpret(DType::Float32, reinterpret(DType::Int32, xv))),
                      store(nz, i, cast(DType::Bool, xv)),
                      store(from_bool, i,
                            cast(DType::Float32, logical_and(load(nz, i), xv < 0.0)) + 10.0)}));
    PrimFunc f = make_func("casts", {x, to_i32, to_f64, bits, back, nz, from_bool}, 1, body);
    std::vector<float> xv_host = {-2.7f, 2.7f, 0.0f, -0.0f, kNaN, 1e6f, -0.5f, 3.5f};
    std::vector<int32_t> iv(n), bv(n);
    std::vector<double> dv(n);
    std::vector<float> backv(n), fb(n);
    std::vector<uint8_t> nzv(n, 77);
    auto m = compile_cpu({f});
    std::vector<void*> args = {xv_host.data(), iv.data(),  dv.data(), bv.data(),
                               backv.data(),   nzv.data(), fb.data()};
    m->get_function("casts")(args.data());
    for (int64_t j = 0; j < n; ++j) {
      float v = xv_host[j];
      int32_t want_bits;
      std::memcpy(&want_bits, &v, 4);
      EXPECT_EQ(bv[j], want_bits) << j;
      EXPECT_EQ(std::memcmp(&backv[j], &v, 4), 0) << j;
      EXPECT_EQ(nzv[j], v != 0.0f || std::isnan(v) ? 1 : 0) << j;  // stored as one byte 0/1
      bool neg = (v != 0.0f || std::isnan(v)) && v < 0.0f;
      EXPECT_FLOAT_EQ(fb[j], neg ? 11.0f : 10.0f) << j;
      if (std::isnan(v)) continue;  // float->int of NaN is undefined, as in C and torch
      EXPECT_EQ(iv[j], static_cast<int32_t>(v)) << j;  // truncation toward zero
      EXPECT_DOUBLE_EQ(dv[j], static_cast<int32_t>(v) * 0.5) << j;
    }
  }
}

// int8 and uint8 (quantized tensors): arithmetic wraps, uint8 compares, divides, takes
// maxima and widens unsigned, and a float becomes the int32 value wrapped, as PyTorch
// converts; the same in scalar and vector code (64 lanes of i8 at 512 bits, 32 at 256).
TEST(CodegenCpu, EightBitIntegersWrapAndUint8IsUnsigned) {
  const int64_t n = 70;  // a vector's worth and a tail at either width
  auto a = make_buffer("a", DType::Int8, {n});
  auto u = make_buffer("u", DType::UInt8, {n});
  auto x = make_buffer("x", DType::Float32, {n});
  auto sum = make_buffer("sum", DType::Int8, {n});
  auto udiv = make_buffer("udiv", DType::UInt8, {n});
  auto umax = make_buffer("umax", DType::UInt8, {n});
  auto wide = make_buffer("wide", DType::Int32, {n});
  auto from_f = make_buffer("from_f", DType::Int8, {n});
  auto ufrom_f = make_buffer("ufrom_f", DType::UInt8, {n});
  auto less = make_buffer("less", DType::Bool, {n});
  for (ForKind kind : {ForKind::Serial, ForKind::Vectorized}) {
    PrimVar i("i");
    PrimExpr av = load(a, i), uv = load(u, i), xv = load(x, i);
    Stmt body = for_loop(
        i, 0, n, kind,
        seq({store(sum, i, av + av), store(udiv, i, uv / make_const(DType::UInt8, 3)),
             store(umax, i, max(uv, make_const(DType::UInt8, 100))),
             store(wide, i, cast(DType::Int32, uv) + cast(DType::Int32, av)),
             store(from_f, i, cast(DType::Int8, xv)), store(ufrom_f, i, cast(DType::UInt8, xv)),
             store(less, i, uv < make_const(DType::UInt8, 200))}));
    PrimFunc f =
        make_func("eight_bit", {a, u, x, sum, udiv, umax, wide, from_f, ufrom_f, less}, 3, body);
    std::vector<int8_t> av_h(n), sum_h(n), from_h(n);
    std::vector<uint8_t> uv_h(n), udiv_h(n), umax_h(n), ufrom_h(n), less_h(n);
    std::vector<float> xv_h(n);
    std::vector<int32_t> wide_h(n);
    for (int64_t j = 0; j < n; ++j) {
      av_h[j] = static_cast<int8_t>(j * 37 - 128);
      uv_h[j] = static_cast<uint8_t>(j * 53 + 7);
      xv_h[j] = (j - 35) * 9.75f;  // -341.25 .. 331.5: past both types' ranges
    }
    std::vector<void*> args = {av_h.data(),    uv_h.data(),   xv_h.data(),   sum_h.data(),
                               udiv_h.data(),  umax_h.data(), wide_h.data(), from_h.data(),
                               ufrom_h.data(), less_h.data()};
    run(f, args);
    for (int64_t j = 0; j < n; ++j) {
      const int32_t as_int = static_cast<int32_t>(xv_h[j]);
      EXPECT_EQ(sum_h[j], static_cast<int8_t>(av_h[j] * 2)) << j;
      EXPECT_EQ(udiv_h[j], uv_h[j] / 3) << j;
      EXPECT_EQ(umax_h[j], std::max<int>(uv_h[j], 100)) << j;
      EXPECT_EQ(wide_h[j], int32_t{uv_h[j]} + av_h[j]) << j;
      EXPECT_EQ(from_h[j], static_cast<int8_t>(as_int)) << j;
      EXPECT_EQ(ufrom_h[j], static_cast<uint8_t>(as_int)) << j;
      EXPECT_EQ(less_h[j], uv_h[j] < 200 ? 1 : 0) << j;
    }
  }
}

// out[i] = dot(acc[i], a[i], b[i]) over `rows` vectors of `lanes` lanes of `acc_type` (serial
// when lanes is 1): Intrinsic::DotU8S8 (int32 sums) or DotBF16 (float32 sums) of int32 words.
PrimFunc dot_func(Intrinsic dot, DType acc_type, const char* name, int64_t rows, int64_t lanes) {
  const int64_t n = rows * lanes;
  auto acc = make_buffer("acc", acc_type, {n});
  auto a = make_buffer("a", DType::Int32, {n});
  auto b = make_buffer("b", DType::Int32, {n});
  auto out = make_buffer("out", acc_type, {n});
  PrimVar r("r"), l("l");
  PrimExpr i = r * lanes + l;
  Stmt body =
      for_loop(r, 0, rows, ForKind::Serial,
               for_loop(l, 0, lanes, lanes > 1 ? ForKind::Vectorized : ForKind::Serial,
                        store(out, i, prim_call(dot, {load(acc, i), load(a, i), load(b, i)}))));
  return make_func(name, {acc, a, b, out}, 3, body);
}

PrimFunc dot_u8s8_func(int64_t rows, int64_t lanes) {
  return dot_func(Intrinsic::DotU8S8, DType::Int32, "dot_u8s8", rows, lanes);
}

// Exact (no saturation, unlike vpmaddubsw) in scalar and vector code on the host, at every
// extreme byte; one vpdpbusd per vector where the CPU has VNNI at that width (AVX-512 VNNI,
// or AVX-VNNI's VEX form at 256 bits), vpmaddwd elsewhere (the next test; compile only here).
TEST(CodegenCpu, DotU8S8IsExactAndVnniWhereTheCpuHasIt) {
  const int64_t rows = 6;
  for (int64_t lanes : {1, 8, 12, 16}) {  // 12: in pieces of 8, the last padded
    const int64_t n = rows * lanes;
    std::vector<int32_t> acc(n), a(n), b(n), out(n, 0);
    const uint8_t extremes[] = {0, 1, 127, 128, 255, 200, 3, 64};
    for (int64_t i = 0; i < n; ++i) {
      acc[i] = static_cast<int32_t>(i * 7919 - 100000);
      uint32_t ua = 0, ub = 0;
      for (int j = 0; j < 4; ++j) {
        ua |= uint32_t{extremes[(i + j) % 8]} << (8 * j);
        ub |= uint32_t{extremes[(i * 3 + j + 1) % 8]} << (8 * j);
      }
      std::memcpy(&a[i], &ua, 4);
      std::memcpy(&b[i], &ub, 4);
    }
    run(dot_u8s8_func(rows, lanes), {acc.data(), a.data(), b.data(), out.data()});
    for (int64_t i = 0; i < n; ++i) {
      int64_t want = acc[i];
      for (int j = 0; j < 4; ++j)
        want += int64_t{static_cast<uint8_t>(static_cast<uint32_t>(a[i]) >> (8 * j))} *
                static_cast<int8_t>(static_cast<uint32_t>(b[i]) >> (8 * j));
      EXPECT_EQ(out[i], want) << "lanes " << lanes << " element " << i;
    }
  }
  const struct {
    const char* cpu;
    int64_t lanes;
    const char* vnni;  // the register vpdpbusd works on, or null: no vpdpbusd
  } cases[] = {{"znver4", 16, "zmm"},          {"cascadelake", 16, "zmm"}, {"alderlake", 8, "ymm"},
               {"znver4", 8, "ymm"},           {"znver4", 12, "ymm"},      {"znver3", 8, nullptr},
               {"skylake-avx512", 16, nullptr}};
  for (const auto& c : cases) {
    CpuOptions options;
    options.cpu = c.cpu;
    const std::string asm_text =
        compile_cpu({dot_u8s8_func(rows, c.lanes)}, options)->get_source("asm");
    const bool found = asm_text.find("vpdpbusd") != std::string::npos;
    EXPECT_EQ(found, c.vnni != nullptr) << c.cpu << " at " << c.lanes << " lanes";
    if (c.vnni)
      EXPECT_TRUE(std::regex_search(asm_text, std::regex(std::string("vpdpbusd[^\\n]*%") + c.vnni)))
          << c.cpu;
  }
}

// Whether this host has each of the instruction-set features `names` (LLVM's names).
bool host_has(const std::vector<std::string>& names) {
  for (const std::string& name : names)
    if (runtime::host_has_cpu_feature(name) != true) return false;
  return true;
}

// Words for a dot's numerics: every pair of bytes (a below a_values, any b) in each byte
// position of a word, after 16 words of the extremes (4 * amax * -128 and 4 * amax * 127);
// `want` the exact sums.
struct DotWords {
  std::vector<int32_t> acc, a, b;
  std::vector<int64_t> want;
};

DotWords dot_words(int64_t a_values) {
  const int64_t pairs = a_values * 256, extremes = 16;
  const int64_t words = extremes + pairs;
  const uint32_t amax = a_values == 256 ? 0xFFFFFFFF : 0x7F7F7F7F;
  DotWords d{std::vector<int32_t>(words), std::vector<int32_t>(words), std::vector<int32_t>(words),
             std::vector<int64_t>(words)};
  for (int64_t w = 0; w < words; ++w) {
    uint32_t ua = 0, ub = 0;
    if (w >= extremes) {  // pairs base .. base + 3, rotated by p / (pairs / 4)
      const int64_t p = w - extremes, base = 4 * (p % (pairs / 4)), rotation = p / (pairs / 4);
      for (int j = 0; j < 4; ++j) {
        const int64_t k = base + (j + rotation) % 4;
        ua |= static_cast<uint32_t>(k % a_values) << (8 * j);
        ub |= static_cast<uint32_t>(k / a_values) << (8 * j);
      }
    } else {
      const uint32_t as[] = {amax, amax, 0, 0x80808080 & amax};
      const uint32_t bs[] = {0x80808080, 0x7F7F7F7F, 0x80808080, 0x807F807F};
      ua = as[w % 4];
      ub = bs[w % 4];
    }
    std::memcpy(&d.a[w], &ua, 4);
    std::memcpy(&d.b[w], &ub, 4);
    d.acc[w] = static_cast<int32_t>((w * 7919) % 2000003 - 1000000);
    d.want[w] = d.acc[w];
    for (int j = 0; j < 4; ++j)
      d.want[w] +=
          int64_t{static_cast<uint8_t>(ua >> (8 * j))} * static_cast<int8_t>(ub >> (8 * j));
  }
  return d;
}

// The instruction-set extensions each CPU's code may use: the numerics run where this host
// has them (not every feature LLVM lists for the CPU: a virtual machine hides system ones
// such as pku or mwaitx, which kernels never use).
const std::vector<std::string> kSse2;  // every x86-64 CPU
const std::vector<std::string> kSsse3 = {"sse3", "ssse3", "sse4.1", "sse4.2", "popcnt"};
const std::vector<std::string> kAvx2 = {"avx",  "avx2",  "fma",   "f16c",  "bmi",
                                        "bmi2", "lzcnt", "movbe", "popcnt"};
std::vector<std::string> avx512bw() {
  std::vector<std::string> isa = kAvx2;
  isa.insert(isa.end(), {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"});
  return isa;
}

struct DotCase {
  const char* cpu;
  int64_t lanes;
  int vector_bits;
  const char* reg;  // the register pmaddwd works on
  const std::vector<std::string>& isa;
};

// `dot` (DotU8S8 or DotU7S8) compiled for the case's CPU: pmaddwd on `reg`, the code
// matching `present` and not `absent`; exact on the host where it has the case's extensions.
void check_dot(Intrinsic dot, const DotWords& d, const DotCase& c, const char* present,
               const char* absent) {
  const auto words = static_cast<int64_t>(d.a.size());
  CpuOptions options;
  options.cpu = c.cpu;
  options.vector_bits = c.vector_bits;
  const int64_t used = words / c.lanes * c.lanes;  // the words the vectors cover
  const PrimFunc f = dot_func(dot, DType::Int32, "dot", words / c.lanes, c.lanes);
  auto m = compile_cpu({f}, options);
  const std::string asm_text = m->get_source("asm"),
                    at = std::string(c.cpu) + " " + std::to_string(c.lanes) + " lanes";
  EXPECT_TRUE(std::regex_search(asm_text, std::regex(std::string("pmaddwd[^\\n]*%") + c.reg)))
      << at;
  EXPECT_TRUE(std::regex_search(asm_text, std::regex(present))) << at;
  EXPECT_FALSE(std::regex_search(asm_text, std::regex(absent))) << at;
  if (!host_has(c.isa)) return;
  std::vector<int32_t> out(words, 0), acc = d.acc, a = d.a, b = d.b;
  std::vector<void*> args = {acc.data(), a.data(), b.data(), out.data()};
  m->get_function(f.name)(args.data());
  int64_t wrong = 0;
  for (int64_t w = 0; w < used; ++w)
    if (out[w] != d.want[w] && wrong++ < 5)
      ADD_FAILURE() << at << ": word " << w << " is " << out[w] << ", not " << d.want[w];
  EXPECT_EQ(wrong, 0) << at;
}

// Without VNNI: two vpmaddwd per vector of the CPU's width (AVX2 at 8 lanes, AVX-512BW at
// 16, SSE2 at 4; other widths in pieces of those, the last padded), never vpdpbusd nor the
// saturating vpmaddubsw. Compiled for named CPUs on every host; run where this host has the
// extensions the CPU's code may use, exact against the formula for every pair of bytes in every
// byte of the word, and for the words of the extremes (4 * 255 * -128 and 4 * 255 * 127).
TEST(CodegenCpu, DotU8S8WithoutVnniIsTwoVpmaddwdAndExact) {
  const DotWords d = dot_words(256);
  const std::vector<std::string> bw = avx512bw();
  const DotCase cases[] = {
      {"znver3", 8, 256, "ymm", kAvx2},       {"haswell", 8, 256, "ymm", kAvx2},
      {"znver1", 8, 256, "ymm", kAvx2},       {"skylake-avx512", 16, 512, "zmm", bw},
      {"skylake-avx512", 8, 256, "ymm", bw},  {"znver3", 16, 512, "ymm", kAvx2},
      {"znver3", 28, 256, "ymm", kAvx2},      {"znver3", 2, 256, "xmm", kAvx2},
      {"skylake-avx512", 20, 512, "zmm", bw}, {"x86-64", 4, 128, "xmm", kSse2}};
  for (const DotCase& c : cases)
    check_dot(Intrinsic::DotU8S8, d, c, "pmaddwd", "vpdpbusd|pmaddubsw");
}

// DotU7S8 (a's bytes below 128) without VNNI: vpmaddubsw, then vpmaddwd by ones, exact for
// every such pair of bytes and the extremes (4 * 127 * -128, 4 * 127 * 127); SSE2 alone (no
// pmaddubsw: x86-64) takes DotU8S8's form. Where the CPU has VNNI at the width, vpdpbusd.
TEST(CodegenCpu, DotU7S8WithoutVnniIsVpmaddubswThenVpmaddwdAndExactBelow128) {
  const DotWords d = dot_words(128);
  const std::vector<std::string> bw = avx512bw();
  const DotCase cases[] = {
      {"znver3", 8, 256, "ymm", kAvx2},       {"skylake", 8, 256, "ymm", kAvx2},
      {"skylake-avx512", 16, 512, "zmm", bw}, {"znver3", 28, 256, "ymm", kAvx2},
      {"znver3", 2, 256, "xmm", kAvx2},       {"x86-64-v2", 4, 128, "xmm", kSsse3}};
  for (const DotCase& c : cases)
    check_dot(Intrinsic::DotU7S8, d, c, "pmaddubsw[^\\n]*%", "vpdpbusd");
  check_dot(Intrinsic::DotU7S8, d, {"x86-64", 4, 128, "xmm", kSse2}, "pmaddwd", "pmaddubsw");
  for (const char* cpu : {"znver4", "sapphirerapids"}) {
    CpuOptions options;
    options.cpu = cpu;
    const std::string asm_text =
        compile_cpu({dot_func(Intrinsic::DotU7S8, DType::Int32, "dot", 6, 16)}, options)
            ->get_source("asm");
    EXPECT_TRUE(std::regex_search(asm_text, std::regex("vpdpbusd[^\\n]*%zmm"))) << cpu;
    EXPECT_EQ(asm_text.find("pmaddubsw"), std::string::npos) << cpu;
  }
}

PrimFunc dot_bf16_func(int64_t rows, int64_t lanes) {
  return dot_func(Intrinsic::DotBF16, DType::Float32, "dot_bf16", rows, lanes);
}

// acc + a.hi * b.hi, then + a.lo * b.lo, each sum rounded to float32: vdpbf16ps's order, and
// the fallback's two FMAs (normal values: vdpbf16ps flushes subnormals); in scalar and vector
// code on the host. vdpbf16ps where the CPU has AVX512_BF16 at that width (Zen 4, Sapphire
// Rapids; 256 bits with AVX512VL), FMAs elsewhere (Zen 3, Skylake-X; compiled only).
TEST(CodegenCpu, DotBF16SumsPairsInOrderAndIsVdpbf16psWhereTheCpuHasIt) {
  const int64_t rows = 6;
  for (int64_t lanes : {1, 8, 16}) {
    const int64_t n = rows * lanes;
    std::vector<float> acc(n), out(n, 0);
    std::vector<int32_t> a(n), b(n);
    auto word = [](float lo, float hi) {
      const uint32_t w = uint32_t{bf16_bits(lo)} | (uint32_t{bf16_bits(hi)} << 16);
      int32_t s;
      std::memcpy(&s, &w, 4);
      return s;
    };
    for (int64_t i = 0; i < n; ++i) {
      acc[i] = (i % 2 ? 1.0f : -1.0f) * (1.0f + i / 7.0f);
      a[i] = word(0.3f * (i % 11) - 1.5f, 1.0f / (i + 3));
      b[i] = word(1000.0f / (i + 1), -0.7f * (i % 5) + 0.01f);
    }
    run(dot_bf16_func(rows, lanes), {acc.data(), a.data(), b.data(), out.data()});
    for (int64_t i = 0; i < n; ++i) {
      auto half = [](int32_t w, int k) {
        return bf16_to_float(static_cast<uint16_t>(static_cast<uint32_t>(w) >> (16 * k)));
      };
      const float want =
          std::fmaf(half(a[i], 0), half(b[i], 0), std::fmaf(half(a[i], 1), half(b[i], 1), acc[i]));
      EXPECT_EQ(out[i], want) << "lanes " << lanes << " element " << i;
    }
  }
  const struct {
    const char* cpu;
    int64_t lanes;
    const char* reg;  // the register vdpbf16ps works on, or null: no vdpbf16ps
  } cases[] = {{"znver4", 16, "zmm"},
               {"sapphirerapids", 16, "zmm"},
               {"znver4", 8, "ymm"},
               {"znver3", 8, nullptr},
               {"skylake-avx512", 16, nullptr}};
  for (const auto& c : cases) {
    CpuOptions options;
    options.cpu = c.cpu;
    const std::string asm_text =
        compile_cpu({dot_bf16_func(rows, c.lanes)}, options)->get_source("asm");
    const bool found = asm_text.find("vdpbf16ps") != std::string::npos;
    EXPECT_EQ(found, c.reg != nullptr) << c.cpu << " at " << c.lanes << " lanes";
    if (c.reg)
      EXPECT_TRUE(std::regex_search(asm_text, std::regex(std::string("vdpbf16ps[^\\n]*%") + c.reg)))
          << c.cpu;
  }
}

// bfloat16 (issue 45): float32 in registers, 16 bits in memory. Loads widen exactly, stores
// and casts round to nearest even with NaN kept (c10::BFloat16's rounding, ember::bf16_bits),
// arithmetic on bfloat16 values is float32's rounded; the same in scalar and vector code,
// and constant folding (make_const) agrees with the generated cast.
TEST(CodegenCpu, BFloat16RoundsToNearestEvenAsFolding) {
  const int64_t n = 70;
  auto x = make_buffer("x", DType::Float32, {n});
  auto b = make_buffer("b", DType::BFloat16, {n});
  auto rounded = make_buffer("rounded", DType::BFloat16, {n});
  auto widened = make_buffer("widened", DType::Float32, {n});
  auto sum = make_buffer("sum", DType::BFloat16, {n});
  auto to_int = make_buffer("to_int", DType::Int32, {n});
  auto folded = make_buffer("folded", DType::BFloat16, {n});
  std::vector<float> xv(n);
  const float special[] = {
      1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -(1.0f + 0x1p-8f), 3.4e38f, 1e-40f, -0.0f,
      0.1f,           std::nanf(""),      INFINITY};
  for (int64_t j = 0; j < n; ++j) xv[j] = j < 9 ? special[j] : (j - 35) * 7.123f;
  for (ForKind kind : {ForKind::Serial, ForKind::Vectorized}) {
    PrimVar i("i");
    PrimExpr bv = load(b, i);
    std::vector<Stmt> stores = {store(rounded, i, cast(DType::BFloat16, load(x, i))),
                                store(widened, i, cast(DType::Float32, bv)),
                                store(sum, i, bv + bv * bv),
                                store(to_int, i, cast(DType::Int32, bv))};
    for (int64_t j = 0; j < 9; ++j)  // constants the builder folds, one per element
      stores.push_back(store(folded, make_const(DType::Int64, j),
                             cast(DType::BFloat16, make_const(DType::Float32, special[j]))));
    PrimFunc f = make_func("bf16", {x, b, rounded, widened, sum, to_int, folded}, 3,
                           seq({for_loop(i, 0, n, kind, seq(stores))}));
    std::vector<uint16_t> bh(n), rh(n), sh(n), fh(n);
    std::vector<float> wh(n);
    std::vector<int32_t> ih(n);
    for (int64_t j = 0; j < n; ++j) bh[j] = bf16_bits(xv[j]);
    std::vector<void*> args = {xv.data(), bh.data(), rh.data(), wh.data(),
                               sh.data(), ih.data(), fh.data()};
    run(f, args);
    EXPECT_EQ(bf16_bits(1.0f + 0x1p-8f), 0x3F80);      // a tie rounds to even (down)
    EXPECT_EQ(bf16_bits(1.0f + 3 * 0x1p-8f), 0x3F82);  // and up
    EXPECT_EQ(bf16_bits(std::nanf("")), 0x7FC0);
    EXPECT_EQ(bf16_bits(3.4e38f), 0x7F80);  // past the largest: infinity
    for (int64_t j = 0; j < n; ++j) {
      const float b_value = bf16_to_float(bh[j]);
      EXPECT_EQ(rh[j], bf16_bits(xv[j])) << j;
      EXPECT_EQ(std::isnan(wh[j]), std::isnan(b_value)) << j;
      if (!std::isnan(b_value)) EXPECT_EQ(wh[j], b_value) << j;
      const float s = b_value + bf16_to_float(bf16_bits(b_value * b_value));
      EXPECT_EQ(sh[j], bf16_bits(s)) << j;
      if (std::isfinite(b_value) && std::fabs(b_value) < 1e9f)
        EXPECT_EQ(ih[j], static_cast<int32_t>(b_value)) << j;
      if (j < 9) EXPECT_EQ(fh[j], bf16_bits(special[j])) << j;
    }
  }
}

TEST(CodegenCpu, MathIntrinsicsAndUnroll) {
  const int64_t lanes = native_vector_lanes(DType::Float32);
  auto x = make_buffer("x", DType::Float32, {lanes});
  auto out = make_buffer("out", DType::Float32, {7, lanes});
  auto ia = make_buffer("ia", DType::Int64, {lanes});
  auto iabs = make_buffer("iabs", DType::Int64, {lanes});
  PrimVar i("i"), u("u");
  PrimExpr xv = load(x, i);
  Stmt vec =
      for_loop(i, 0, lanes, ForKind::Vectorized,
               seq({store(out, i, prim_call(Intrinsic::Sqrt, {prim_call(Intrinsic::Abs, {xv})})),
                    store(out, lanes + i, prim_call(Intrinsic::Floor, {xv})),
                    store(out, 2 * lanes + i, prim_call(Intrinsic::Ceil, {xv})),
                    store(out, 3 * lanes + i, prim_call(Intrinsic::Round, {xv})),
                    store(out, 4 * lanes + i, select(prim_call(Intrinsic::IsNan, {xv}), 1.0, 0.0)),
                    store(out, 5 * lanes + i, prim_call(Intrinsic::Fma, {xv, xv, -1.0})),
                    store(out, 6 * lanes + i, xv % 0.75)}));  // float Mod is fmod
  Stmt unrolled = for_loop(u, 0, lanes, ForKind::Unrolled,
                           store(iabs, u, prim_call(Intrinsic::Abs, {load(ia, u)})));
  PrimFunc f = make_func("math", {x, ia, out, iabs}, 2, seq({vec, unrolled}));
  std::vector<float> xv_host(lanes);
  const float samples[] = {2.5f, -2.5f, 0.5f, 1.5f, -0.49f, 3.7f, kNaN, -1.0f, 16.0f};
  for (int64_t j = 0; j < lanes; ++j) xv_host[j] = samples[j % 9];
  std::vector<int64_t> iav(lanes), iabsv(lanes);
  for (int64_t j = 0; j < lanes; ++j) iav[j] = j * 5 - 20;
  std::vector<float> ov(7 * lanes);
  auto m = run(f, {xv_host.data(), iav.data(), ov.data(), iabsv.data()});
  EXPECT_NE(m->get_source("ll").find("math"), std::string::npos);
  for (int64_t j = 0; j < lanes; ++j) {
    float v = xv_host[j];
    EXPECT_EQ(iabsv[j], std::llabs(iav[j])) << j;
    EXPECT_FLOAT_EQ(ov[4 * lanes + j], std::isnan(v) ? 1.0f : 0.0f) << j;
    if (std::isnan(v)) continue;
    EXPECT_FLOAT_EQ(ov[j], std::sqrt(std::fabs(v))) << j;
    EXPECT_FLOAT_EQ(ov[lanes + j], std::floor(v)) << j;
    EXPECT_FLOAT_EQ(ov[2 * lanes + j], std::ceil(v)) << j;
    EXPECT_FLOAT_EQ(ov[3 * lanes + j], std::nearbyint(v)) << j;  // half to even
    EXPECT_FLOAT_EQ(ov[5 * lanes + j], std::fma(v, v, -1.0f)) << j;
    EXPECT_FLOAT_EQ(ov[6 * lanes + j], std::fmod(v, 0.75f)) << j;
  }
}

// 16 lanes: one 512-bit add on a CPU with AVX-512, two 256-bit halves on one without.
// Compiled for named CPUs (compile only), so every host checks both.
TEST(CodegenCpu, AsmUsesZmmWithAvx512) {
  PrimFunc f = add_func("add_wide", 16, [&](auto body) {
    PrimVar i("i");
    return for_loop(i, 0, 16, ForKind::Vectorized, body(i));
  });
  for (auto [cpu, zmm] : {std::pair{"skylake-avx512", true},
                          {"znver4", true},
                          {"znver1", false},
                          {"haswell", false}}) {
    CpuOptions options;
    options.cpu = cpu;
    options.vector_bits = 512;
    std::string text = compile_cpu({f}, options)->get_source("asm");
    EXPECT_NE(text.find("add_wide:"), std::string::npos);
    EXPECT_EQ(std::regex_search(text, std::regex("vaddps[^\n]*%zmm")), zmm) << cpu << "\n" << text;
    if (!zmm) EXPECT_TRUE(std::regex_search(text, std::regex("vaddps[^\n]*%ymm"))) << cpu;
  }
}

TEST(CodegenCpu, ErrorsAreEmberErrors) {
  PrimFunc f = add_func("k", 4, [&](auto body) {
    PrimVar i("i");
    return for_loop(i, 0, 4, ForKind::Serial, body(i));
  });
  auto m = compile_cpu({f});
  EXPECT_THROW(m->get_function("nope"), Error);
  try {
    m->get_function("nope");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nope"), std::string::npos);
  }
  EXPECT_THROW(m->get_source("ptx"), Error);
  EXPECT_THROW(compile_cpu({f, f}), Error);  // two kernels with one name
  CpuOptions bad;
  bad.cpu = "not-a-cpu";
  EXPECT_THROW(compile_cpu({f}, bad), Error);
  CpuOptions bad_level;
  bad_level.opt_level = 7;
  EXPECT_THROW(compile_cpu({f}, bad_level), Error);
}

TEST(CodegenCpu, ExplicitCpuOption) {
  PrimFunc f = add_func("add_x86", 16, [&](auto body) {
    PrimVar io("io"), ii("ii");
    return for_loop(io, 0, 4, ForKind::Serial,
                    for_loop(ii, 0, 4, ForKind::Vectorized, body(io * 4 + ii)));
  });
  CpuOptions opts;
  opts.cpu = "x86-64";
  opts.opt_level = 0;
  auto a = iota_floats(16, 1.0f, 1.0f), b = iota_floats(16, 0.5f, 0.0f);
  std::vector<float> c(16);
  auto m = compile_cpu({f}, opts);
  std::vector<void*> args = {a.data(), b.data(), c.data()};
  m->get_function("add_x86")(args.data());
  for (int j = 0; j < 16; ++j) EXPECT_FLOAT_EQ(c[j], a[j] + 0.5f) << j;
  EXPECT_EQ(m->get_source("asm").find("%zmm"), std::string::npos);
}

}  // namespace
}  // namespace ember::codegen
