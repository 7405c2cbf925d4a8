// Run-time dimensions in the graph IR (issue 44): symbols carried through op relations by
// the fit (symbolic.h), size attributes that hold symbols, and the errors for what a
// run-time dimension cannot be.
#include "ember/ir/symbolic.h"

#include <gtest/gtest.h>

#include "../expect_error.h"
#include "ember/ir/graph.h"
#include "ember/ir/op.h"

namespace ember::ir {
namespace {

const Symbol kBatch = make_symbol("batch", 1, 16);
const Symbol kSeq = make_symbol("seq", 1, 512);

Expr tokens(const std::string& name = "x", int64_t hidden = 768) {
  return var(name, TensorType::of({Dim::of(kBatch), Dim::of(kSeq), hidden}, DType::Float32));
}

Expr weight(std::vector<int64_t> shape) {
  return constant(runtime::NDArray::empty(shape, DType::Float32), "w");
}

TEST(Symbolic, DimensionsPrintAndEvaluate) {
  Dim d;
  d.coef = 12;
  d.symbols = {kBatch, kSeq};
  d.offset = 1;
  EXPECT_EQ(to_string(d), "12*batch*seq+1");
  EXPECT_EQ(d.at({{"batch", 2}, {"seq", 3}}), 73);
  EXPECT_EQ(d.max(), 12 * 16 * 512 + 1);
  EXPECT_EQ(d.min(), 13);
  EXPECT_EQ(to_string(tokens()->type), "float32[batch, seq, 768]");
  EXPECT_EQ(tokens()->type.tensor().shape, (std::vector<int64_t>{16, 512, 768}));
  EXPECT_EQ(TensorType::of({2, 3}, DType::Float32), (TensorType{{2, 3}, DType::Float32}));
}

TEST(Symbolic, FitFindsProductsAndOffsetsAndRejectsOtherForms) {
  const std::vector<Symbol> syms = {kBatch, kSeq};
  const std::vector<Binding> probes = probe_bindings(syms);
  ASSERT_EQ(probes.size(), 5u);
  for (const Binding& b : probes)
    for (auto& [name, v] : b) EXPECT_NE(v, 1) << "a probe of 1 broadcasts";
  auto fit = [&](auto f, Dim* d) {
    std::vector<int64_t> values;
    for (const Binding& b : probes) values.push_back(f(b.at("batch"), b.at("seq")));
    return fit_dim(syms, probes, values, d);
  };
  Dim d;
  ASSERT_TRUE(fit([](int64_t b, int64_t s) { return 12 * b * s; }, &d));
  EXPECT_EQ(to_string(d), "12*batch*seq");
  ASSERT_TRUE(fit([](int64_t, int64_t s) { return s - 1; }, &d));
  EXPECT_EQ(to_string(d), "seq-1");
  ASSERT_TRUE(fit([](int64_t, int64_t) { return int64_t{64}; }, &d));
  EXPECT_TRUE(d.is_static());
  EXPECT_FALSE(fit([](int64_t, int64_t s) { return (s - 1) / 2 + 1; }, &d));  // a stride
  EXPECT_FALSE(fit([](int64_t b, int64_t s) { return b + s; }, &d));
  EXPECT_FALSE(fit([](int64_t, int64_t s) { return s * s; }, &d));
}

TEST(Symbolic, RelationsCarrySymbolsThroughABertLayer) {
  Expr x = tokens();
  Expr h = call("nn.layer_norm", {x, weight({768}), weight({768})}, {}, "ln");
  EXPECT_EQ(to_string(h->type), "float32[batch, seq, 768]");
  // [batch, seq, 768] -> [batch*seq, 768] -> dense -> heads [batch, seq, 12, 64].
  Expr rows = call("reshape", {h}, Attrs().with("newshape", std::vector<int64_t>{-1, 768}));
  EXPECT_EQ(to_string(rows->type), "float32[batch*seq, 768]");
  EXPECT_EQ(to_string(rows.get() ? static_cast<const CallNode*>(rows.get())->attrs : Attrs()),
            "newshape=[batch*seq, 768]");
  Expr q = call("nn.dense", {rows, weight({768, 768})});
  Expr heads =
      call("reshape", {q}, Attrs().with_dims("newshape", {Dim::of(kBatch), Dim::of(kSeq), 12, 64}));
  EXPECT_EQ(to_string(heads->type), "float32[batch, seq, 12, 64]");
  Expr qt = call("transpose", {heads}, Attrs().with("axes", std::vector<int64_t>{0, 2, 1, 3}));
  Expr q3 = call("reshape", {qt}, Attrs().with_dims("newshape", {-1, Dim::of(kSeq), 64}));
  EXPECT_EQ(to_string(q3->type), "float32[12*batch, seq, 64]");
  Expr kt = call("transpose", {q3}, Attrs().with("axes", std::vector<int64_t>{0, 2, 1}));
  Expr scores = call("nn.batch_matmul", {q3, kt});
  EXPECT_EQ(to_string(scores->type), "float32[12*batch, seq, seq]");
  Expr p = call("nn.softmax", {scores}, Attrs().with("axis", int64_t{-1}));
  // Concatenating a token, and slicing the last one off.
  Expr cls = var("cls", TensorType::of({Dim::of(kBatch), 1, 768}, DType::Float32));
  Expr longer = call("concatenate", {cls, x}, Attrs().with("axis", int64_t{1}));
  EXPECT_EQ(to_string(longer->type), "float32[batch, seq+1, 768]");
  Expr shorter = call("strided_slice", {x},
                      Attrs()
                          .with("begin", std::vector<int64_t>{1})
                          .with("end", std::vector<int64_t>{1 << 30})
                          .with("axes", std::vector<int64_t>{1}));
  EXPECT_EQ(to_string(shorter->type), "float32[batch, seq-1, 768]");
  Function f = function({x, cls}, tuple({p, longer, shorter}));
  infer_types(f);  // the same fit when passes re-check the graph
}

TEST(Symbolic, NarrowedRangesRetypeTheGraph) {
  // [batch, seq, 768] -> reshape to [batch*seq, 768] (a size attribute with symbols) -> dense.
  Expr x = tokens();
  Expr rows =
      call("reshape", {x}, Attrs().with_dims("newshape", {Dim::of(kBatch) * Dim::of(kSeq), 768}));
  Function f = function({x}, call("nn.dense", {rows, weight({64, 768})}));
  Function g = narrow_symbols(f, {{"seq", 7}, {"other", 3}});
  EXPECT_EQ(to_string(g->body->type), "float32[batch*seq, 64]");
  EXPECT_EQ(g->body->type.tensor().shape, (std::vector<int64_t>{16 * 7, 64}));
  EXPECT_EQ(g->params[0]->type.tensor().shape, (std::vector<int64_t>{16, 7, 768}));
  const std::vector<Symbol> symbols = function_symbols(g);
  ASSERT_EQ(symbols.size(), 2u);
  EXPECT_EQ(symbols[1]->name, "seq");
  EXPECT_EQ(symbols[1]->min, 1);
  EXPECT_EQ(symbols[1]->max, 7);
  EXPECT_EQ(symbols[0]->max, 16);  // batch keeps its range
  // A wider maximum than the range's leaves it; one under its minimum stops at it.
  EXPECT_EQ(narrow_symbols(f, {{"seq", 600}}), f);
  const Symbol long_seq = make_symbol("seq", 8, 512);
  Expr y = var("y", TensorType::of({Dim::of(long_seq)}, DType::Float32));
  Function h = narrow_symbols(function({y}, call("nn.relu", {y})), {{"seq", 2}});
  EXPECT_EQ(h->body->type.tensor().shape, (std::vector<int64_t>{8}));
}

TEST(Symbolic, WhatARunTimeDimensionCannotBeIsAnErrorNamingTheOp) {
  // Two different symbols do not broadcast: the relation accepts them only where equal.
  Expr a = var("a", TensorType::of({Dim::of(kSeq)}, DType::Float32));
  Expr b = var("b", TensorType::of({Dim::of(make_symbol("batch", 1, 512))}, DType::Float32));
  EXPECT_ERROR_WITH(call("add", {a, b}, {}, "mix"), "add 'mix'", "not all of it", "batch = 3");
  // A reshape to a static size fits only the largest run.
  EXPECT_ERROR_WITH(call("reshape", {a}, Attrs().with("newshape", std::vector<int64_t>{512}), "r"),
                    "reshape 'r'", "seq = 3");
  // A strided pool over a run-time length halves it with a floor.
  Expr img = var("img", TensorType::of({1, 3, Dim::of(kSeq), 8}, DType::Float32));
  EXPECT_ERROR_WITH(call("nn.max_pool2d", {img},
                         Attrs()
                             .with("pool_size", std::vector<int64_t>{2, 2})
                             .with("strides", std::vector<int64_t>{2, 2}),
                         "pool"),
                    "nn.max_pool2d 'pool'", "result dimension 2", "coef * (a product of symbols)");
  // One name, two ranges.
  Expr c = var("c", TensorType::of({Dim::of(make_symbol("seq", 1, 128))}, DType::Float32));
  EXPECT_ERROR_WITH(call("add", {a, c}), "symbol seq has two ranges", "[1, 512]", "[1, 128]");
  EXPECT_ERROR_WITH(make_symbol("seq", 0, 4), "1 <= min <= max");
  EXPECT_ERROR_WITH(make_symbol("2x", 1, 4), "not an identifier");
}

}  // namespace
}  // namespace ember::ir
