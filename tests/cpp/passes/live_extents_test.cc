// lower_schedule with extents known only at run time (Schedule::live, dynamic shapes): the
// kernel reads its symbols from its shape argument, its loops run to the run's extents, its
// inputs and outputs are compact at the run's shape; compiled and run at several sizes of
// one build against a reference, with the memory past the run's output left untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <regex>
#include <vector>

#include "ember/codegen/codegen.h"
#include "ember/ir/prim_math.h"
#include "ember/ir/range_dispatch.h"
#include "ember/passes/schedule.h"
#include "ember/support/error.h"

namespace ember::passes {
namespace {

using namespace ir;

constexpr float kUntouched = -12345.0f;

// Compiles `f` and runs it on `x` with the symbols' values `sizes`; returns the output
// buffer of `out_size` floats (its static size), filled with kUntouched beforehand.
std::vector<float> run(const PrimFunc& f, std::vector<float> x, std::vector<int64_t> sizes,
                       size_t out_size) {
  auto m = codegen::compile_cpu({f});
  std::vector<float> y(out_size, kUntouched);
  std::vector<void*> args{x.data(), sizes.data(), y.data()};
  m->get_function(f.name)(args.data());
  return y;
}

// A buffer's values with room past its end: a masked vector load may read a few lanes past
// a run's data (x86 splits a vector wider than its registers, and LLVM then loads a half
// whose mask is all false unmasked, see emit_guarded_load).
std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  v.reserve(n + 64);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 97) * 0.25f - 3.0f;
  return v;
}

// y = 2x + 1 over [rows, 40] where rows is a symbol in [min_rows, 64]: rows split by 4
// with the last tile shifted back, fused with the column tiles, the columns in vectors of 8.
PrimFunc affine_rows(int64_t min_rows, SplitTail tail) {
  Tensor x = placeholder("x", {64, 40}, DType::Float32);
  Tensor y = compute("y", {64, 40}, [&](const std::vector<PrimVar>& i) {
    return x({i[0], i[1]}) * make_const(DType::Float32, 2) + make_const(DType::Float32, 1);
  });
  Schedule sch({y});
  PrimVar rows("rows");
  sch.live().symbols = {{rows, min_rows, 64}};
  sch.live().dims[x.operator->()] = {rows, PrimExpr()};
  sch.live().dims[y.operator->()] = {rows, PrimExpr()};
  Stage& s = sch[y];
  auto [io, ii] = s.split(s.axes()[0], 4, tail);
  auto [jo, ji] = s.split(s.axes()[1], 8);
  s.reorder({io, jo, ii, ji});
  s.parallel(s.fuse(io, jo));
  s.vectorize(ji);
  return lower_schedule(sch, "affine_rows", {x});
}

TEST(LiveExtents, RowsKnownAtRunTimeRunToTheirCount) {
  for (int64_t min_rows : {1, 4}) {
    PrimFunc f = affine_rows(min_rows, SplitTail::Shift);
    const std::string text = to_string(f);
    EXPECT_NE(text.find("shape_args"), std::string::npos) << text;
    // A shifted last tile needs a whole tile: runs of 4 rows or more take a copy of the
    // nest that shifts it, shorter ones (where the range has them) a copy that guards rows.
    EXPECT_NE(text.find(".start"), std::string::npos) << text;
    EXPECT_EQ(text.find("if (rows >= 4):") != std::string::npos, min_rows < 4) << text;
    EXPECT_EQ(text.find(") < rows)") != std::string::npos, min_rows < 4) << text;
    for (int64_t n : {min_rows, int64_t{2}, int64_t{5}, int64_t{17}, int64_t{64}}) {
      if (n < min_rows) continue;
      std::vector<float> x = ramp(n * 40);
      std::vector<float> y = run(f, x, {n}, 64 * 40);
      for (int64_t i = 0; i < 64 * 40; ++i)
        ASSERT_EQ(y[i], i < n * 40 ? 2 * x[i] + 1 : kUntouched) << n << " rows, at " << i;
    }
  }
}

// y[i] = sum of x[i, k] over k < cols, cols a symbol in [1, 512]: x is compact at
// [8, cols], its rows cols apart; the reduction axis indexes x's run-time dimension alone,
// so it runs to cols; its loop is split by 8 under a guard.
TEST(LiveExtents, ReductionsAndRowStridesKnownAtRunTime) {
  Tensor x = placeholder("x", {8, 512}, DType::Float32);
  IterVar k = reduce_axis(512, "k");
  Tensor y =
      compute("y", {8}, [&](const std::vector<PrimVar>& i) { return sum(x({i[0], k->var}), {k}); });
  Schedule sch({y});
  PrimVar cols("cols");
  sch.live().symbols = {{cols, 1, 512}};
  sch.live().dims[x.operator->()] = {PrimExpr(), cols};
  Stage& s = sch[y];
  s.split(s.reduce_axes()[0], 8);
  s.parallel(s.axes()[0]);
  PrimFunc f = lower_schedule(sch, "row_sums", {x});
  for (int64_t n : {1, 7, 100, 512}) {
    std::vector<float> xs = ramp(8 * n);
    std::vector<float> got = run(f, xs, {n}, 8);
    for (int64_t i = 0; i < 8; ++i) {
      double want = 0;
      for (int64_t j = 0; j < n; ++j) want += xs[i * n + j];
      EXPECT_NEAR(got[i], want, 1e-3 * (1 + std::abs(want))) << n << " columns, row " << i;
    }
  }
}

// A reduction axis that indexes a run-time dimension through an expression (every other
// column) has no run's extent that lowering can tell: a clear error, not a sum past it.
TEST(LiveExtents, AReductionThroughAnExpressionOfARunTimeDimensionIsAClearError) {
  Tensor x = placeholder("x", {8, 512}, DType::Float32);
  IterVar k = reduce_axis(256, "k");
  Tensor y = compute(
      "y", {8}, [&](const std::vector<PrimVar>& i) { return sum(x({i[0], k->var * 2}), {k}); });
  Schedule sch({y});
  PrimVar cols("cols");
  sch.live().symbols = {{cols, 1, 512}};
  sch.live().dims[x.operator->()] = {PrimExpr(), cols};
  try {
    lower_schedule(sch, "strided", {x});
    FAIL() << "lowered a reduction through an expression of a run-time dimension";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("through an expression"), std::string::npos)
        << err.what();
  }
}

// relu(x w^T) over rows of run-time count: the product is a tile computed at the output's
// tile loop (4 rows x 8 columns), as the default schedule computes a GEMM. Where the run has
// fewer rows than the last tile covers, the tile's rows are guarded by the run's shape of
// the product: given, or taken from the run-time rows of x that its row axis indexes.
TEST(LiveExtents, TilesComputedInsideRunTimeLoopsStopAtTheRunsExtent) {
  Tensor x = placeholder("x", {64, 32}, DType::Float32);
  Tensor w = placeholder("w", {24, 32}, DType::Float32);
  IterVar k = reduce_axis(32, "k");
  Tensor dense = compute("dense", {64, 24}, [&](const std::vector<PrimVar>& i) {
    return sum(x({i[0], k->var}) * w({i[1], k->var}), {k});
  });
  Tensor y = compute("y", {64, 24}, [&](const std::vector<PrimVar>& i) {
    return max(dense({i[0], i[1]}), make_const(DType::Float32, 0));
  });
  auto schedule = [&](bool product_shape) {
    auto sch = std::make_unique<Schedule>(std::vector<Tensor>{y});
    PrimVar rows("rows");
    sch->live().symbols = {{rows, 1, 64}};
    for (const Tensor& t : {x, y}) sch->live().dims[t.operator->()] = {rows, PrimExpr()};
    if (product_shape) sch->live().dims[dense.operator->()] = {rows, PrimExpr()};
    Stage& o = (*sch)[y];
    auto [io, ii] = o.split(o.axes()[0], 4);
    auto [jo, ji] = o.split(o.axes()[1], 8);
    o.reorder({io, jo, ii, ji});
    IterVar tile = o.fuse(io, jo);
    o.parallel(tile);
    o.vectorize(ji);
    (*sch)[dense].compute_at(o, tile);
    return sch;
  };
  for (bool given : {false, true}) {
    PrimFunc f = lower_schedule(*schedule(given), "tiles", {x, w});
    std::vector<float> ws = ramp(24 * 32);
    for (int64_t n : {1, 5, 17, 64}) {
      std::vector<float> xs = ramp(n * 32);
      auto m = codegen::compile_cpu({f});
      std::vector<float> got(64 * 24, kUntouched);
      std::vector<void*> args{xs.data(), ws.data(), &n, got.data()};
      m->get_function(f.name)(args.data());
      for (int64_t i = 0; i < 64; ++i)
        for (int64_t j = 0; j < 24; ++j) {
          if (i >= n) {
            ASSERT_EQ(got[i * 24 + j], kUntouched) << n << " rows, at " << i << ", " << j;
            continue;
          }
          double want = 0;
          for (int64_t q = 0; q < 32; ++q) want += double(xs[i * 32 + q]) * ws[j * 32 + q];
          EXPECT_NEAR(got[i * 24 + j], std::max(want, 0.0), 1e-3 * (1 + std::abs(want)))
              << n << " rows, at " << i << ", " << j;
        }
    }
  }
}

// relu(x w^T + b) over rows of run-time count, scheduled by the default CPU schedule for
// 256- and 512-bit vectors (register tiles of rows, the GEMM at the epilogue's tile loop),
// run at 1 to 128 rows of one build against a float64 reference: runs shorter than a tile
// through the guarded copy of the nest, longer ones through the shifted one.
TEST(LiveExtents, TheDefaultScheduleServesRowsKnownAtRunTime) {
  constexpr int64_t kRows = 128, kK = 64, kN = 48;
  for (int bits : {256, 512}) {
    Tensor x = placeholder("x", {kRows, kK}, DType::Float32);
    Tensor w = placeholder("w", {kN, kK}, DType::Float32);
    Tensor b = placeholder("b", {kN}, DType::Float32);
    IterVar k = reduce_axis(kK, "k");
    Tensor dense = compute("dense", {kRows, kN}, [&](const std::vector<PrimVar>& i) {
      return sum(x({i[0], k->var}) * w({i[1], k->var}), {k});
    });
    Tensor y = compute("y", {kRows, kN}, [&](const std::vector<PrimVar>& i) {
      return max(dense({i[0], i[1]}) + b({i[1]}), make_const(DType::Float32, 0));
    });
    Schedule sch({y});
    PrimVar rows("rows");
    sch.live().symbols = {{rows, 1, kRows}};
    for (const Tensor& t : {x, dense, y}) sch.live().dims[t.operator->()] = {rows, PrimExpr()};
    apply_default_schedule(sch, MachineModel::for_vector_bits(bits));
    PrimFunc f = lower_schedule(sch, "dense_relu", {x, w, b});
    // Runs with whole register tiles take a copy whose last tile shifts back, unguarded.
    EXPECT_TRUE(std::regex_search(to_string(f), std::regex(R"(if \(rows >= [0-9]+\):)")))
        << bits << " bits\n"
        << f;
    auto m = codegen::compile_cpu({f});
    std::vector<float> ws = ramp(kN * kK), bs = ramp(kN);
    for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{37}, kRows}) {
      std::vector<float> xs = ramp(n * kK), got(kRows * kN, kUntouched);
      std::vector<void*> args{xs.data(), ws.data(), bs.data(), &n, got.data()};
      m->get_function(f.name)(args.data());
      for (int64_t i = 0; i < kRows; ++i)
        for (int64_t j = 0; j < kN; ++j) {
          if (i >= n) {
            ASSERT_EQ(got[i * kN + j], kUntouched) << bits << " bits, " << n << " rows";
            continue;
          }
          double want = bs[j];
          for (int64_t q = 0; q < kK; ++q) want += double(xs[i * kK + q]) * ws[j * kK + q];
          ASSERT_NEAR(got[i * kN + j], std::max(want, 0.0), 1e-3 * (1 + std::abs(want)))
              << bits << " bits, " << n << " rows, at " << i << ", " << j;
        }
    }
  }
}

// softmax over rows of run-time length (attention's keys), by the default CPU schedule: the
// row statistics' sums run to the run's length, the output's vectors over it are masked
// where the run ends inside one.
TEST(LiveExtents, TheDefaultScheduleServesRowStatisticsOfRunTimeLength) {
  constexpr int64_t kRows = 4, kCols = 300;
  for (int bits : {256, 512}) {
    Tensor x = placeholder("x", {kRows, kCols}, DType::Float32);
    IterVar k1 = reduce_axis(kCols, "k1"), k2 = reduce_axis(kCols, "k2");
    Tensor mx = compute("mx", {kRows}, [&](const std::vector<PrimVar>& i) {
      return max_reduce(x({i[0], k1->var}), {k1});
    });
    Tensor total = compute("total", {kRows}, [&](const std::vector<PrimVar>& i) {
      return sum(exp(x({i[0], k2->var}) - mx({i[0]})), {k2});
    });
    Tensor y = compute("y", {kRows, kCols}, [&](const std::vector<PrimVar>& i) {
      return exp(x({i[0], i[1]}) - mx({i[0]})) / total({i[0]});
    });
    Schedule sch({y});
    PrimVar cols("cols");
    sch.live().symbols = {{cols, 1, kCols}};
    for (const Tensor& t : {x, y}) sch.live().dims[t.operator->()] = {PrimExpr(), cols};
    apply_default_schedule(sch, MachineModel::for_vector_bits(bits));
    PrimFunc f = lower_schedule(sch, "softmax", {x});
    for (int64_t n : {1, 5, 17, 256, 300}) {
      std::vector<float> xs = ramp(kRows * n);
      std::vector<float> got = run(f, xs, {n}, kRows * kCols);
      for (int64_t i = 0; i < kRows; ++i) {
        double m = -1e30, t = 0;
        for (int64_t j = 0; j < n; ++j) m = std::max(m, double(xs[i * n + j]));
        for (int64_t j = 0; j < n; ++j) t += std::exp(xs[i * n + j] - m);
        for (int64_t j = 0; j < n; ++j)
          ASSERT_NEAR(got[i * n + j], std::exp(xs[i * n + j] - m) / t, 1e-6)
              << bits << " bits, " << n << " columns, at " << i << ", " << j;
      }
      for (int64_t e = kRows * n; e < kRows * kCols; ++e)
        ASSERT_EQ(got[e], kUntouched) << bits << " bits, " << n << " columns";
    }
  }
}

// relu(x w^T) over rows of run-time count in [1, kMax], one kernel of two parts: runs of
// one row take a build scheduled for one row (a GEMV's dot products), longer ones the build
// for kMax rows (register tiles). Checked at both widths at several sizes, and the parts'
// templates named.
TEST(LiveExtents, OneKernelDispatchesAmongBuildsForPartsOfTheRange) {
  constexpr int64_t kMax = 96, kK = 64, kN = 40;
  PrimVar rows("rows");
  for (int bits : {256, 512}) {
    std::vector<std::string> templates;
    auto part = [&](int64_t lo, int64_t hi) {
      Tensor x = placeholder("x", {hi, kK}, DType::Float32);
      Tensor w = placeholder("w", {kN, kK}, DType::Float32);
      IterVar k = reduce_axis(kK, "k");
      Tensor dense = compute("dense", {hi, kN}, [&](const std::vector<PrimVar>& i) {
        return sum(x({i[0], k->var}) * w({i[1], k->var}), {k});
      });
      Tensor y = compute("y", {hi, kN}, [&](const std::vector<PrimVar>& i) {
        return max(dense({i[0], i[1]}), make_const(DType::Float32, 0));
      });
      Schedule sch({y});
      sch.live().symbols = {{rows, lo, hi}};
      for (const Tensor& t : {x, dense, y}) sch.live().dims[t.operator->()] = {rows, PrimExpr()};
      apply_default_schedule(sch, MachineModel::for_vector_bits(bits));
      templates.push_back(sch.template_name());
      return lower_schedule(sch, "part", {x, w});
    };
    PrimFunc f = dispatch_by_range("dense_relu", rows, {{1, part(1, 1)}, {kMax, part(2, kMax)}});
    EXPECT_EQ(templates[0].rfind("gemv.", 0), 0u) << templates[0];
    EXPECT_EQ(templates[1].rfind("gemm.", 0), 0u) << templates[1];
    EXPECT_NE(to_string(f).find("if (rows <= 1):"), std::string::npos) << f;
    auto m = codegen::compile_cpu({f});
    std::vector<float> ws = ramp(kN * kK);
    for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{5}, kMax}) {
      std::vector<float> xs = ramp(n * kK), got(kMax * kN, kUntouched);
      std::vector<void*> args{xs.data(), ws.data(), &n, got.data()};
      m->get_function(f.name)(args.data());
      for (int64_t i = 0; i < kMax; ++i)
        for (int64_t j = 0; j < kN; ++j) {
          if (i >= n) {
            ASSERT_EQ(got[i * kN + j], kUntouched) << bits << " bits, " << n << " rows";
            continue;
          }
          double want = 0;
          for (int64_t q = 0; q < kK; ++q) want += double(xs[i * kK + q]) * ws[j * kK + q];
          ASSERT_NEAR(got[i * kN + j], std::max(want, 0.0), 1e-3 * (1 + std::abs(want)))
              << bits << " bits, " << n << " rows, at " << i << ", " << j;
        }
    }
  }
  // Kernels that do not take the same parameters cannot share one.
  Tensor a = placeholder("a", {4}, DType::Float32);
  Tensor b = compute("b", {4}, [&](const std::vector<PrimVar>& i) { return a({i[0]}); });
  Schedule sch({b});
  sch.live().symbols = {{rows, 1, 4}};
  sch.live().dims[a.operator->()] = {rows};
  sch.live().dims[b.operator->()] = {rows};
  PrimFunc other = lower_schedule(sch, "other", {a});
  try {
    dispatch_by_range("mixed", rows, {{1, other}, {kMax, PrimFunc{"k", {}, 0, other.body}}});
    FAIL() << "dispatched among kernels with different parameters";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("parameters"), std::string::npos) << err.what();
  }
}

// A stage computed at the root over its static shape whose own axes index a run-time
// dimension of an input would read past that input: a clear error.
// A root stage whose axis indexes a run-time dimension through an expression cannot be
// given the run's extent (a clear error); given its run-time shape, it lowers.
TEST(LiveExtents, AStaticStageIndexingARunTimeDimensionIsAClearError) {
  Tensor x = placeholder("x", {64, 40}, DType::Float32);
  Tensor e = compute("e", {64, 40}, [&](const std::vector<PrimVar>& i) {
    return exp(x({(i[0] + 1) % PrimExpr(int64_t{64}), i[1]}));
  });
  IterVar k = reduce_axis(64, "k");
  Tensor y = compute("y", {40},
                     [&](const std::vector<PrimVar>& i) { return sum(e({k->var, i[0]}), {k}); });
  Schedule sch({y});
  PrimVar rows("rows");
  sch.live().symbols = {{rows, 1, 64}};
  sch.live().dims[x.operator->()] = {rows, PrimExpr()};
  sch.live().axes[k.get()] = rows;
  try {
    lower_schedule(sch, "root", {x});  // e stays a root stage over its static 64 rows
    FAIL() << "lowered a static stage over a run-time dimension";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("through an expression"), std::string::npos)
        << err.what();
  }
  sch.live().dims[e.operator->()] = {rows, PrimExpr()};  // with its run-time shape: lowered
  std::vector<float> xs = ramp(64 * 40);
  std::vector<float> got = run(lower_schedule(sch, "root", {x}), xs, {64}, 40);
  for (int64_t j = 0; j < 40; ++j) {
    double want = 0;
    for (int64_t r = 0; r < 64; ++r) want += std::exp(xs[r * 40 + j]);
    EXPECT_NEAR(got[j], want, 1e-4 * want) << j;
  }
}

}  // namespace
}  // namespace ember::passes
