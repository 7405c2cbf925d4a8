// Groups typed with run-time dimensions, lowered once (lower_group fills Schedule::live from
// the group's types) and run at several sizes of the range, each against the static kernel
// built for that run's sizes (bind_symbols), on the host at both vector widths.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "../expect_error.h"
#include "ember/codegen/codegen.h"
#include "ember/codegen/machine.h"
#include "ember/codegen/target.h"
#include "ember/ir/op.h"
#include "ember/passes/lower.h"

namespace ember::passes {
namespace {

using namespace ir;

const Symbol kBatch = make_symbol("batch", 1, 6);
const Symbol kSeq = make_symbol("seq", 1, 70);

Expr input(const std::string& name, std::vector<Dim> dims) {
  return var(name, TensorType::of(std::move(dims), DType::Float32));
}

// A fused group takes its weights as inputs, as FuseOps makes it.
Expr weight(std::vector<int64_t> shape, uint32_t seed) {
  return var("w" + std::to_string(seed), TensorType{shape, DType::Float32});
}

// A group of `body`'s inputs, in the order it reads them.
Function group(const std::string& name, const Expr& body) {
  std::vector<Expr> params;
  for (auto& e : post_order(body))
    if (e->kind == NodeKind::Var) params.push_back(e);
  return function(params, body, name);
}

// Runs the kernel of `group` (compiled from `f`) on inputs of the group's types at `b`, with
// `shape_args` after the inputs when given. Constants are the group's own parameters here,
// so every input is a Var; buffers are allocated at the maximum (room for masked lanes).
std::vector<float> run(const PrimFunc& f, const Function& group, const Binding& b,
                       const std::vector<std::vector<float>>& inputs, bool shape_args) {
  auto m = codegen::compile_cpu({f});
  std::vector<std::vector<float>> bufs = inputs;
  std::vector<void*> args;
  for (auto& x : bufs) args.push_back(x.data());
  std::vector<int64_t> sizes;
  for (const Symbol& s : function_symbols(group)) sizes.push_back(b.at(s->name));
  if (shape_args) args.push_back(sizes.data());
  const TensorType out = group->body->type.tensor();
  std::vector<float> y(
      out.at(b).shape.empty() ? 1 : runtime::NDArray::empty(out.at(b).shape, out.dtype).numel());
  std::vector<float> y_max(runtime::NDArray::empty(out.shape, out.dtype).numel(), 0.f);
  args.push_back(y_max.data());
  m->get_function(f.name)(args.data());
  y.assign(y_max.begin(), y_max.begin() + y.size());
  return y;
}

// How a test lowers the group over its ranges (lower_group unless it says otherwise).
using Lowering = std::function<PrimFunc(const Function&, const LowerOptions&)>;

// Lowers `group` once, then checks it at each binding against its static build.
void check_sizes(const Function& group, const std::vector<Binding>& bindings,
                 const Lowering& lower = {}) {
  for (const char* target : {"llvm -vector-bits=256", "llvm"}) {
    LowerOptions options;
    options.machine = codegen::machine_model(codegen::parse_target(target));
    const PrimFunc dynamic = lower ? lower(group, options) : lower_group(group, "dyn", options);
    for (const Binding& b : bindings) {
      const Function fixed = bind_symbols(group, b);
      std::vector<std::vector<float>> inputs;
      std::mt19937 rng(7);
      std::uniform_real_distribution<float> u(-2.f, 2.f);
      for (auto& p : group->params) {
        std::vector<float> x(
            runtime::NDArray::empty(p->type.tensor().shape, DType::Float32).numel() + 64);
        for (float& v : x) v = u(rng);
        inputs.push_back(x);
      }
      const std::vector<float> want =
          run(lower_group(fixed, "fixed", options), fixed, b, inputs, false);
      const std::vector<float> got = run(dynamic, group, b, inputs, true);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 1e-4f * (1 + std::fabs(want[i])))
            << group->name << " on " << target << " at " << to_string(b) << ", element " << i;
    }
  }
}

const std::vector<Binding> kRuns = {{{"batch", 1}, {"seq", 1}},
                                    {{"batch", 1}, {"seq", 7}},
                                    {{"batch", 3}, {"seq", 64}},
                                    {{"batch", 2}, {"seq", 33}},
                                    {{"batch", 6}, {"seq", 70}}};

TEST(DynamicGroups, DenseBiasReluOverRunTimeRows) {
  Expr x = input("x", {Dim::of(kSeq), 64});
  Expr y =
      call("nn.relu",
           {call("nn.bias_add", {call("nn.dense", {x, weight({96, 64}, 1)}), weight({96}, 2)})});
  check_sizes(group("dense_bias_relu", y), kRuns);
}

TEST(DynamicGroups, LayerNormOverTokens) {
  Expr x = input("x", {Dim::of(kBatch), Dim::of(kSeq), 48});
  Expr y = call("nn.layer_norm", {x, weight({48}, 3), weight({48}, 4)});
  check_sizes(group("layer_norm", y), kRuns);
}

TEST(DynamicGroups, SoftmaxOverARunTimeAxis) {
  Expr x = input("x", {Dim::of(kBatch), 4, Dim::of(kSeq), Dim::of(kSeq)});
  Expr y = call("nn.softmax", {x}, Attrs().with("axis", int64_t{-1}));
  check_sizes(group("softmax", y), kRuns);
}

TEST(DynamicGroups, BatchMatmulOverRunTimeBatchRowsAndColumns) {
  Expr a = input("a", {Dim::of(kBatch), Dim::of(kSeq), 32});
  Expr b = input("b", {Dim::of(kBatch), 32, Dim::of(kSeq)});
  check_sizes(group("scores", call("nn.batch_matmul", {a, b})), kRuns);
}

// Columns of a run-time count no longer than a vector (a short range's scores): a scalar
// loop where the vector would have the run's length.
TEST(DynamicGroups, ColumnsOfARunTimeCountShorterThanAVector) {
  const Symbol seq = make_symbol("seq", 1, 3);
  Expr a = input("a", {Dim::of(kBatch), Dim::of(seq), 8});
  Expr b = input("b", {Dim::of(kBatch), 8, Dim::of(seq)});
  check_sizes(group("short_scores", call("nn.batch_matmul", {a, b})),
              {{{"batch", 2}, {"seq", 1}}, {{"batch", 1}, {"seq", 2}}, {{"batch", 6}, {"seq", 3}}});
}

TEST(DynamicGroups, BroadcastEpilogueAndStaticReduction) {
  Expr x = input("x", {Dim::of(kBatch), Dim::of(kSeq), 48});
  Expr y = call("multiply", {call("add", {x, weight({48}, 5)}), x});
  Expr m = call("mean", {y}, Attrs().with("axis", std::vector<int64_t>{2}));
  check_sizes(group("mean", m), kRuns);
}

// The runs of at most 15 rows take kernels of their own (with_short_run_parts), each
// lowered for its count: over batch * seq rows as over seq alone.
TEST(DynamicGroups, ShortRunsOfAProductOfSymbolsTakeTheirOwnTiles) {
  const Symbol batch = make_symbol("batch", 1, 16), seq = make_symbol("seq", 1, 512);
  Expr x = input("x", {Dim::of(batch) * Dim::of(seq), 64});
  Expr y = call("nn.relu", {call("nn.dense", {x, weight({96, 64}, 6)})});
  std::string schedule;
  auto parts = [&](const Function& g, const LowerOptions& options) {
    ScheduleChoice choice;
    PrimFunc general = lower_group(g, "dyn", options, {}, &choice);
    PrimFunc f = with_short_run_parts(g, "dyn", options, general, choice);
    schedule = choice.name;
    return f;
  };
  std::vector<Binding> runs;
  for (auto [b, s] : {std::pair{1, 1}, {1, 3}, {1, 7}, {2, 6}, {1, 15}, {3, 67}})
    runs.push_back({{"batch", b}, {"seq", s}});
  check_sizes(group("dense_relu", y), runs, parts);
  EXPECT_NE(schedule.find("+runs(batch*seq=1,2,3"), std::string::npos) << schedule;

  // Each part is lowered for runs of at most its count, so its tile is not guarded against
  // passing the 8192 rows of the largest run (in the accumulation, a compare per FMA row).
  LowerOptions znver4;
  znver4.machine = codegen::machine_model(codegen::parse_target("llvm -mcpu=znver4"));
  ScheduleChoice choice;
  const Function g = group("dense_relu", y);
  PrimFunc f =
      with_short_run_parts(g, "dyn", znver4, lower_group(g, "dyn", znver4, {}, &choice), choice);
  const std::string text = to_string(f);
  EXPECT_NE(text.find("<= 7)"), std::string::npos) << text;
  EXPECT_EQ(text.find("< 8192)"), std::string::npos) << text;
}

// nn.attention's own loop nest over run-time batch, query and key counts: one kernel per
// part of the query count's range (blocked for 8 or 16, 32 and 64 queries, then the rest).
TEST(DynamicGroups, AttentionOverRunTimeBatchQueriesAndKeys) {
  auto attention = [](bool causal, bool masked) {
    Expr q = input("q", {Dim::of(kBatch), 4, Dim::of(kSeq), 32});
    Expr k = input("k", {Dim::of(kBatch), 4, Dim::of(kSeq), 32});
    Expr v = input("v", {Dim::of(kBatch), 4, Dim::of(kSeq), 24});
    std::vector<Expr> args = {q, k, v};
    if (masked) args.push_back(input("mask", {Dim::of(kBatch), 1, 1, Dim::of(kSeq)}));
    return group(causal ? "causal" : "masked",
                 call("nn.attention", args, Attrs().with("causal", int64_t{causal})));
  };
  // Runs in each part: 1 and 7 queries (the first), 33 and 64 (up to 64), 70 (the rest).
  check_sizes(
      attention(false, true),
      {{{"batch", 1}, {"seq", 1}}, {{"batch", 2}, {"seq", 33}}, {{"batch", 6}, {"seq", 70}}});
  check_sizes(attention(true, false), {{{"batch", 1}, {"seq", 7}}, {{"batch", 3}, {"seq", 64}}});
  // The parts' bounds follow the vector width; the fusion report shows them.
  for (auto [cpu, label] : {std::pair{"znver4", "seq<=16,32,64"}, {"znver1", "seq<=8,16,64"}}) {
    LowerOptions options;
    options.machine =
        codegen::machine_model(codegen::parse_target(std::string("llvm -mcpu=") + cpu));
    ScheduleChoice choice;
    lower_group(attention(false, true), "a", options, {}, &choice);
    EXPECT_EQ(choice.name, std::string("nn.attention.own_loop_nest+runs(") + label + ")") << cpu;
  }
}

TEST(DynamicGroups, OwnLoopNestsRefuseRunTimeSizes) {
  Expr x = input("x", {Dim::of(kSeq), 64});
  Expr y = call("topk", {x}, Attrs().with("k", int64_t{2}));
  EXPECT_ERROR_WITH(lower_group(function({x}, y, "top"), "top", LowerOptions{}), "topk",
                    "takes no run-time sizes yet");
  // nn.attention's takes run-time batch, query and key counts, not feature sizes.
  Expr q = input("q", {4, Dim::of(kSeq), Dim::of(kSeq)});
  Expr a = call("nn.attention", {q, q, q}, Attrs().with("scale", 0.125), "self");
  EXPECT_ERROR_WITH(lower_group(function({q}, a, "att"), "att", LowerOptions{}), "self",
                    "run-time feature sizes", "only its batch, query and key counts may vary");
}

}  // namespace
}  // namespace ember::passes
