#include "ember/ir/loop.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "ember/ir/loop_sums.h"
#include "ember/ir/prim_math.h"
#include "ember/ir/simplify.h"
#include "ember/ir/tensor_expr.h"
#include "ember/ir/transposed_loads.h"
#include "ember/support/error.h"

namespace ember::ir {
namespace {

// nan_free_buffers: a row max that starts at -inf and takes the max with NaN-guarded values
// never holds NaN; one that takes the max with raw inputs, or starts from an input, may.
TEST(LoopIR, NanFreeBuffersFollowEveryStore) {
  const double inf = std::numeric_limits<double>::infinity();
  auto f32 = [](double v) { return make_const(DType::Float32, v); };
  Buffer x = make_buffer("x", DType::Float32, {8});
  Buffer guarded = make_buffer("guarded", DType::Float32, {1}, BufferScope::Local);
  Buffer raw = make_buffer("raw", DType::Float32, {1}, BufferScope::Local);
  Buffer seeded = make_buffer("seeded", DType::Float32, {1}, BufferScope::Local);
  PrimVar k("k");
  PrimExpr v = load(x, k), safe = select(is_nan(v), f32(-inf), v);
  auto row_max = [&](const Buffer& b, PrimExpr init, PrimExpr value) {
    return seq({store(b, 0, init),
                for_loop(k, 0, 8, ForKind::Serial, store(b, 0, max(load(b, 0), value)))});
  };
  Stmt body =
      allocate(guarded, allocate(raw, allocate(seeded, seq({row_max(guarded, f32(-inf), safe),
                                                            row_max(raw, f32(-inf), v),
                                                            row_max(seeded, load(x, 0), safe)}))));
  std::set<const BufferNode*> free = nan_free_buffers(body);
  EXPECT_EQ(free, std::set<const BufferNode*>{guarded.get()});
  EXPECT_TRUE(never_nan(safe, free));
  EXPECT_TRUE(never_nan(max(load(guarded, 0), f32(2)), free));
  EXPECT_FALSE(never_nan(v, free));
  EXPECT_FALSE(never_nan(select(is_nan(v), f32(std::nan("")), v), free));
  EXPECT_FALSE(never_nan(load(raw, 0) + f32(1), free));  // inf - inf is NaN
  EXPECT_TRUE(never_nan(cast(DType::Float32, make_const(DType::Int32, 3)), free));
}

TEST(LoopIR, BuildersFoldIntegerConstantsButNotFloats) {
  PrimVar x("x");
  EXPECT_EQ(to_string(x + 0), "x");
  EXPECT_EQ(to_string(x * 1), "x");
  EXPECT_EQ(to_string(PrimExpr(int64_t{6}) / PrimExpr(int64_t{4})), "1");
  EXPECT_EQ(to_string(PrimExpr(int64_t{-7}) / PrimExpr(int64_t{2})), "-4");  // floor division
  EXPECT_EQ(to_string(PrimExpr(int64_t{-7}) % PrimExpr(int64_t{2})), "1");   // floor modulo
  PrimVar f("f", DType::Float32);
  // x + 0.0 is not x for x = -0.0: floats keep the node.
  EXPECT_EQ(to_string(f + make_const(DType::Float32, 0.0)), "(f + 0.0f)");
}

TEST(LoopIR, SimplifyCancelsAffineTerms) {
  PrimVar wo("wo"), wi("wi");
  PrimExpr e = (wo * 16 + wi) - wo * 16;
  EXPECT_EQ(to_string(simplify(e)), "wi");
  EXPECT_EQ(to_string(simplify((wo * 8 + 4) / 4)), "((wo*2) + 1)");
  EXPECT_EQ(to_string(simplify((wo * 8 + 4) % 4)), "0");
  // floor((8wo + 3) / 4) = 2wo exactly; 6wo is not a multiple of 4, so that one stays.
  EXPECT_EQ(to_string(simplify((wo * 8 + 3) / 4)), "(wo*2)");
  EXPECT_EQ(to_string(simplify((wo * 8 + 3) % 4)), "3");
  EXPECT_EQ(to_string(simplify((wo * 6 + 3) / 4)), "(((wo*6) + 3)/4)");
}

TEST(LoopIR, DivisionAndModuloRecombine) {
  // (x / c) * c + x % c is x: a row of W read through a fused loop f = (r0, r1) =
  // (f / W, f % W) is contiguous again, also inside a larger index and for any x.
  PrimVar f("f"), n("n");
  EXPECT_EQ(to_string(simplify(f / 56 * 56 + f % 56)), "f");
  EXPECT_EQ(to_string(simplify(n * 3136 + (f / 56) * 56 + f % 56)), "((n*3136) + f)");
  EXPECT_EQ(to_string(simplify((n + f) % 7 + (n + f) / 7 * 7 + 2)), "((n + f) + 2)");
  // Other coefficients or divisors do not pair.
  EXPECT_EQ(to_string(simplify(f / 56 * 55 + f % 56)), "(((f/56)*55) + (f % 56))");
  EXPECT_EQ(to_string(simplify(f / 8 * 8 + f % 4)), "(((f/8)*8) + (f % 4))");
}

TEST(LoopIR, LoopRangesSimplifyDivisionAndModulo) {
  // n = no*24 + g*8 + l with l in [0, 8): n / 8 = no*3 + g and n % 8 = l inside the loops,
  // as a packed weight's index is (vector loads stay contiguous); outside them, unchanged.
  PrimVar no("no"), g("g"), l("l");
  PrimExpr n = no * 24 + g * 8 + l;
  Buffer out = make_buffer("out", DType::Int64, {64});
  Stmt body = store(out, l, n / 8 + n % 8 * 100);
  Stmt s = for_loop(no, 0, 2, ForKind::Serial,
                    for_loop(g, 0, 3, ForKind::Serial, for_loop(l, 0, 8, ForKind::Serial, body)));
  std::string text = to_string(simplify(s));
  EXPECT_NE(text.find("(((no*3) + g) + (l*100))"), std::string::npos) << text;
  // l in [0, 9) may reach the next multiple of 8: nothing to simplify.
  Stmt wide = for_loop(l, 0, 9, ForKind::Serial, store(out, l, (no * 8 + l) / 8));
  EXPECT_NE(to_string(simplify(wide)).find("/8"), std::string::npos) << simplify(wide);
  // Outside them: floor division still splits off the whole multiples.
  EXPECT_EQ(to_string(simplify((no * 8 + l) / 8)), "(no + (l/8))");
}

TEST(LoopIR, LetsOfFusedLoopsHaveRangesToo) {
  // A fused loop f over (j, k) = (f / 384, f % 384), as a transpose's schedule has it: with
  // the lets' ranges (j in [0, 12), k in [0, 384)) the flat index of the source folds away.
  PrimVar f("f"), j("j"), k("k"), l("l");
  Buffer out = make_buffer("out", DType::Int64, {64});
  PrimExpr flat = k * 768 + j * 64 + l;
  Stmt body = store(out, l, flat / 768 % 384 * 1000 + flat % 768);
  Stmt s =
      for_loop(f, 0, 12 * 384, ForKind::Serial,
               let_stmt(j, PrimExpr(f) / 384,
                        let_stmt(k, PrimExpr(f) % 384, for_loop(l, 0, 64, ForKind::Serial, body))));
  std::string text = to_string(simplify(s));
  EXPECT_EQ(text.find("/768"), std::string::npos) << text;
  EXPECT_NE(text.find("(k*1000)"), std::string::npos) << text;
  // A let whose value has no range (a load) leaves its uses alone.
  Buffer src = make_buffer("src", DType::Int64, {4});
  Stmt unknown =
      let_stmt(k, load(src, 0), for_loop(l, 0, 8, ForKind::Serial, store(out, l, (k + l) / 8)));
  EXPECT_NE(to_string(simplify(unknown)).find("/8"), std::string::npos);
}

TEST(LoopIR, AVectorsLaneStaysOutOfDivisionsByWholeVectors) {
  // Merging heads: flat = j*768 + ko*8 + ki with ki in [0, 8) one vector's lanes; head =
  // flat / 64 % 12 and d = flat % 64 read the source at (head, j, d). 8 divides 64, so
  // head = ko / 8 and d = (ko % 8)*8 + ki: the lane is affine, the load contiguous.
  PrimVar j("j"), ko("ko"), ki("ki");
  Buffer out = make_buffer("out", DType::Int64, {8});
  PrimExpr flat = j * 768 + ko * 8 + ki;
  Stmt body = store(out, ki, flat / 64 % 12 * 24576 + j * 64 + flat % 64);
  Stmt s =
      for_loop(j, 0, 384, ForKind::Serial,
               for_loop(ko, 0, 96, ForKind::Serial, for_loop(ki, 0, 8, ForKind::Serial, body)));
  const Stmt simple = simplify(s);  // held: `st` points into it
  auto* st = simple.as<ForNode>()->body.as<ForNode>()->body.as<ForNode>()->body.as<StoreNode>();
  ASSERT_NE(st, nullptr);
  auto form = linear_form(st->value);
  EXPECT_FALSE(form.has_value()) << st->value;  // ko / 8 and ko % 8 stay
  std::string text = to_string(st->value);
  EXPECT_EQ(text.find("/64"), std::string::npos) << text;
  EXPECT_EQ(text.find("% 64"), std::string::npos) << text;
  EXPECT_NE(text.find("(ko/8)"), std::string::npos) << text;
  // The same form with a lane that may reach the next vector (ki in [0, 9)) keeps flat % 64.
  Stmt wide = for_loop(ko, 0, 96, ForKind::Serial,
                       for_loop(ki, 0, 9, ForKind::Serial, store(out, ki, flat % 64)));
  EXPECT_NE(to_string(simplify(wide)).find("% 64"), std::string::npos) << simplify(wide);
}

TEST(LoopIR, BoundOfAffineIndex) {
  PrimVar wo("wo"), wi("wi"), kw("kw");
  VarRanges inner{{wi.get(), {0, 15}}, {kw.get(), {0, 2}}};
  auto b = bound((wo * 16 + wi) * 2 + kw - 1, inner);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(to_string(simplify(b->first)), "((wo*32) + -1)");
  EXPECT_EQ(b->second, 33);  // 15*2 + 2 + 1
  // Non-affine in a ranged variable: no bound.
  EXPECT_FALSE(bound(wi / 3, inner).has_value());
  // Constant bounds need every variable ranged.
  auto c = const_bound(wi * 2 + 1, inner);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->min, 1);
  EXPECT_EQ(c->max, 31);
  EXPECT_FALSE(const_bound(wo + wi, inner).has_value());
}

TEST(LoopIR, PrinterShowsLoopKinds) {
  Buffer a = make_buffer("A", DType::Float32, {8});
  PrimVar i("i");
  Stmt s = for_loop(i, 0, 8, ForKind::Vectorized,
                    store(a, i, load(a, i) * make_const(DType::Float32, 2)));
  EXPECT_EQ(to_string(s), "for i in [0, 8) vectorized:\n  A[i] = (A[i]*2.0f)\n");
}

TEST(LoopIR, VerifierRejectsUnboundVariablesAndNestedVectorLoops) {
  Buffer a = make_buffer("A", DType::Float32, {8, 8});
  PrimVar i("i"), j("j");
  PrimFunc unbound{"f", {a}, 1, store(a, i, make_const(DType::Float32, 1))};
  EXPECT_THROW(verify(unbound), InternalError);
  Stmt inner =
      for_loop(j, 0, 8, ForKind::Serial, store(a, i * 8 + j, make_const(DType::Float32, 1)));
  PrimFunc nested{"g", {a}, 1, for_loop(i, 0, 8, ForKind::Vectorized, inner)};
  EXPECT_THROW(verify(nested), InternalError);
  PrimFunc ok{"h", {a}, 1, for_loop(i, 0, 8, ForKind::Parallel, inner)};
  EXPECT_NO_THROW(verify(ok));
}

TEST(LoopIR, SubstituteReplacesByIdentity) {
  PrimVar x("x"), y("x");  // same name, different variables
  PrimExpr e = x + y;
  PrimExpr r = substitute(e, {{x.get(), PrimExpr(int64_t{3})}});
  EXPECT_EQ(to_string(r), "(3 + x)");
}

int64_t int_value(const PrimExpr& e) {
  int64_t v = 0;
  EXPECT_TRUE(as_int(e, &v)) << to_string(e);
  return v;
}

// A float constant made an integer saturates as the generated cast does (NaN -> 0, out of
// range -> min / max); a plain C++ cast is undefined behaviour there (NaN gave INT64_MIN).
TEST(LoopIR, IntegerConstantsFromFloatsSaturate) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(int_value(make_const(DType::Int64, nan)), 0);
  EXPECT_EQ(int_value(make_const(DType::Int32, nan)), 0);
  EXPECT_EQ(int_value(make_const(DType::Int64, inf)), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(int_value(make_const(DType::Int64, -inf)), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(int_value(make_const(DType::Int64, 1e19)), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(int_value(make_const(DType::Int32, 1e10)), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(int_value(make_const(DType::Int32, -1e10)), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(int_value(make_const(DType::Int32, -2.9)), -2);
  EXPECT_EQ(int_value(make_const(DType::Int64, 2.9)), 2);
  EXPECT_EQ(int_value(make_const(DType::Bool, nan)), 1);  // x != 0, as casts to bool
  // Integer to a narrower integer wraps (trunc), exactly, with no trip through double.
  EXPECT_EQ(int_value(cast(DType::Int32, PrimExpr(int64_t{(int64_t{1} << 32) + 5}))), 5);
  EXPECT_EQ(int_value(cast(DType::Int64, make_const(DType::Int32, -7))), -7);
}

// 8-bit integers (quantized tensors) fold as the generated code computes: arithmetic and
// narrowing wrap, a float becomes the int32 value wrapped (PyTorch's conversion), uint8
// compares and divides unsigned. Int32 arithmetic wraps too (it saturated through double).
TEST(LoopIR, EightBitConstantsWrapAsTheGeneratedCode) {
  EXPECT_EQ(int_value(make_const(DType::Int8, 100) + make_const(DType::Int8, 100)), -56);
  EXPECT_EQ(int_value(make_const(DType::UInt8, 3) - make_const(DType::UInt8, 5)), 254);
  EXPECT_EQ(int_value(make_const(DType::UInt8, 16) * make_const(DType::UInt8, 20)), 64);
  EXPECT_EQ(int_value(make_const(DType::Int8, 300.0)), 44);
  EXPECT_EQ(int_value(make_const(DType::UInt8, -1.0)), 255);
  EXPECT_EQ(int_value(make_const(DType::Int8, 1e10)), -1);  // int32 max, wrapped
  EXPECT_EQ(int_value(cast(DType::Int8, make_const(DType::Int64, 200))), -56);
  EXPECT_EQ(int_value(cast(DType::Int32, make_const(DType::UInt8, 200))), 200);
  EXPECT_EQ(int_value(make_const(DType::Int32, 2147483647.0) + make_const(DType::Int32, 1)),
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ(int_value(reduce_identity(ReduceOp::Max, DType::Int8)), -128);
  EXPECT_EQ(int_value(reduce_identity(ReduceOp::Min, DType::UInt8)), 255);
  EXPECT_EQ(int_value(reduce_identity(ReduceOp::Max, DType::UInt8)), 0);
  EXPECT_EQ(int_min(DType::Int32), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(int_max(DType::Int64), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(wrap_int(DType::Bool, 7), 1);
  EXPECT_STREQ(dtype_name(dtype_from_name("uint8")), "uint8");
  EXPECT_EQ(dtype_bytes(DType::Int8), 1);
}

// bfloat16 constants hold their rounded value (round to nearest even through float32), as
// the generated cast computes it.
TEST(LoopIR, BFloat16ConstantsRound) {
  auto value = [](const PrimExpr& e) { return e.as<FloatImmNode>()->value; };
  EXPECT_EQ(value(make_const(DType::BFloat16, 1.0 + 0x1p-8)), 1.0);
  EXPECT_EQ(value(make_const(DType::BFloat16, 1.0 + 3 * 0x1p-8)), 1.0 + 4 * 0x1p-8);
  EXPECT_EQ(value(cast(DType::BFloat16, make_const(DType::Float32, 0.1))), 0.10009765625);
  EXPECT_EQ(value(cast(DType::BFloat16, make_const(DType::Int32, 257))), 256.0);
  EXPECT_TRUE(std::isnan(value(make_const(DType::BFloat16, std::nan("")))));
  EXPECT_TRUE(is_float(DType::BFloat16));
  EXPECT_STREQ(dtype_name(dtype_from_name("bfloat16")), "bfloat16");
  EXPECT_EQ(dtype_bytes(DType::BFloat16), 2);
}

// A visitor sees every node once, pre-order, through the method of its kind; a method that
// does not call the base version prunes the walk below it.
TEST(LoopIR, VisitorHasOneMethodPerNodeKind) {
  struct Kinds : PrimVisitor {
    std::vector<std::string> seen;
    bool prune_let = false;
    void visit_var(const PrimVarNode* op) override { seen.push_back("var " + op->name); }
    void visit_load(const LoadNode* op) override {
      seen.push_back("load " + op->buffer->name);
      PrimVisitor::visit_load(op);
    }
    void visit_call(const PrimCallNode* op) override {
      seen.push_back("call");
      PrimVisitor::visit_call(op);
    }
    void visit_for(const ForNode* op) override {
      seen.push_back("for " + op->var.name());
      PrimVisitor::visit_for(op);
    }
    void visit_store(const StoreNode* op) override {
      seen.push_back("store " + op->buffer->name);
      PrimVisitor::visit_store(op);
    }
    void visit_let_stmt(const LetStmtNode* op) override {
      seen.push_back("let " + op->var.name());
      if (!prune_let) PrimVisitor::visit_let_stmt(op);
    }
  };
  Buffer a = make_buffer("A", DType::Float32, {8}), b = make_buffer("B", DType::Float32, {8});
  PrimVar i("i"), n("n");
  Stmt s = for_loop(i, 0, 8, ForKind::Serial,
                    let_stmt(n, i + 1, store(b, i, prim_call(Intrinsic::Sqrt, {load(a, n)}))));
  Kinds all;
  all.visit(s);
  EXPECT_EQ(all.seen, (std::vector<std::string>{"for i", "let n", "var i", "store B", "var i",
                                                "call", "load A", "var n"}));
  Kinds pruned;
  pruned.prune_let = true;
  pruned.visit(s);
  EXPECT_EQ(pruned.seen, (std::vector<std::string>{"for i", "let n"}));
}

// A mutator rebuilds the path to what it changed, shares everything else, and returns the
// statement itself when nothing changed.
TEST(LoopIR, MutatorRebuildsOnlyWhatChanged) {
  struct SqrtToAbs : PrimMutator {
    PrimExpr visit_call(const PrimExpr& e, const PrimCallNode* op) override {
      PrimExpr base = PrimMutator::visit_call(e, op);
      auto* c = base.as<PrimCallNode>();
      return c->op == Intrinsic::Sqrt ? prim_call(Intrinsic::Abs, c->args) : base;
    }
  };
  Buffer a = make_buffer("A", DType::Float32, {8}), b = make_buffer("B", DType::Float32, {8});
  PrimVar i("i");
  Stmt untouched = store(a, i, load(a, i));
  Stmt changed = store(b, i, prim_call(Intrinsic::Sqrt, {load(a, i)}));
  Stmt s = for_loop(i, 0, 8, ForKind::Serial, seq({untouched, changed}));
  Stmt r = SqrtToAbs().mutate(s);
  EXPECT_EQ(to_string(r), "for i in [0, 8):\n  A[i] = A[i]\n  B[i] = abs(A[i])\n");
  EXPECT_TRUE(r.as<ForNode>()->body.as<SeqNode>()->seq[0].same_as(untouched));
  EXPECT_TRUE(SqrtToAbs().mutate(untouched).same_as(untouched));
}

TEST(LoopIR, PrinterListsParamsArgumentsAndIndices) {
  Buffer a = make_buffer("A", DType::Float32, {2, 4}), b = make_buffer("B", DType::Int32, {4});
  PrimVar i("i");
  PrimFunc f{
      "k", {a, b}, 1, store(a, i, prim_call(Intrinsic::Fma, {load(a, i), load(a, i), load(a, i)}))};
  EXPECT_EQ(to_string(f),
            "func k(A: float32[2, 4], B: int32[4]):\n  A[i] = fma(A[i], A[i], A[i])\n");
}

// Which loads the code generator reads as register-transposed blocks: columns read along the
// serial loop directly around the vector loop, and nothing it could not read in advance.
TEST(LoopIR, TransposedLoadsAreColumnsReadAlongTheLoopAround) {
  auto a = make_buffer("A", DType::Float32, {4096});
  auto out = make_buffer("out", DType::Float32, {4096});
  PrimVar c("c"), i("i"), x("x");
  auto nest = [&](int64_t rows, int64_t lanes, ForKind kind, Stmt body) {
    return for_loop(c, 0, rows, kind, for_loop(i, 0, lanes, ForKind::Vectorized, body));
  };
  auto found = [](const Stmt& s) { return transposed_loads(s.as<ForNode>()).loads; };
  PrimExpr column = load(a, i * 40 + c + 3);
  Stmt plain = store(out, c * 16 + i, column);
  auto t = found(nest(20, 16, ForKind::Serial, plain));
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].load, column.as<LoadNode>());
  EXPECT_EQ(t[0].lane_stride, 40);
  EXPECT_EQ(found(nest(8, 8, ForKind::Unrolled, plain)).size(), 1u);
  EXPECT_EQ(found(nest(20, 16, ForKind::Serial, store(out, i, load(a, (PrimExpr(15) - i) * 9 + c))))
                .front()
                .lane_stride,
            -9);
  // Through an unrolled loop (a register tile's rows): a block per iteration of it, so long
  // as the blocks fit kMaxTransposedBytes; not through a serial one.
  PrimVar u("u");
  auto tile = [&](int64_t rows, ForKind kind) {
    return for_loop(c, 0, 16, ForKind::Serial,
                    for_loop(u, 0, rows, kind,
                             for_loop(i, 0, 16, ForKind::Vectorized,
                                      store(out, u * 16 + i, load(a, i * 40 + u * 640 + c)))));
  };
  auto through = transposed_loads(tile(4, ForKind::Unrolled).as<ForNode>());
  EXPECT_EQ(through.loads.size(), 1u);
  EXPECT_EQ(through.combinations, 4);
  EXPECT_EQ(through.between.size(), 1u);
  EXPECT_TRUE(found(tile(4, ForKind::Serial)).empty());
  EXPECT_TRUE(found(tile(kMaxTransposedBytes / (16 * 16 * 4) + 1, ForKind::Unrolled)).empty());
  // Fewer rows than lanes, lanes not a power of two, a parallel loop: none.
  EXPECT_TRUE(found(nest(15, 16, ForKind::Serial, plain)).empty());
  EXPECT_TRUE(found(nest(20, 12, ForKind::Serial, plain)).empty());
  EXPECT_TRUE(found(nest(20, 16, ForKind::Parallel, plain)).empty());
  // Contiguous, small strides (one wide load serves them), two elements a row, a division:
  for (PrimExpr index : {PrimExpr(c * 16 + i), i * 3 + c, i * 40 + c * 2, i * 40 + c / 2})
    EXPECT_TRUE(found(nest(20, 16, ForKind::Serial, store(out, i, load(a, index)))).empty())
        << index;
  // A guard, a store into the loaded buffer, an index through a variable bound inside:
  EXPECT_TRUE(found(nest(20, 16, ForKind::Serial, if_then_else(c < 18, plain))).empty());
  EXPECT_TRUE(found(nest(20, 16, ForKind::Serial, seq({plain, store(a, i, 1.0)}))).empty());
  EXPECT_TRUE(
      found(nest(20, 16, ForKind::Serial, let_stmt(x, i * 40, store(out, i, load(a, x + c)))))
          .empty());
}

}  // namespace
}  // namespace ember::ir
