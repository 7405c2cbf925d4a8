// topk: its type relation and errors, the softmax->topk rewrite (before/expected, and the
// cases it must leave alone), its kernel (CPU, the GPU form run on the CPU, PTX through
// ptxas) against a reference written here, and whole builds with a two-output kernel.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>

#include "../expect_error.h"
#include "../gpu_emulation.h"
#include "../ptxas.h"
#include "ember/codegen/build.h"
#include "ember/codegen/codegen.h"
#include "ember/ir/chains.h"
#include "ember/ir/op.h"
#include "ember/passes/recognize_patterns.h"
#include "ember/passes/schedule.h"
#include "pass_test_util.h"

namespace ember::passes {
namespace {

using namespace ir;
using namespace ember::test_util;

Expr input(std::vector<int64_t> shape, DType t = DType::Float32) {
  return var("x", TensorType{std::move(shape), t});
}

Attrs topk_attrs(int64_t k, int64_t axis = -1, int64_t largest = 1) {
  return Attrs({{"k", k}, {"axis", axis}, {"largest", largest}});
}

// ------------------------------------------------------------------ type relation

TEST(TopkType, TupleOfValuesAndInt64Indices) {
  Expr t = call("topk", {input({3, 10, 4})}, Attrs({{"k", int64_t{2}}, {"axis", int64_t{-2}}}));
  ASSERT_TRUE(t->type.is_tuple);
  ASSERT_EQ(t->type.fields.size(), 2u);
  EXPECT_EQ(t->type.fields[0], (TensorType{{3, 2, 4}, DType::Float32}));
  EXPECT_EQ(t->type.fields[1], (TensorType{{3, 2, 4}, DType::Int64}));
  const Attrs& a = as<CallNode>(t)->attrs;
  EXPECT_EQ(a.get_int("axis", -1), 1);
  EXPECT_EQ(a.get_int("largest", -1), 1);
  EXPECT_EQ(a.get_int("sorted", -1), 1);
  EXPECT_EQ(tuple_get_item(t, 1)->type, Type(TensorType{{3, 2, 4}, DType::Int64}));
  Expr i = call("topk", {input({5}, DType::Int32)}, Attrs({{"k", int64_t{5}}}));
  EXPECT_EQ(i->type.fields[0], (TensorType{{5}, DType::Int32}));
  EXPECT_EQ(get_op("topk")->pattern, OpPattern::Opaque);
}

TEST(TopkType, ErrorsNameTheNodeAndSayWhatToDo) {
  Expr x = input({4, 6});
  EXPECT_ERROR_WITH(call("topk", {x}, topk_attrs(7), "head.topk"), "head.topk", "topk", "k is 7",
                    "between 1 and 6", "smaller k");
  EXPECT_ERROR_WITH(call("topk", {x}, topk_attrs(0), "t"), "'t'", "k is 0");
  EXPECT_ERROR_WITH(call("topk", {x}, topk_attrs(1, 2), "t"), "'t'", "axis");
  EXPECT_ERROR_WITH(call("topk", {x}, Attrs(), "t"), "'t'", "attribute k");
  EXPECT_ERROR_WITH(call("topk", {input({4}, DType::Bool)}, topk_attrs(1), "t"), "bool", "cast");
  EXPECT_ERROR_WITH(call("topk", {input({}, DType::Float32)}, topk_attrs(1), "t"), "scalar");
  EXPECT_ERROR_WITH(call("topk", {x}, topk_attrs(1, -1, 2), "t"), "largest must be 0 or 1");
  EXPECT_ERROR_WITH(
      call("topk", {input({4}, DType::Int64)}, topk_attrs(1).with("softmax", int64_t{1}), "t"),
      "float");
}

// ------------------------------------------------------------------ the rewrite

void expect_equal(const Function& got, const Function& want) {
  EXPECT_TRUE(structural_equal(got, want)) << "got:\n"
                                           << to_string(Expr(got)) << "want:\n"
                                           << to_string(Expr(want));
}

Function values_and_indices(const Expr& x, const Expr& t) {
  return function({x}, tuple({tuple_get_item(t, 0), tuple_get_item(t, 1)}));
}

TEST(TopkRewrite, SoftmaxThenTopkBecomesOneTopk) {
  Expr x = input({4, 16});
  Expr sm = call("nn.softmax", {x}, Attrs({{"axis", int64_t{1}}}), "sm");
  Function got = recognize_patterns(values_and_indices(x, call("topk", {sm}, topk_attrs(3), "tk")));
  Attrs want = topk_attrs(3)
                   .with("softmax", int64_t{1})
                   .with("fusion_pattern", std::string("softmax->topk"));
  Expr fused = call("topk", {x}, want);
  expect_equal(got, values_and_indices(x, fused));
  auto* t = as<TupleNode>(got->body);
  EXPECT_EQ(as<TupleGetItemNode>(t->fields[0])->tuple->name, "sm + tk");

  // log(softmax) is first log_softmax, which then folds into the topk too.
  Expr ls = call("log", {call("nn.softmax", {x})});
  Function got_log = recognize_patterns(values_and_indices(x, call("topk", {ls}, topk_attrs(2))));
  Expr fused_log = call("topk", {x},
                        topk_attrs(2)
                            .with("log_softmax", int64_t{1})
                            .with("fusion_pattern", std::string("log_softmax->topk")));
  expect_equal(got_log, values_and_indices(x, fused_log));
}

TEST(TopkRewrite, SharedSoftmaxOrAnotherAxisIsLeftAlone) {
  Expr x = input({4, 16});
  Expr sm = call("nn.softmax", {x});
  Expr t = call("topk", {sm}, topk_attrs(3));
  // The softmax is also a model output.
  Function shared = function({x}, tuple({sm, tuple_get_item(t, 0)}));
  expect_equal(recognize_patterns(shared), shared);
  // The softmax is read by another op.
  Function other = function({x}, tuple({call("exp", {sm}), tuple_get_item(t, 1)}));
  expect_equal(recognize_patterns(other), other);
  // The topk runs along the other axis.
  Function across = values_and_indices(x, call("topk", {sm}, topk_attrs(2, 0)));
  expect_equal(recognize_patterns(across), across);
}

// ------------------------------------------------------------------ the kernel

struct Case {
  std::vector<int64_t> shape;
  int64_t k, axis;
  bool largest = true;
  DType dtype = DType::Float32;
  std::string mode;  // "", "softmax", "log_softmax"
};

Function topk_group(const Case& c) {
  Expr x = input(c.shape, c.dtype);
  Attrs a = topk_attrs(c.k, c.axis, c.largest);
  if (!c.mode.empty()) a = a.with(c.mode, int64_t{1});
  return function({x}, call("topk", {x}, a, "tk"), "tk");
}

// Distinct values (a shuffled ramp, so the expected indices are unambiguous), NaNs at
// `nans` positions.
std::vector<double> distinct_data(int64_t n, unsigned seed, double scale, int nans = 0) {
  std::vector<double> x(n);
  std::iota(x.begin(), x.end(), 0.0);
  std::mt19937 gen(seed);
  std::shuffle(x.begin(), x.end(), gen);
  for (auto& v : x) v = (v - n / 2.0) * scale;
  for (int i = 0; i < nans && i < n; ++i) x[gen() % n] = NAN;
  return x;
}

// torch.topk in double: ranks with NaN above every number, ties by lower index.
void reference(const Case& c, const std::vector<double>& x, std::vector<double>* values,
               std::vector<int64_t>* indices) {
  int64_t axis = c.axis < 0 ? c.axis + static_cast<int64_t>(c.shape.size()) : c.axis;
  int64_t outer = 1, inner = 1, n = c.shape[axis];
  for (int64_t d = 0; d < static_cast<int64_t>(c.shape.size()); ++d) {
    if (d < axis) outer *= c.shape[d];
    if (d > axis) inner *= c.shape[d];
  }
  values->assign(outer * c.k * inner, 0);
  indices->assign(outer * c.k * inner, 0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<double> row(n);
      for (int64_t j = 0; j < n; ++j) row[j] = x[(o * n + j) * inner + i];
      std::vector<int64_t> order(n);
      std::iota(order.begin(), order.end(), 0);
      auto beats = [&](double a, double b) {
        if (std::isnan(a) || std::isnan(b))
          return c.largest ? std::isnan(a) && !std::isnan(b) : std::isnan(b) && !std::isnan(a);
        return c.largest ? a > b : a < b;
      };
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t b) { return beats(row[a], row[b]); });
      double mx = -INFINITY, total = 0;
      for (double v : row) mx = std::isnan(v) || std::isnan(mx) ? NAN : std::max(mx, v);
      for (double v : row) total += std::exp(v - mx);
      for (int64_t s = 0; s < c.k; ++s) {
        double v = row[order[s]];
        if (c.mode == "softmax") v = std::exp(v - mx) / total;
        if (c.mode == "log_softmax") v = v - mx - std::log(total);
        (*values)[(o * c.k + s) * inner + i] = v;
        (*indices)[(o * c.k + s) * inner + i] = order[s];
      }
    }
}

// Runs a topk kernel (params: input, values, indices) on the CPU.
void run_kernel(const PrimFunc& f, const Case& c, const std::vector<double>& x,
                std::vector<double>* values, std::vector<int64_t>* indices) {
  runtime::NDArray in = runtime::NDArray::empty(c.shape, c.dtype);
  for (size_t i = 0; i < x.size(); ++i) switch (c.dtype) {
      case DType::Float32:
        in.data_as<float>()[i] = static_cast<float>(x[i]);
        break;
      case DType::Float64:
        in.data_as<double>()[i] = x[i];
        break;
      case DType::Int32:
        in.data_as<int32_t>()[i] = static_cast<int32_t>(x[i]);
        break;
      default:
        in.data_as<int64_t>()[i] = static_cast<int64_t>(x[i]);
        break;
    }
  std::vector<int64_t> out_shape = f.params[1]->shape;
  runtime::NDArray v = runtime::NDArray::empty(out_shape, c.dtype);
  runtime::NDArray ix = runtime::NDArray::empty(out_shape, DType::Int64);
  std::vector<void*> args{in.data(), v.data(), ix.data()};
  codegen::compile_cpu({f})->get_function(f.name)(args.data());
  values->resize(v.numel());
  indices->assign(ix.data_as<int64_t>(), ix.data_as<int64_t>() + ix.numel());
  for (int64_t i = 0; i < v.numel(); ++i) switch (c.dtype) {
      case DType::Float32:
        (*values)[i] = v.data_as<float>()[i];
        break;
      case DType::Float64:
        (*values)[i] = v.data_as<double>()[i];
        break;
      case DType::Int32:
        (*values)[i] = v.data_as<int32_t>()[i];
        break;
      default:
        (*values)[i] = static_cast<double>(v.data_as<int64_t>()[i]);
        break;
    }
}

void expect_matches(const std::vector<double>& gv, const std::vector<int64_t>& gi,
                    const std::vector<double>& wv, const std::vector<int64_t>& wi,
                    const std::string& what) {
  ASSERT_EQ(gv.size(), wv.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < gv.size() && bad < 5; ++i) {
    bool ok = std::isnan(wv[i])
                  ? std::isnan(gv[i])
                  : gv[i] == wv[i] || std::fabs(gv[i] - wv[i]) <= 1e-6 + 1e-5 * std::fabs(wv[i]);
    ok = ok && gi[i] == wi[i];
    if (!ok && ++bad)
      ADD_FAILURE() << what << ": slot " << i << " is (" << gv[i] << ", " << gi[i]
                    << "), expected (" << wv[i] << ", " << wi[i] << ")";
  }
}

std::vector<Case> kernel_cases() {
  std::vector<Case> cases = {
      {{7, 50}, 5, -1},
      {{7, 50}, 1, -1},
      {{3, 20, 4}, 20, 1},  // k = the whole axis, a non-last axis
      {{3, 20, 4}, 3, 1, false},
      {{2, 3, 33}, 4, -1, true, DType::Float64},
      {{4, 40}, 6, -1, true, DType::Int64},
      {{4, 40}, 6, -1, false, DType::Int32},
      {{2, 700}, 300, -1},  // k > the local list: the list lives in the output row
      {{2, 700}, 300, -1, false},
      {{5, 64}, 5, -1, true, DType::Float32, "softmax"},
      {{3, 37, 2}, 4, 1, true, DType::Float32, "softmax"},
      {{5, 64}, 3, -1, false, DType::Float64, "softmax"},
      {{5, 70}, 5, -1, true, DType::Float32, "log_softmax"},
      {{2, 400}, 260, -1, true, DType::Float32, "softmax"},  // normalised in the output row
      // Middle axes: all inner positions one block; n not a multiple of the 4 partial maxima,
      // and n under 8 (one).
      {{2, 41, 3}, 3, 1, false, DType::Float32, "log_softmax"},
      {{3, 7, 5}, 2, 1, true, DType::Float32, "softmax"},
  };
  return cases;
}

TEST(TopkKernel, MatchesAReferenceSortOnCpuAndInTheGpuForm) {
  unsigned seed = 0;
  for (const Case& c : kernel_cases()) {
    Function g = topk_group(c);
    int64_t n = 1;
    for (int64_t d : c.shape) n *= d;
    // Logits for the softmax forms stay well apart: no ties in the probabilities.
    std::vector<double> x = distinct_data(n, ++seed,
                                          is_int(c.dtype)  ? 1.0
                                          : c.mode.empty() ? 0.5
                                                           : 0.05);
    if (is_int(c.dtype))
      for (auto& v : x) v = std::floor(v);  // still distinct: a shifted ramp
    std::vector<double> wv, gv;
    std::vector<int64_t> wi, gi;
    reference(c, x, &wv, &wi);
    std::string what = "case " + std::to_string(seed);
    run_kernel(lower_group(g, "topk_cpu", LowerOptions{}), c, x, &gv, &gi);
    expect_matches(gv, gi, wv, wi, what + " (CPU)");
    LowerOptions gpu;
    gpu.gpu = true;
    PrimFunc f = lower_group(g, "topk_gpu", gpu);
    f.body = SerializeGpuLoops().mutate(f.body);
    run_kernel(f, c, x, &gv, &gi);
    expect_matches(gv, gi, wv, wi, what + " (GPU form)");
  }
}

TEST(TopkKernel, NaNRanksFirstAndTiesTakeTheLowerIndex) {
  for (bool largest : {true, false}) {
    Case c{{3, 12}, 5, -1, largest};
    std::vector<double> x = {1,         NAN,      3,    3,     -0.0, 0.0, 7, NAN, 2, 7, -5, 4,  //
                             2,         2,        2,    2,     2,    2,   2, 2,   2, 2, 2,  2,  //
                             -INFINITY, INFINITY, 1e30, -1e30, 0,    0,   5, 5,   1, 1, 9,  9};
    std::vector<double> wv, gv;
    std::vector<int64_t> wi, gi;
    reference(c, x, &wv, &wi);
    run_kernel(lower_group(topk_group(c), "topk", LowerOptions{}), c, x, &gv, &gi);
    expect_matches(gv, gi, wv, wi, largest ? "largest" : "smallest");
  }
  // The expectation spelled out for the first row, largest: NaN, NaN, 7 (index 6), 7 (9), 4.
  Case c{{3, 12}, 5, -1};
  std::vector<double> wv;
  std::vector<int64_t> wi;
  reference(c, {1, NAN, 3, 3, -0.0, 0.0, 7,         NAN,      2,    7,     -5, 4, 2, 2, 2, 2, 2, 2,
                2, 2,   2, 2, 2,    2,   -INFINITY, INFINITY, 1e30, -1e30, 0,  0, 5, 5, 1, 1, 9, 9},
            &wv, &wi);
  EXPECT_EQ(std::vector<int64_t>(wi.begin(), wi.begin() + 5),
            (std::vector<int64_t>{1, 7, 6, 9, 11}));
}

TEST(TopkKernel, SoftmaxFormHandlesLargeLogits) {
  // Logits around 1e4 overflow exp without the row max.
  Case c{{4, 50}, 3, -1, true, DType::Float32, "softmax"};
  std::vector<double> x = distinct_data(200, 9, 0.5);
  for (auto& v : x) v += 1e4;
  std::vector<double> wv, gv;
  std::vector<int64_t> wi, gi;
  reference(c, x, &wv, &wi);
  run_kernel(lower_group(topk_group(c), "topk", LowerOptions{}), c, x, &gv, &gi);
  expect_matches(gv, gi, wv, wi, "large logits");
}

TEST(TopkKernel, MiddleAxisStatisticsAreOneVectorAndTheLogIsTakenOnce) {
  // Rows along a middle axis with 3 inner positions: their max and sum of exp run as 3-lane
  // vectors (not one strided lane at a time), and a folded log_softmax takes log(sum) once
  // per block, so a winner's value is x - max - that log: no log chain in the output stores.
  Case c{{2, 40, 3}, 3, 1, false, DType::Float32, "log_softmax"};
  PrimFunc f = lower_group(topk_group(c), "topk", LowerOptions{});
  int three_lane_loops = 0;
  int64_t longest_output_chain = 0;
  visit_prim(
      f.body, [](const PrimExpr&) {},
      [&](const Stmt& s) {
        auto* loop = s.as<ForNode>();
        int64_t extent = 0;
        if (loop && loop->for_kind == ForKind::Vectorized && as_int(loop->extent, &extent))
          three_lane_loops += extent == 3;
        if (auto* st = s.as<StoreNode>(); st && st->buffer.get() == f.params[1].get())
          longest_output_chain = std::max(longest_output_chain, chain_length(st->value));
      });
  EXPECT_GE(three_lane_loops, 4) << f;  // max and sum: initialised and taken
  EXPECT_LT(longest_output_chain, kLongChain) << f;
}

TEST(TopkKernel, GpuKernelAssemblesWithPtxas) {
  LowerOptions gpu;
  gpu.gpu = true;
  for (const Case& c :
       {Case{{300, 50}, 5, -1}, Case{{3, 20, 4}, 3, 1, false, DType::Float64},
        Case{{2, 700}, 300, -1}, Case{{8, 64}, 5, -1, true, DType::Float32, "softmax"}}) {
    PrimFunc f = lower_group(topk_group(c), "topk_gpu", gpu);
    std::string ptx = codegen::compile_cuda({passes::lower_gpu_phases(f)})->get_source("ptx");
    ASSERT_NE(ptx.find(".entry topk_gpu"), std::string::npos) << ptx.substr(0, 2000);
    if (!have_ptxas()) {
      std::cout << "[ note ] " << kPtxas << " not found: PTX is not assembled\n";
      continue;
    }
    EXPECT_EQ(ptxas(ptx, "sm_80"), "");
  }
  // A whole model for the GPU: one kernel with two outputs.
  Expr x = input({64, 100});
  auto lib =
      build(values_and_indices(x, call("topk", {call("nn.softmax", {x})}, topk_attrs(5))), "cuda");
  ASSERT_EQ(lib->kernels.size(), 1u);
  if (have_ptxas()) EXPECT_EQ(ptxas(lib->get_source("ptx"), "sm_80"), "");
}

// ------------------------------------------------------------------ whole builds

TEST(TopkBuild, FusedSoftmaxTopkIsOneKernelAndMatchesTheUnfusedBuild) {
  Expr x = input({16, 100});
  Expr sm = call("nn.softmax", {x}, {}, "probs");
  Function f = values_and_indices(x, call("topk", {sm}, topk_attrs(5), "top5"));
  auto fused = build(f);
  ASSERT_EQ(fused->kernels.size(), 1u);
  const auto& patterns = fused->kernels[0].patterns;
  EXPECT_NE(std::find(patterns.begin(), patterns.end(), "softmax->topk"), patterns.end());
  EXPECT_EQ(fused->kernels[0].name, "probs + top5");
  EXPECT_EQ(fused->graph->kernels[0].args.size(), 3u);  // x, then values and indices
  EXPECT_EQ(fused->graph->kernels[0].num_inputs, 1);

  PassContext off;
  off.disabled_passes = {"RecognizePatterns"};
  auto unfused = build(f, "llvm", {}, off);
  EXPECT_EQ(unfused->kernels.size(), 2u);

  std::vector<double> data = distinct_data(1600, 3, 0.02);
  runtime::NDArray in = runtime::NDArray::empty({16, 100}, DType::Float32);
  for (int64_t i = 0; i < 1600; ++i) in.data_as<float>()[i] = static_cast<float>(data[i]);
  std::vector<std::vector<runtime::NDArray>> outs;
  for (auto& lib : {fused, unfused}) {
    runtime::GraphExecutor ex(lib->graph, lib->module);
    ex.set_input(0, in);
    ex.run();
    ASSERT_EQ(ex.num_outputs(), 2);
    outs.push_back({ex.get_output(0).clone(), ex.get_output(1).clone()});
  }
  Case c{{16, 100}, 5, -1, true, DType::Float32, "softmax"};
  std::vector<double> wv, gv;
  std::vector<int64_t> wi;
  reference(c, data, &wv, &wi);
  for (auto& o : outs) {
    gv.assign(o[0].data_as<float>(), o[0].data_as<float>() + o[0].numel());
    expect_matches(
        gv, std::vector<int64_t>(o[1].data_as<int64_t>(), o[1].data_as<int64_t>() + o[1].numel()),
        wv, wi, "build");
  }
}

TEST(TopkBuild, UnusedIndicesAndAnElementwiseConsumer) {
  // Only the values are used, by an op that FuseOps must not fuse into the topk.
  Expr x = input({6, 30});
  Expr t = call("topk", {x}, topk_attrs(4));
  Function f = function({x}, call("multiply", {tuple_get_item(t, 0), tuple_get_item(t, 0)}));
  auto lib = build(f);
  EXPECT_EQ(lib->kernels.size(), 2u);
  std::vector<double> data = distinct_data(180, 4, 0.1);
  runtime::NDArray in = runtime::NDArray::empty({6, 30}, DType::Float32);
  for (int64_t i = 0; i < 180; ++i) in.data_as<float>()[i] = static_cast<float>(data[i]);
  std::vector<runtime::NDArray> out = testing::run(f, {in});
  Case c{{6, 30}, 4, -1};
  std::vector<double> wv;
  std::vector<int64_t> wi;
  reference(c, data, &wv, &wi);
  ASSERT_EQ(out.size(), 1u);
  for (size_t i = 0; i < wv.size(); ++i)
    EXPECT_NEAR(out[0].data_as<float>()[i], wv[i] * wv[i], 1e-5 * (1 + wv[i] * wv[i]));
}

}  // namespace
}  // namespace ember::passes
