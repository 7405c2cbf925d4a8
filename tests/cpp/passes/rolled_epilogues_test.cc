// roll_long_epilogues (rolled_epilogues.h): a register tile's long epilogue copied out and
// run as a rolled loop, which the code generator keeps rolled in a function of its own;
// values unchanged.
#include "ember/passes/rolled_epilogues.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ember/codegen/codegen.h"
#include "ember/ir/chains.h"
#include "ember/ir/prim_math.h"
#include "ember/passes/annotate_loops.h"

namespace ember::passes {
namespace {

using namespace ir;

constexpr int64_t kRows = 3, kLanes = 8;
const MachineModel k256 = MachineModel::for_vector_bits(256);

// A `rows` x 8 register tile `acc` += 2 x, then out (of type `out_type`) = epilogue(acc),
// the epilogue's loop `kind`.
PrimFunc tile_func(const std::function<PrimExpr(PrimExpr)>& epilogue,
                   ForKind kind = ForKind::Unrolled, int64_t rows = kRows,
                   DType out_type = DType::Float32) {
  Buffer x = make_buffer("x", DType::Float32, {rows * kLanes});
  Buffer out = make_buffer("out", out_type, {rows * kLanes});
  Buffer acc = make_buffer("acc", DType::Float32, {rows * kLanes}, BufferScope::Local);
  PrimVar i("i"), j("j"), ei("ei"), ej("ej");
  auto at = [](PrimExpr r, PrimExpr c) { return r * kLanes + c; };
  auto tile_loop = [&](PrimExpr value) {
    return for_loop(i, 0, rows, ForKind::Unrolled,
                    for_loop(j, 0, kLanes, ForKind::Vectorized, store(acc, at(i, j), value)));
  };
  // Zeroed, then accumulated (the code generator calls rolled loops in such kernels).
  Stmt fill =
      seq({tile_loop(make_const(DType::Float32, 0)),
           tile_loop(load(acc, at(i, j)) + load(x, at(i, j)) * make_const(DType::Float32, 2))});
  Stmt apply =
      for_loop(ei, 0, rows, kind,
               for_loop(ej, 0, kLanes, ForKind::Vectorized,
                        store(out, at(ei, ej), cast(out_type, epilogue(load(acc, at(ei, ej)))))));
  PrimFunc f;
  f.name = "tile";
  f.params = {x, out};
  f.num_inputs = 1;
  f.body = allocate(acc, seq({fill, apply}));
  return f;
}

std::vector<float> run(const PrimFunc& f, std::string* ll = nullptr) {
  std::vector<float> x(kRows * kLanes), out(x.size());
  for (size_t k = 0; k < x.size(); ++k) x[k] = 0.1f * static_cast<float>(k) - 1.0f;
  std::vector<void*> args{x.data(), out.data()};
  // As the kernel pipeline hands it to the code generator: annotated (AnnotateLoops).
  auto m = codegen::compile_cpu({annotate_loops(f, MachineModel::for_vector_bits(256))});
  m->get_function("tile")(args.data());
  if (ll) *ll = m->get_source("ll");
  return out;
}

TEST(RolledEpilogues, ALongEpilogueRunsRolledOverACopyOfTheTile) {
  PrimFunc f = tile_func([](PrimExpr v) { return exp(v); });
  PrimFunc g = roll_long_epilogues(f, k256);
  // The epilogue now reads a copy of the tile in a serial loop the code generator keeps rolled.
  const ForNode* epilogue = nullptr;
  bool copied = false;
  visit_prim(
      g.body, [](const PrimExpr&) {},
      [&](const Stmt& s) {
        auto* l = s.as<ForNode>();
        if (l && is_long_chain_loop(l)) epilogue = l;
        if (auto* st = s.as<StoreNode>(); st && st->buffer->name == "acc.out")
          copied = st->value.as<LoadNode>() && st->value.as<LoadNode>()->buffer->name == "acc";
      });
  ASSERT_NE(epilogue, nullptr) << g;
  EXPECT_TRUE(copied) << g;
  // After the tile's accumulation, AnnotateLoops marks it to be emitted as a call.
  EXPECT_NE(
      to_string(annotate_loops(g, MachineModel::for_vector_bits(256)).body).find(" rolled_call:"),
      std::string::npos);
  std::string ll;
  std::vector<float> got = run(g, &ll), want = run(f);
  // ... in a function of its own, which LLVM may not inline (nor hoist its constants out of).
  EXPECT_NE(ll.find("llvm.loop.unroll.disable"), std::string::npos);
  EXPECT_NE(ll.find("@tile.rolled"), std::string::npos);
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(got[k], want[k]) << k;
    EXPECT_NEAR(got[k], std::exp(2 * (0.1f * static_cast<float>(k) - 1.0f)), 1e-5f) << k;
  }
}

TEST(RolledEpilogues, LeavesShortEpiloguesRolledLoopsAndRepeatedTiles) {
  auto unchanged = [](const PrimFunc& f) {
    return roll_long_epilogues(f, k256).body.get() == f.body.get();
  };
  EXPECT_TRUE(unchanged(tile_func([](PrimExpr v) { return v + make_const(DType::Float32, 1); })));
  EXPECT_TRUE(unchanged(tile_func([](PrimExpr v) { return exp(v); }, ForKind::Serial)));
  // One tile of many (a loop of two around it): unrolled, it overlaps the next tile's work.
  PrimFunc tiles = tile_func([](PrimExpr v) { return exp(v); });
  tiles.body = for_loop(PrimVar("t"), 0, 2, ForKind::Serial, tiles.body);
  EXPECT_TRUE(unchanged(tiles));
  tiles.body = for_loop(PrimVar("t"), 0, 1, ForKind::Parallel,
                        tile_func([](PrimExpr v) { return exp(v); }).body);
  EXPECT_FALSE(unchanged(tiles));
  std::string ll;
  run(tile_func([](PrimExpr v) { return v + make_const(DType::Float32, 1); }), &ll);
  EXPECT_EQ(ll.find("llvm.loop.unroll.disable"), std::string::npos);
  EXPECT_EQ(ll.find(".rolled"), std::string::npos);
  // An elementwise kernel's long-chain loop (no accumulation in the kernel) stays inline.
  Buffer x = make_buffer("x", DType::Float32, {kRows * kLanes});
  Buffer out = make_buffer("out", DType::Float32, {kRows * kLanes});
  PrimVar r("r"), c("c");
  PrimFunc f;
  f.name = "tile";
  f.params = {x, out};
  f.num_inputs = 1;
  f.body = for_loop(r, 0, kRows, ForKind::Serial,
                    for_loop(c, 0, kLanes, ForKind::Vectorized,
                             store(out, r * kLanes + c, exp(load(x, r * kLanes + c)))));
  ASSERT_TRUE(is_long_chain_loop(f.body.as<ForNode>()));
  run(f, &ll);
  EXPECT_EQ(ll.find(".rolled"), std::string::npos);
}

TEST(RolledEpilogues, AReductionsProducerBeforeItsAccumulationStaysInline) {
  // out[0] = sum of exp(x) over a 3 x 8 producer loop that runs before the sum: nothing it
  // could spill is live yet, and a call per row measured slower (sigmoid -> sum -> log).
  Buffer x = make_buffer("x", DType::Float32, {kRows * kLanes});
  Buffer out = make_buffer("out", DType::Float32, {kRows * kLanes});
  Buffer e = make_buffer("e", DType::Float32, {kRows * kLanes}, BufferScope::Local);
  PrimVar r("r"), c("c"), k("k");
  Stmt produce = for_loop(r, 0, kRows, ForKind::Serial,
                          for_loop(c, 0, kLanes, ForKind::Vectorized,
                                   store(e, r * kLanes + c, exp(load(x, r * kLanes + c)))));
  Stmt total = seq(
      {store(out, 0, make_const(DType::Float32, 0)),
       for_loop(k, 0, kRows * kLanes, ForKind::Serial, store(out, 0, load(out, 0) + load(e, k)))});
  PrimFunc f;
  f.name = "tile";
  f.params = {x, out};
  f.num_inputs = 1;
  f.body = allocate(e, seq({produce, total}));
  ASSERT_TRUE(is_long_chain_loop(produce.as<ForNode>()));
  std::string ll;
  std::vector<float> got = run(f, &ll);
  EXPECT_EQ(ll.find(".rolled"), std::string::npos);
  double want = 0;
  for (int64_t i = 0; i < kRows * kLanes; ++i) want += std::exp(0.1 * static_cast<double>(i) - 1);
  EXPECT_NEAR(got[0], want, 1e-5 * want);
}

// A tile that fills the registers (12 vectors of 8 of AVX2's 16) rounded to bfloat16 in its
// epilogue is rolled in a kernel of many tiles too (its rounding's constants spilled the
// accumulators inside the reduction loop); a smaller tile, or one stored as float32, is not.
TEST(RolledEpilogues, AFullTileRoundedToBfloat16IsRolledInAnyKernel) {
  auto repeated = [](int64_t rows, DType out) {
    PrimFunc f = tile_func([](PrimExpr v) { return v; }, ForKind::Unrolled, rows, out);
    f.body = for_loop(PrimVar("t"), 0, 2, ForKind::Serial, f.body);
    return f;
  };
  auto rolled = [](const PrimFunc& f) {
    return roll_long_epilogues(f, k256).body.get() != f.body.get();
  };
  EXPECT_TRUE(rolled(repeated(12, DType::BFloat16)));
  EXPECT_FALSE(rolled(repeated(3, DType::BFloat16)));
  EXPECT_FALSE(rolled(repeated(12, DType::Float32)));
}

}  // namespace
}  // namespace ember::passes
