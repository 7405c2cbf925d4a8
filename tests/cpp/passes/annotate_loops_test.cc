// annotate_loops (annotate_loops.h), before and after: which loops it marks as rolled sums
// (and with how many accumulators), transposed blocks or rolled calls, and which it leaves.
#include "ember/passes/annotate_loops.h"

#include <gtest/gtest.h>

#include "ember/ir/prim_math.h"
#include "ember/passes/fusion_cost.h"

namespace ember::passes {
namespace {

using namespace ir;

PrimFunc func(std::vector<Buffer> params, Stmt body) {
  PrimFunc f;
  f.name = "k";
  f.params = std::move(params);
  f.num_inputs = 1;
  f.body = std::move(body);
  return f;
}

// The annotations of the loop over `var` in `f`.
LoopAnnotations of(const PrimFunc& f, const std::string& var) {
  LoopAnnotations found;
  visit_prim(
      f.body, [](const PrimExpr&) {},
      [&](const Stmt& s) {
        if (auto* l = s.as<ForNode>(); l && l->var.name() == var) found = l->annotations;
      });
  return found;
}

// out[r] = sum over k of a[r, k], rows of `cols`.
PrimFunc row_sums(int64_t cols) {
  auto a = make_buffer("a", DType::Float32, {4, cols});
  auto out = make_buffer("out", DType::Float32, {4});
  PrimVar r("r"), k("k");
  return func({a, out},
              for_loop(r, 0, 4, ForKind::Serial,
                       seq({store(out, r, make_const(DType::Float32, 0.0)),
                            for_loop(k, 0, cols, ForKind::Serial,
                                     store(out, r, load(out, r) + load(a, r * cols + k)))})));
}

TEST(AnnotateLoops, RolledSumsGetAccumulatorsForTheMachinesLanes) {
  const MachineModel avx2 = MachineModel::for_vector_bits(256),
                     avx512 = MachineModel::for_vector_bits(512);
  PrimFunc f = row_sums(768);
  EXPECT_TRUE(of(f, "k").empty());  // before: nothing decided
  // 768 = 96 vectors of 8 or 48 of 16: four accumulators of at least two vectors each.
  EXPECT_EQ(of(annotate_loops(f, avx2), "k").sum_accumulators, 4);
  EXPECT_EQ(of(annotate_loops(f, avx512), "k").sum_accumulators, 4);
  // 48 = 6 vectors of 8 (two accumulators of 3) or 3 of 16 (one).
  EXPECT_EQ(of(annotate_loops(row_sums(48), avx2), "k").sum_accumulators, 2);
  EXPECT_EQ(of(annotate_loops(row_sums(48), avx512), "k").sum_accumulators, 1);
  // Under 8 steps it is no rolled sum; the row loop around it is none either.
  EXPECT_TRUE(of(annotate_loops(row_sums(7), avx2), "k").empty());
  EXPECT_TRUE(of(annotate_loops(f, avx2), "r").empty());
  // Idempotent: a second run decides the same and returns the same tree.
  PrimFunc once = annotate_loops(f, avx2);
  EXPECT_TRUE(annotate_loops(once, avx2).body.same_as(once.body));
  EXPECT_NE(to_string(once).find("for k in [0, 768) rolled_sum(4):"), std::string::npos) << once;
}

// out[c, i] = a[i, c]: a serial loop over c around a vector loop reading a column.
Stmt columns(const Buffer& a, const Buffer& out, PrimVar c, PrimVar i, bool collide) {
  PrimExpr index = collide ? PrimExpr(c) : c * 8 + i;  // collide: every lane into one element
  return for_loop(c, 0, 16, ForKind::Serial,
                  for_loop(i, 0, 8, ForKind::Vectorized, store(out, index, load(a, i * 16 + c))));
}

TEST(AnnotateLoops, ColumnLoopsReadTransposedBlocksUnlessNestedOrRacing) {
  const MachineModel m = MachineModel::for_vector_bits(256);
  auto a = make_buffer("a", DType::Float32, {8 * 16});
  auto out = make_buffer("out", DType::Float32, {16 * 8});
  PrimVar c("c"), i("i");
  EXPECT_TRUE(
      of(annotate_loops(func({a, out}, columns(a, out, c, i, false)), m), "c").transposed_blocks);
  EXPECT_FALSE(
      of(annotate_loops(func({a, out}, columns(a, out, c, i, true)), m), "c").transposed_blocks);
  // Through an unrolled loop u between the serial loop and the vector loop: u would read
  // blocks on its own (A's index steps by 1 with u too), but inside r's blocks it does not.
  auto wide = make_buffer("wide", DType::Float32, {8 * 32});
  PrimVar r("r"), u("u");
  PrimExpr at = (r * 8 + u) * 8 + i;
  Stmt nest = for_loop(r, 0, 16, ForKind::Serial,
                       for_loop(u, 0, 8, ForKind::Unrolled,
                                for_loop(i, 0, 8, ForKind::Vectorized,
                                         store(out, at % 128, load(wide, i * 32 + r + u)))));
  PrimFunc g = annotate_loops(func({wide, out}, nest), m);
  EXPECT_TRUE(of(g, "r").transposed_blocks) << g;
  EXPECT_FALSE(of(g, "u").transposed_blocks) << g;
  PrimFunc alone = annotate_loops(func({wide, out}, nest.as<ForNode>()->body), m);
  EXPECT_TRUE(of(alone, "u").transposed_blocks) << alone;
}

// A long-chain loop (an exp over rows of a vector) before and after an accumulation.
TEST(AnnotateLoops, LongChainsAfterAnAccumulationBecomeRolledCalls) {
  const MachineModel m = MachineModel::for_vector_bits(256);
  auto a = make_buffer("a", DType::Float32, {4 * 8});
  auto out = make_buffer("out", DType::Float32, {4 * 8});
  auto acc = make_buffer("acc", DType::Float32, {8}, BufferScope::Local);
  auto chain = [&](const std::string& name) {
    PrimVar r(name), l(name + ".l");
    return for_loop(
        r, 0, 4, ForKind::Serial,
        for_loop(l, 0, 8, ForKind::Vectorized, store(out, r * 8 + l, exp(load(a, r * 8 + l)))));
  };
  PrimVar j("j");
  Stmt accumulate =
      for_loop(j, 0, 8, ForKind::Vectorized, store(acc, j, load(acc, j) + load(a, j)));
  PrimFunc f = annotate_loops(
      func({a, out}, allocate(acc, seq({chain("before"), accumulate, chain("after")}))), m);
  EXPECT_FALSE(of(f, "before").rolled_call);
  EXPECT_TRUE(of(f, "after").rolled_call) << f;
}

// SerialBelowParallelGrain runs after AnnotateLoops: a kernel it makes serial is annotated
// again, since a parallel loop gets no annotation and the serial loop it becomes may (here a
// column loop read as transposed blocks); a kernel it leaves parallel is returned as it came.
TEST(AnnotateLoops, AKernelMadeSerialIsAnnotatedAgain) {
  const MachineModel m = MachineModel::for_vector_bits(256);
  auto a = make_buffer("a", DType::Float32, {8, 16});
  auto out = make_buffer("out", DType::Float32, {16, 8});
  PrimVar c("c"), i("i");
  PrimFunc small =
      annotate_loops(func({a, out}, for_loop(c, 0, 16, ForKind::Parallel,
                                             for_loop(i, 0, 8, ForKind::Vectorized,
                                                      store(out, c * 8 + i, load(a, i * 16 + c))))),
                     m);
  EXPECT_TRUE(of(small, "c").empty()) << small;  // parallel: not decided
  PrimFunc serial = serial_below_parallel_grain(small, m);
  EXPECT_TRUE(of(serial, "c").transposed_blocks) << serial;
  EXPECT_TRUE(annotate_loops(serial, m).body.same_as(serial.body));

  auto big_in = make_buffer("a", DType::Float32, {1 << 20}),
       big_out = make_buffer("out", DType::Float32, {1 << 20});
  PrimVar j("j");
  PrimFunc big = annotate_loops(
      func({big_in, big_out},
           for_loop(j, 0, 1 << 17, ForKind::Parallel,
                    for_loop(i, 0, 8, ForKind::Vectorized,
                             store(big_out, j * 8 + i, load(big_in, j * 8 + i) * 2.0f)))),
      m);
  EXPECT_TRUE(serial_below_parallel_grain(big, m).body.same_as(big.body));
}

}  // namespace
}  // namespace ember::passes
