#include "ember/passes/schedule.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ember/codegen/codegen.h"
#include "ember/ir/prim_math.h"
#include "ember/ir/simplify.h"
#include "ember/support/error.h"

namespace ember::passes {
namespace {

using namespace ir;

// dense(x, w) over `rows` rows followed by relu: the relu stage is the output and the dense
// is a reduction.
struct DenseRelu {
  explicit DenseRelu(int64_t rows = 4) : rows(rows) {}
  int64_t rows;
  ir::Tensor x = placeholder("x", {rows, 8}, DType::Float32);
  ir::Tensor w = placeholder("w", {36, 8}, DType::Float32);
  IterVar k = reduce_axis(8, "k");
  ir::Tensor dense = compute("dense", {rows, 36}, [&](const std::vector<PrimVar>& i) {
    return sum(x({i[0], k->var}) * w({i[1], k->var}), {k});
  });
  ir::Tensor relu = compute("relu", {rows, 36}, [&](const std::vector<PrimVar>& i) {
    return max(dense({i[0], i[1]}), make_const(DType::Float32, 0));
  });
};

std::vector<Buffer> allocations(const Stmt& s) {
  std::vector<Buffer> out;
  visit_prim(
      s, [](const PrimExpr&) {},
      [&](const Stmt& st) {
        if (auto* a = st.as<AllocateNode>()) out.push_back(a->buffer);
      });
  return out;
}

int count_stmts(const Stmt& s, StmtKind kind) {
  int n = 0;
  visit_prim(s, [](const PrimExpr&) {}, [&](const Stmt& st) { n += st.kind() == kind; });
  return n;
}

TEST(Schedule, SplitAndFuseKeepEveryIndexOnce) {
  ir::Tensor a = placeholder("a", {3, 10}, DType::Float32);
  ir::Tensor b = compute("b", {3, 10}, [&](const std::vector<PrimVar>& i) {
    return a({i[0], i[1]}) + make_const(DType::Float32, 1);
  });
  Schedule sch({b});
  Stage& s = sch[b];
  auto [jo, ji] = s.split(s.axes()[1], 4);  // 10 = 3 * 4 - 2: needs a guard
  IterVar f = s.fuse(s.axes()[0], jo);
  s.parallel(f);
  s.vectorize(ji);
  PrimFunc fn = lower_schedule(sch, "f", {a});
  std::string text = to_string(fn);
  EXPECT_NE(text.find("parallel"), std::string::npos) << text;
  EXPECT_NE(text.find("vectorized"), std::string::npos) << text;
  EXPECT_EQ(count_stmts(fn.body, StmtKind::IfThenElse), 1) << text;  // the split guard
}

TEST(Schedule, DivisibleSplitHasNoGuard) {
  ir::Tensor a = placeholder("a", {3, 16}, DType::Float32);
  ir::Tensor b = compute("b", {3, 16}, [&](const std::vector<PrimVar>& i) {
    return a({i[0], i[1]}) * make_const(DType::Float32, 2);
  });
  Schedule sch({b});
  auto [jo, ji] = sch[b].split(sch[b].axes()[1], 8);
  sch[b].vectorize(ji);
  PrimFunc fn = lower_schedule(sch, "f", {a});
  EXPECT_EQ(count_stmts(fn.body, StmtKind::IfThenElse), 0) << fn;
}

TEST(Schedule, ShiftedSplitRecomputesTheLastTileWithoutAGuard) {
  // relu rows split by 3 with the last tile shifted back (4 rows: tiles at 0 and 1), the
  // dense computed at the tile loop: its tile is 3 rows from the tile's start, no guard.
  DenseRelu g;
  Schedule sch({g.relu});
  Stage& o = sch[g.relu];
  auto [io, ii] = o.split(o.axes()[0], 3, SplitTail::Shift);
  o.reorder({io, o.axes()[1], ii});
  sch[g.dense].compute_at(o, io);
  PrimFunc fn = lower_schedule(sch, "dense_relu", {g.x, g.w});
  std::string text = to_string(fn);
  EXPECT_EQ(count_stmts(fn.body, StmtKind::IfThenElse), 0) << text;
  auto allocs = allocations(fn.body);
  ASSERT_EQ(allocs.size(), 1u) << text;
  EXPECT_EQ(allocs[0]->numel(), 3 * 36) << text;
  auto* top = fn.body.as<ForNode>();
  ASSERT_NE(top, nullptr) << text;
  EXPECT_EQ(top->extent.as<IntImmNode>()->value, 2) << text;  // ceil(4 / 3) tiles
  EXPECT_NE(text.find("min("), std::string::npos) << text;    // start = min(3 * io, 1)
  // Reduction axes and tiles larger than the axis cannot shift.
  EXPECT_THROW(sch[g.dense].split(sch[g.dense].reduce_axes()[0], 3, SplitTail::Shift),
               InternalError);
  Schedule other({g.relu});
  EXPECT_THROW(other[g.relu].split(other[g.relu].axes()[0], 5, SplitTail::Shift), InternalError);
}

TEST(Schedule, PaddedSplitAccumulatesInChunksIntoARoundedUpTile) {
  // dense [5, 8] x [36, 8]^T -> relu, tiled by 12 columns; the dense is computed at the
  // column tile, its 5 rows in tiles of 3 (padded to 6) inside chunks of 4 k steps: each
  // row is accumulated once per chunk, the padding row reads the last row, and no tile needs
  // a guard.
  DenseRelu g(5);  // 5 rows, which tiles of 3 do not divide
  ir::Tensor x = g.x, w = g.w, dense = g.dense, relu = g.relu;
  Schedule sch({relu});
  Stage& o = sch[relu];
  auto [jo, ji] = o.split(o.axes()[1], 12);
  o.reorder({jo, o.axes()[0], ji});
  Stage& d = sch[dense];
  d.compute_at(o, jo);
  auto [ko, ki] = d.split(d.reduce_axes()[0], 4);
  auto [io, ii] = d.split(d.axes()[0], 3, SplitTail::Pad);
  d.reorder({ko, io, ki, ii, d.axes()[1]});
  PrimFunc fn = lower_schedule(sch, "chunked", {x, w});
  EXPECT_EQ(count_stmts(fn.body, StmtKind::IfThenElse), 0) << fn;
  auto allocs = allocations(fn.body);
  ASSERT_EQ(allocs.size(), 1u) << fn;
  EXPECT_EQ(allocs[0]->numel(), 6 * 12) << fn;

  std::vector<float> xv(5 * 8), wv(36 * 8), out(5 * 36, -1.0f);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i % 7) - 3.0f;
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<float>(i % 5) - 2.0f;
  void* args[] = {xv.data(), wv.data(), out.data()};
  auto m = codegen::compile_cpu({fn});
  m->get_function("chunked")(args);
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < 36; ++c) {
      float want = 0;
      for (int kk = 0; kk < 8; ++kk) want += xv[r * 8 + kk] * wv[c * 8 + kk];
      EXPECT_EQ(out[r * 36 + c], std::max(want, 0.0f)) << r << ", " << c;
    }
  // A root stage has no local buffer to round up.
  Schedule root({dense});
  root[dense].split(root[dense].axes()[0], 3, SplitTail::Pad);
  EXPECT_THROW(lower_schedule(root, "root", {x, w}), InternalError);
  EXPECT_THROW(root[dense].split(root[dense].reduce_axes()[0], 3, SplitTail::Pad), InternalError);
}

TEST(Schedule, PrefetchFetchesTheNextChunkAShareAtEachIteration) {
  // The chunked dense of the test above, prefetching 4 KB of w from the first element it
  // reads in the next k chunk (k = 4 (ko + 1)), a share of 32 lines per row tile (two of
  // them); past the last chunk and past the buffer's end, which a prefetch may do.
  DenseRelu g(5);  // 5 rows, which tiles of 3 do not divide
  ir::Tensor x = g.x, w = g.w, dense = g.dense;
  Schedule sch({dense});
  Stage& d = sch[dense];
  auto [ko, ki] = d.split(d.reduce_axes()[0], 4);
  auto [io, ii] = d.split(d.axes()[0], 3, SplitTail::Guard);
  d.reorder({ko, io, ki, ii, d.axes()[1]});
  EXPECT_THROW(d.prefetch(ko, w, io, 4096), InternalError);  // the loop ahead must enclose it
  d.prefetch(io, w, ko, 4096);
  PrimFunc fn = lower_schedule(sch, "prefetched", {x, w});
  std::vector<std::string> fetched;
  visit_prim(fn.body, [&](const PrimExpr& e) {
    if (auto* c = e.as<PrimCallNode>(); c && c->op == Intrinsic::Prefetch)
      fetched.push_back(to_string(c->args[0].as<LoadNode>()->index));
  });
  ASSERT_EQ(fetched.size(), 32u) << fn;
  EXPECT_EQ(fetched[0], "(((k.o*4) + (i.o*512)) + 4)") << fn;
  EXPECT_EQ(fetched[31], "(((k.o*4) + (i.o*512)) + 500)") << fn;
  std::vector<float> xv(5 * 8, 1.0f), wv(36 * 8, 2.0f), out(5 * 36);
  void* args[] = {xv.data(), wv.data(), out.data()};
  codegen::compile_cpu({fn})->get_function("prefetched")(args);
  for (float v : out) EXPECT_EQ(v, 16.0f);
}

TEST(Schedule, DefaultScheduleTilesATransposeSoInputLinesServeManyOutputs) {
  // out[i, j, k] = x[i, k, j] + 1, 40 x 64: the vector loop along k reads x across its
  // rows, a 64-byte line a vector (16 lanes, two registers at 256 bits); 16 values of j
  // (x's contiguous axis) loop just outside it, inside the loop over k's vectors, and the
  // last tile of j (40 = 16 + 16 + 8) is shifted back, never guarded.
  ir::Tensor x = placeholder("x", {2, 64, 40}, DType::Float32);
  ir::Tensor out = compute("out", {2, 40, 64}, [&](const std::vector<PrimVar>& i) {
    return x({i[0], i[2], i[1]}) + make_const(DType::Float32, 1);
  });
  Schedule sch({out});
  apply_default_schedule(sch, MachineModel::for_vector_bits(256));
  PrimFunc fn = lower_schedule(sch, "transpose", {x});
  EXPECT_EQ(count_stmts(fn.body, StmtKind::IfThenElse), 0) << fn;
  std::string text = to_string(fn);
  size_t k_out = text.find("for k.o in [0, 4)"), j_in = text.find("for j.i in [0, 16)"),
         k_vec = text.find("for k.i in [0, 16) vectorized");
  ASSERT_NE(k_out, std::string::npos) << fn;
  EXPECT_LT(k_out, j_in) << fn;
  EXPECT_LT(j_in, k_vec) << fn;
  std::vector<float> xv(2 * 64 * 40), ov(2 * 40 * 64, -1.0f);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i);
  void* args[] = {xv.data(), ov.data()};
  auto m = codegen::compile_cpu({fn});
  m->get_function("transpose")(args);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 40; ++j)
      for (int k = 0; k < 64; ++k)
        ASSERT_EQ(ov[(i * 40 + j) * 64 + k], xv[(i * 64 + k) * 40 + j] + 1) << i << j << k;
}

// A contiguous axis of 16 to 31 values is tiled too (20 = 16 + 4, the last tile shifted):
// the code generator reads its blocks transposed in registers (a blocked -> NCHW layout
// change of 31 channels ran 3.5x slower untiled).
TEST(Schedule, DefaultScheduleTilesAShortTransposedAxis) {
  ir::Tensor x = placeholder("x", {64, 20}, DType::Float32);
  ir::Tensor out = compute("out", {20, 64}, [&](const std::vector<PrimVar>& i) {
    return x({i[1], i[0]}) * make_const(DType::Float32, 2);
  });
  Schedule sch({out});
  apply_default_schedule(sch, MachineModel::for_vector_bits(256));
  PrimFunc fn = lower_schedule(sch, "transpose", {x});
  EXPECT_NE(to_string(fn).find("for i.i in [0, 16)"), std::string::npos) << fn;
  // Each row's vector is a whole 64-byte line (two registers at 256 bits): the tile's rows
  // may share one L1 set, and a half line written is evicted before its other half.
  EXPECT_NE(to_string(fn).find("[0, 16) vectorized"), std::string::npos) << fn;
  std::vector<float> xv(64 * 20), ov(20 * 64, -1.0f);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i);
  void* args[] = {xv.data(), ov.data()};
  auto m = codegen::compile_cpu({fn});
  m->get_function("transpose")(args);
  for (int j = 0; j < 20; ++j)
    for (int k = 0; k < 64; ++k) ASSERT_EQ(ov[j * 64 + k], 2 * xv[k * 20 + j]) << j << " " << k;
}

// An elementwise value that is a long dependency chain (tanh: an exp and a division) runs
// its vector loop two registers wide, so that two chains issue side by side; a short one
// (x + 1) keeps one register. 40 = 32 + 8: the last tile shifts back over computed columns.
TEST(Schedule, LongChainsRunTwoRegistersAVector) {
  ir::Tensor x = placeholder("x", {3, 40}, DType::Float32);
  auto build = [&](bool long_chain) {
    ir::Tensor out = compute("out", {3, 40}, [&](const std::vector<PrimVar>& i) {
      PrimExpr v = x({i[0], i[1]});
      return long_chain ? tanh(v) : v + make_const(DType::Float32, 1);
    });
    Schedule sch({out});
    apply_default_schedule(sch, MachineModel::for_vector_bits(256));
    return lower_schedule(sch, long_chain ? "tanh" : "plus_one", {x});
  };
  PrimFunc wide = build(true), narrow = build(false);
  EXPECT_NE(to_string(wide).find("[0, 16) vectorized"), std::string::npos) << wide;
  EXPECT_NE(to_string(narrow).find("[0, 8) vectorized"), std::string::npos) << narrow;
  std::vector<float> xv(3 * 40), ov(3 * 40, -2.0f);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = 0.1f * static_cast<float>(i) - 6.0f;
  void* args[] = {xv.data(), ov.data()};
  auto m = codegen::compile_cpu({wide});
  m->get_function("tanh")(args);
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_NEAR(ov[i], std::tanh(xv[i]), 2e-6) << i;
  // Likewise a stage computed at the root, before the row sums that read it.
  IterVar k = reduce_axis(40, "k");
  ir::Tensor t =
      compute("t", {3, 40}, [&](const std::vector<PrimVar>& i) { return tanh(x({i[0], i[1]})); });
  ir::Tensor sums = compute(
      "sums", {3}, [&](const std::vector<PrimVar>& i) { return sum(t({i[0], k->var}), {k}); });
  Schedule sch({sums});
  apply_default_schedule(sch, MachineModel::for_vector_bits(256));
  PrimFunc rows = lower_schedule(sch, "row_sums", {x});
  EXPECT_NE(to_string(rows).find("[0, 16) vectorized"), std::string::npos) << rows;
  // And an output that reads row statistics across its vectors (a norm -> tanh): its
  // vectors are its own, so the chain widens them too; the statistics' values still hold.
  IterVar j = reduce_axis(40, "j");
  ir::Tensor mean = compute(
      "mean", {3}, [&](const std::vector<PrimVar>& i) { return sum(x({i[0], j->var}), {j}); });
  ir::Tensor centred = compute("centred", {3, 40}, [&](const std::vector<PrimVar>& i) {
    return tanh(x({i[0], i[1]}) - mean({i[0]}) * make_const(DType::Float32, 1.0 / 40));
  });
  Schedule norm({centred});
  apply_default_schedule(norm, MachineModel::for_vector_bits(256));
  PrimFunc nf = lower_schedule(norm, "centred_tanh", {x});
  EXPECT_NE(to_string(nf).find("[0, 16) vectorized"), std::string::npos) << nf;
  codegen::compile_cpu({nf})->get_function("centred_tanh")(args);
  for (int r = 0; r < 3; ++r) {
    double m = 0;
    for (int c = 0; c < 40; ++c) m += xv[r * 40 + c] / 40.0;
    for (int c = 0; c < 40; ++c)
      EXPECT_NEAR(ov[r * 40 + c], std::tanh(xv[r * 40 + c] - m), 2e-6) << r << " " << c;
  }
}

TEST(Schedule, DefaultScheduleComputesTheAnchorTileInsideTheEpilogueLoop) {
  DenseRelu g;
  Schedule sch({g.relu});
  apply_default_schedule(sch, MachineModel::for_vector_bits(512));  // 16 float32 lanes
  PrimFunc fn = lower_schedule(sch, "dense_relu", {g.x, g.w});
  // One loop nest, one local register tile (each vector of w is reused for the tile's rows
  // of x): no buffer for the whole dense output. 36 columns = 9 x 4: quarter-width vectors
  // divide them, so the machine model picks 4 rows x 3 vectors of 4 lanes and no tile needs
  // a guard or a masked tail.
  auto allocs = allocations(fn.body);
  ASSERT_EQ(allocs.size(), 1u) << fn;
  EXPECT_EQ(allocs[0]->numel(), 4 * 3 * 4) << fn;
  EXPECT_NE(to_string(fn).find("unrolled"), std::string::npos) << fn;
  if (getenv("SHOW")) std::cout << fn;
  auto* top = fn.body.as<ForNode>();
  ASSERT_NE(top, nullptr) << fn;
  EXPECT_EQ(top->for_kind, ForKind::Parallel);
  EXPECT_EQ(count_stmts(fn.body, StmtKind::IfThenElse), 0) << fn;
}

// A sum of dot_bf16 steps (nn.dense_bf16) where the CPU has no vdpbf16ps runs each as two
// FMAs of the words' widened halves, which take a register more per loaded vector and per
// broadcast: its register tile is sized for four registers fewer (AVX2: 4 x 2 vectors, 8
// accumulators, not 12, whose tile spilled inside the reduction loop).
TEST(Schedule, Bf16DotSumsWithoutVdpbf16psTakeSmallerTiles) {
  auto tile = [](bool bf16_dot) {
    ir::Tensor x = placeholder("x", {64, 32}, DType::Int32);
    ir::Tensor w = placeholder("w", {96, 32}, DType::Int32);
    IterVar k = reduce_axis(32, "k");
    ir::Tensor dense = compute("dense_bf16", {64, 96}, [&](const std::vector<PrimVar>& i) {
      return sum(prim_call(Intrinsic::DotBF16,
                           {make_const(DType::Float32, 0), x({i[0], k->var}), w({i[1], k->var})}),
                 {k});
    });
    Schedule sch({dense});
    MachineModel m = MachineModel::for_vector_bits(256);
    m.bf16_dot = bf16_dot;
    apply_default_schedule(sch, m);
    auto allocs = allocations(lower_schedule(sch, "dense_bf16", {x, w}).body);
    return allocs.size() == 1 ? allocs[0]->numel() / m.lanes(DType::Float32) : 0;
  };
  EXPECT_EQ(tile(true), 12);
  EXPECT_EQ(tile(false), 8);
}

// One row whose weights are [N, K] rows (a GEMV that AlterOpLayout left unpacked): a
// register tile along N would gather each vector of w across 16 rows. Each output is a dot
// product instead: at 512 bits its reduction loop innermost over contiguous rows of x and w
// (LLVM vectorizes it), nothing vectorized along N in the dense.
TEST(Schedule, DefaultScheduleComputesAOneRowDenseAsDotProducts) {
  DenseRelu g(1);
  Schedule sch({g.relu});
  apply_default_schedule(sch, MachineModel::for_vector_bits(512));
  PrimFunc fn = lower_schedule(sch, "gemv_relu", {g.x, g.w});
  std::string text = to_string(fn);
  const size_t j = text.find("for dense.j in"), k = text.find("for dense.k in");
  ASSERT_NE(j, std::string::npos) << fn;
  ASSERT_NE(k, std::string::npos) << fn;
  EXPECT_LT(j, k) << fn;
  const size_t out = text.find("for j.i in", k);  // the relu's loop, after the dense's
  ASSERT_NE(out, std::string::npos) << fn;
  EXPECT_EQ(text.substr(j, out - j).find("vectorized"), std::string::npos) << fn;
  EXPECT_EQ(text.find("partial"), std::string::npos) << fn;
  // At 256 bits LLVM's vectorized row runs at half the L2's pace: a tile's 8 rows accumulate
  // vector partials together, the rows unrolled inside the reduction loop, then each sums
  // its lanes.
  DenseRelu g2(1);
  Schedule sch2({g2.relu});
  apply_default_schedule(sch2, MachineModel::for_vector_bits(256));
  PrimFunc fn2 = lower_schedule(sch2, "gemv_relu", {g2.x, g2.w});
  text = to_string(fn2);
  const size_t ko = text.find("for dense.partial.k.o in [0, 1)"),
               rows = text.find("for dense.partial.j.i in [0, 8) unrolled", ko),
               lanes = text.find("for dense.partial.dense.f in [0, 8) vectorized", rows),
               sum = text.find("for dense.dense.lane in [0, 8)", lanes);
  EXPECT_NE(ko, std::string::npos) << fn2;
  EXPECT_NE(rows, std::string::npos) << fn2;
  EXPECT_NE(lanes, std::string::npos) << fn2;
  EXPECT_NE(sum, std::string::npos) << fn2;
  if (getenv("SHOW")) std::cout << fn << fn2;
}

// split_reduction (the GPU's split-K in a block): dense over k = 8 as 2 groups of chunks of
// 2, k = (ko * 2 + g) * 2 + ki; the partial [g, rows, cols] sums each group's chunks, the
// dense becomes partial[0] + partial[1], and the result is the dense's. Factors that do
// not divide k are refused.
TEST(Schedule, SplitReductionSumsInterleavedChunksPerGroup) {
  DenseRelu g(3);
  Schedule sch({g.relu});
  ir::Tensor part = sch.split_reduction(g.dense, 2, 2);
  EXPECT_EQ(part.shape(), (std::vector<int64_t>{2, 3, 36}));
  auto* red = sch[part].body().as<ReduceNode>();
  ASSERT_NE(red, nullptr);
  ASSERT_EQ(red->axes.size(), 2u);
  EXPECT_EQ(red->axes[0]->extent, 2);  // ko
  EXPECT_EQ(red->axes[1]->extent, 2);  // ki
  EXPECT_EQ(sch[g.dense].body().as<ReduceNode>(), nullptr);
  sch[g.dense].compute_inline();
  PrimFunc fn = lower_schedule(sch, "split", {g.x, g.w});
  std::vector<float> xv(3 * 8), wv(36 * 8), out(3 * 36, -1.0f);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i % 7) - 3.0f;
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<float>(i % 5) - 2.0f;
  void* args[] = {xv.data(), wv.data(), out.data()};
  codegen::compile_cpu({fn})->get_function("split")(args);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 36; ++c) {
      float want = 0;
      for (int kk = 0; kk < 8; ++kk) want += xv[r * 8 + kk] * wv[c * 8 + kk];
      EXPECT_EQ(out[r * 36 + c], std::max(want, 0.0f)) << r << ", " << c;
    }
  DenseRelu h;
  Schedule bad({h.relu});
  EXPECT_THROW(bad.split_reduction(h.dense, 3, 1), InternalError);
  EXPECT_THROW(bad.split_reduction(h.dense, 2, 3), InternalError);
  EXPECT_THROW(bad.split_reduction(h.relu, 2, 2), InternalError);  // not a sum
}

TEST(Schedule, InlineRejectsReductions) {
  DenseRelu g;
  Schedule sch({g.relu});
  EXPECT_THROW(sch[g.dense].compute_inline(), InternalError);
}

// softmax-like: out[i, j] = a[i, j] / s[i], s[i] = sum_j a[i, j], scheduled for AVX-512.
PrimFunc row_sum_norm(int64_t rows, int64_t cols) {
  ir::Tensor a = placeholder("a", {rows, cols}, DType::Float32);
  IterVar r = reduce_axis(cols, "r");
  ir::Tensor s = compute(
      "s", {rows}, [&](const std::vector<PrimVar>& i) { return sum(a({i[0], r->var}), {r}); });
  ir::Tensor out = compute("out", {rows, cols}, [&](const std::vector<PrimVar>& i) {
    return a({i[0], i[1]}) / s({i[0]});
  });
  Schedule sch({out});
  apply_default_schedule(sch, MachineModel::for_vector_bits(512));
  return lower_schedule(sch, "norm", {a});
}

TEST(Schedule, ComputeAtRegionIsOneRowForARowReduction) {
  PrimFunc fn = row_sum_norm(5, 2000);
  auto allocs = allocations(fn.body);
  ASSERT_EQ(allocs.size(), 1u) << fn;
  EXPECT_EQ(allocs[0]->numel(), 1) << fn;  // computed once per row, not per vector
}

TEST(Schedule, ShortRowsShareATileThatComputesTheirStatisticsFirst) {
  // 16 values a row: a tile of 6 rows (under 4 KB) sums all six, then divides them, so the
  // rows' dependent sums overlap instead of each waiting in front of its own epilogue.
  PrimFunc fn = row_sum_norm(12, 16);
  auto allocs = allocations(fn.body);
  ASSERT_EQ(allocs.size(), 1u) << fn;
  EXPECT_EQ(allocs[0]->numel(), 12) << fn;
  auto* top = fn.body.as<ForNode>();
  ASSERT_NE(top, nullptr) << fn;
  EXPECT_EQ(top->for_kind, ForKind::Parallel);
  // Rows of 2000 values stay one per tile (row_sum_norm(5, 2000) above); 12 x 600 floats
  // takes blocks of a divisor of 12 rows that fit 4 KB: one row (2.4 KB).
  EXPECT_EQ(allocations(row_sum_norm(12, 600).body)[0]->numel(), 1);
  EXPECT_EQ(allocations(row_sum_norm(12, 200).body)[0]->numel(), 4);  // 3.2 KB
  // A statistic that reads a long row for a short output row: s[i, k] = sum_r a[i, r, k]
  // reads 768 x 4 values for 4 outputs; its rows keep a tile each (and the threads).
  ir::Tensor a = placeholder("a", {128, 768, 4}, DType::Float32);
  IterVar r = reduce_axis(768, "r");
  ir::Tensor s = compute("s", {128, 4}, [&](const std::vector<PrimVar>& i) {
    return sum(a({i[0], r->var, i[1]}), {r});
  });
  ir::Tensor out = compute("out", {128, 4}, [&](const std::vector<PrimVar>& i) {
    return s({i[0], i[1]}) * make_const(DType::Float32, 2.0);
  });
  Schedule sch({out});
  apply_default_schedule(sch, MachineModel::for_vector_bits(512));
  PrimFunc long_rows = lower_schedule(sch, "sum_squares_like", {a});
  auto* tile_loop = long_rows.body.as<ForNode>();
  ASSERT_NE(tile_loop, nullptr) << long_rows;
  EXPECT_EQ(tile_loop->for_kind, ForKind::Parallel) << long_rows;
  int64_t tiles = 0;
  ASSERT_TRUE(as_int(tile_loop->extent, &tiles)) << long_rows;
  EXPECT_GE(tiles, 2) << long_rows;
}

// An output without reductions takes its rows as the parallel grain (row_blocks: whole rows,
// short ones blocked) from the model's min_parallel_rows on, 64 in the pinned models; with
// fewer rows its tiles are vectors of a row (vector_tiles), more of them for the threads.
TEST(Schedule, WholeRowsAreTheParallelGrainFromTheModelsMinimumOn) {
  auto tiling = [](int64_t rows, const MachineModel& m) {
    ir::Tensor x = placeholder("x", {rows, 64}, DType::Float32);
    ir::Tensor out = compute("out", {rows, 64}, [&](const std::vector<PrimVar>& i) {
      return x({i[0], i[1]}) + make_const(DType::Float32, 1);
    });
    Schedule sch({out});
    apply_default_schedule(sch, m);
    return sch.template_name();
  };
  for (int bits : {256, 512}) {
    MachineModel m = MachineModel::for_vector_bits(bits);
    SCOPED_TRACE(std::to_string(bits) + " bits");
    EXPECT_EQ(m.min_parallel_rows, 64);
    EXPECT_EQ(tiling(64, m), "elementwise.row_blocks");
    EXPECT_EQ(tiling(63, m), "elementwise.vector_tiles");
    m.min_parallel_rows = 32;
    EXPECT_EQ(tiling(63, m), "elementwise.row_blocks");
    EXPECT_EQ(tiling(31, m), "elementwise.vector_tiles");
  }
}

}  // namespace
}  // namespace ember::passes
