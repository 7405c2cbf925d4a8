// nn.attention: its type relation, its online-softmax CPU kernel (src/ir/ops/
// attention.cc) and its compute rule (the reference form), run on real data against a
// double-precision reference written here.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "ember/codegen/codegen.h"
#include "ember/ir/op.h"
#include "ember/passes/lower.h"
#include "ember/passes/recognize_attention.h"
#include "ember/passes/schedule.h"
#include "ember/support/error.h"

namespace ember::ir {
// nn.attention's one-row-per-thread kernel, defined beside the op in src/ir/ops/attention.cc
// (not public API: only this test runs its GPU form on the CPU).
PrimFunc lower_attention_rows(const Function& group, const std::string& func_name,
                              ForKind block_kind, ForKind thread_kind);
}  // namespace ember::ir

namespace ember::passes {
namespace {

using namespace ir;

struct Problem {
  std::vector<int64_t> batch;
  int64_t L, S, E, Ev;
  std::vector<int64_t> mask_shape;  // empty: no mask
  DType mask_dtype = DType::Float32;
  bool causal = false;
  double scale = -1;  // < 0: the default 1 / sqrt(E)
  DType dtype = DType::Float32;
};

std::vector<int64_t> with(std::vector<int64_t> batch, int64_t a, int64_t b) {
  batch.push_back(a);
  batch.push_back(b);
  return batch;
}

// The single-op group of nn.attention for a problem.
Function attention_group(const Problem& p) {
  std::vector<Expr> params = {var("q", TensorType{with(p.batch, p.L, p.E), p.dtype}),
                              var("k", TensorType{with(p.batch, p.S, p.E), p.dtype}),
                              var("v", TensorType{with(p.batch, p.S, p.Ev), p.dtype})};
  if (!p.mask_shape.empty()) params.push_back(var("mask", TensorType{p.mask_shape, p.mask_dtype}));
  std::map<std::string, AttrValue> attrs{{"causal", int64_t{p.causal}}};
  if (p.scale >= 0) attrs["scale"] = p.scale;
  return function(params, call("nn.attention", params, Attrs(attrs), "attn"), "attn");
}

// The compute rule lowered as written: every stage its own loop nest over a full buffer.
// (Not with apply_default_schedule: it attaches the score stage, which two reductions read,
// to one of them only.)
PrimFunc lower_compute_rule(const Function& group) {
  auto* c = as<CallNode>(group->body);
  std::vector<ir::Tensor> inputs;
  for (size_t i = 0; i < group->params.size(); ++i) {
    const TensorType& t = group->params[i]->type.tensor();
    inputs.push_back(placeholder("p" + std::to_string(i), t.shape, t.dtype));
  }
  ir::Tensor out = c->op->compute(inputs, c->attrs, c->type.tensor());
  Schedule sch({out});
  return lower_schedule(sch, "attention_reference", inputs);
}

struct Data {
  std::vector<std::vector<double>> values;  // q, k, v, mask (as doubles)
};

Data random_data(const Function& group, unsigned seed, double q_scale = 1.0) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal;
  std::bernoulli_distribution coin(0.7);
  Data d;
  for (size_t i = 0; i < group->params.size(); ++i) {
    const TensorType& t = group->params[i]->type.tensor();
    int64_t n = 1;
    for (int64_t s : t.shape) n *= s;
    std::vector<double> x(n);
    for (auto& e : x) e = t.dtype == DType::Bool ? coin(gen) : normal(gen) * (i == 0 ? q_scale : 1);
    d.values.push_back(x);
  }
  return d;
}

// Runs a kernel of the group on `data`; returns the output as doubles.
std::vector<double> run(const PrimFunc& f, const Function& group, const Data& data) {
  std::vector<std::vector<uint8_t>> storage;
  std::vector<void*> args;
  auto add = [&](DType t, const std::vector<double>& x) {
    storage.emplace_back(x.size() * dtype_bytes(t));
    for (size_t i = 0; i < x.size(); ++i) {
      uint8_t* p = storage.back().data();
      if (t == DType::Float32)
        reinterpret_cast<float*>(p)[i] = static_cast<float>(x[i]);
      else if (t == DType::Float64)
        reinterpret_cast<double*>(p)[i] = x[i];
      else
        p[i] = x[i] != 0;
    }
    args.push_back(storage.back().data());
  };
  for (size_t i = 0; i < group->params.size(); ++i)
    add(group->params[i]->type.tensor().dtype, data.values[i]);
  const TensorType& ot = group->body->type.tensor();
  int64_t n = 1;
  for (int64_t s : ot.shape) n *= s;
  add(ot.dtype, std::vector<double>(n, 0.0));
  codegen::compile_cpu({f})->get_function(f.name)(args.data());
  std::vector<double> out(n);
  for (int64_t i = 0; i < n; ++i)
    out[i] = ot.dtype == DType::Float32 ? reinterpret_cast<float*>(args.back())[i]
                                        : reinterpret_cast<double*>(args.back())[i];
  return out;
}

// softmax(q k^T * scale + mask) v in double, with torch's semantics.
std::vector<double> reference(const Problem& p, const Data& d) {
  const auto &q = d.values[0], &k = d.values[1], &v = d.values[2];
  double scale = p.scale >= 0 ? p.scale : 1.0 / std::sqrt(double(p.E));
  int64_t B = 1;
  for (int64_t s : p.batch) B *= s;
  std::vector<double> out(B * p.L * p.Ev);
  std::vector<int64_t> full = with(p.batch, p.L, p.S);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < p.L; ++i) {
      std::vector<double> s(p.S);
      for (int64_t j = 0; j < p.S; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < p.E; ++e)
          dot += q[(b * p.L + i) * p.E + e] * k[(b * p.S + j) * p.E + e];
        s[j] = dot * scale;
        if (!p.mask_shape.empty()) {
          // Full index (batch..., i, j) -> mask index under broadcasting.
          std::vector<int64_t> idx;
          int64_t rest = b, inner = B;
          for (int64_t dim : p.batch) {
            inner /= dim;
            idx.push_back(rest / inner);
            rest %= inner;
          }
          idx.push_back(i);
          idx.push_back(j);
          int64_t flat = 0;
          size_t off = full.size() - p.mask_shape.size();
          for (size_t m = 0; m < p.mask_shape.size(); ++m)
            flat = flat * p.mask_shape[m] + (p.mask_shape[m] == 1 ? 0 : idx[off + m]);
          double mv = d.values[3][flat];
          if (p.mask_dtype == DType::Bool)
            s[j] = mv != 0 ? s[j] : -INFINITY;
          else
            s[j] += mv;
        }
        if (p.causal && j > i) s[j] = -INFINITY;
      }
      double mx = -INFINITY;
      for (double x : s) mx = std::max(mx, x);
      double total = 0;
      for (double& x : s) total += (x = std::exp(x - mx));
      for (int64_t e = 0; e < p.Ev; ++e) {
        double acc = 0;
        for (int64_t j = 0; j < p.S; ++j) acc += s[j] * v[(b * p.S + j) * p.Ev + e];
        out[(b * p.L + i) * p.Ev + e] = acc / total;
      }
    }
  return out;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double atol,
                  double rtol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    bool ok = std::isnan(want[i]) ? std::isnan(got[i])
                                  : std::fabs(got[i] - want[i]) <= atol + rtol * std::fabs(want[i]);
    if (!ok) {
      ++bad;
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", expected " << want[i];
    }
  }
}

std::vector<Buffer> allocations(const PrimFunc& f) {
  std::vector<Buffer> out;
  visit_prim(
      f.body, [](const PrimExpr&) {},
      [&](const Stmt& s) {
        if (auto* a = s.as<AllocateNode>()) out.push_back(a->buffer);
      });
  return out;
}

TEST(AttentionLowering, NoBufferHoldsTheScoreMatrix) {
  Problem p{{2, 2}, 128, 128, 64, 64};
  Function g = attention_group(p);
  PrimFunc f = lower_group(g, "attention_kernel", LowerOptions{});
  auto bufs = allocations(f);
  ASSERT_FALSE(bufs.empty());
  for (auto& b : bufs) {  // all per task (a block of queries), none global
    EXPECT_EQ(b->scope, BufferScope::Local) << b->name;
    EXPECT_LT(b->numel(), 128 * 128) << b->name << " is as large as the scores";
  }
  bool parallel = false;
  visit_prim(
      f.body, [](const PrimExpr&) {},
      [&](const Stmt& s) {
        if (auto* l = s.as<ForNode>()) parallel |= l->for_kind == ForKind::Parallel;
      });
  EXPECT_TRUE(parallel) << f;
  Data d = random_data(g, 1);
  auto want = reference(p, d);
  expect_close(run(f, g, d), want, 1e-5, 1e-4, "online-softmax kernel");
  expect_close(run(lower_compute_rule(g), g, d), want, 1e-5, 1e-4, "compute rule");
}

TEST(AttentionLowering, LastKeyBlockStoresTheOutputWhileTheNextOperandsArePrefetched) {
  // Three key blocks: the last block's P V tiles are the output (times 1 / l), with no pass
  // over a row buffer after it; while one product runs, the rows the next one reads (V of
  // the keys being scored, K of the next block, Q of the next task) are prefetched.
  Problem p{{3}, 128, 192, 64, 64};
  Function g = attention_group(p);
  PrimFunc f = lower_group(g, "attention_kernel", LowerOptions{});
  std::set<std::string> prefetched;
  int output_stores = 0, from_tile = 0;
  visit_prim(
      f.body,
      [&](const PrimExpr& e) {
        auto* c = e.as<PrimCallNode>();
        if (c && c->op == Intrinsic::Prefetch)
          prefetched.insert(c->args[0].as<LoadNode>()->buffer->name);
      },
      [&](const Stmt& s) {
        auto* st = s.as<StoreNode>();
        if (!st || st->buffer->name != f.params.back()->name) return;
        ++output_stores;
        bool tile = false;
        visit_prim(st->value, [&](const PrimExpr& e) {
          if (auto* l = e.as<LoadNode>()) tile |= l->buffer->name == "register_tile";
        });
        from_tile += tile;
      });
  EXPECT_EQ(prefetched, (std::set<std::string>{"p0", "p1", "p2"})) << f;
  EXPECT_GT(output_stores, 0);
  EXPECT_EQ(from_tile, output_stores) << "the output is stored from the register tiles\n" << f;
  Data d = random_data(g, 7);
  expect_close(run(f, g, d), reference(p, d), 1e-5, 1e-4, "three key blocks");
}

TEST(AttentionLowering, MasksCausalAndTailsMatchTheReference) {
  // Odd sizes: the query and key blocks have tails, E and Ev are not vector multiples.
  const std::vector<int64_t> batch{2, 3};
  std::vector<Problem> problems;
  auto base = [&] { return Problem{batch, 37, 45, 5, 7}; };
  problems.push_back(base());
  Problem bool_ls = base();
  bool_ls.mask_shape = {37, 45};
  bool_ls.mask_dtype = DType::Bool;
  problems.push_back(bool_ls);
  Problem padding = base();  // key padding [B, 1, 1, S]
  padding.mask_shape = {2, 1, 1, 45};
  padding.mask_dtype = DType::Bool;
  problems.push_back(padding);
  Problem additive = base();
  additive.mask_shape = {3, 37, 45};
  problems.push_back(additive);
  Problem causal = base();
  causal.causal = true;
  causal.scale = 0.7;
  problems.push_back(causal);
  Problem causal_mask = additive;
  causal_mask.causal = true;
  problems.push_back(causal_mask);
  Problem wide = Problem{{4}, 70, 130, 32, 48};  // several key blocks, 16-lane head dim
  wide.causal = true;
  problems.push_back(wide);
  unsigned seed = 10;
  for (const Problem& p : problems) {
    Function g = attention_group(p);
    Data d = random_data(g, ++seed);
    auto want = reference(p, d);
    std::string what = "problem " + std::to_string(seed);
    expect_close(run(lower_group(g, "attention_kernel", LowerOptions{}), g, d), want, 1e-5, 1e-4,
                 what + " kernel");
    expect_close(run(lower_compute_rule(g), g, d), want, 1e-5, 1e-4, what + " compute rule");
    // The GPU form with its block/thread loops run on the CPU.
    expect_close(run(lower_attention_rows(g, "rows", ForKind::Parallel, ForKind::Serial), g, d),
                 want, 1e-5, 1e-4, what + " one row per thread");
  }
}

TEST(AttentionLowering, GpuFormCompilesToPtx) {
  Problem p{{2, 4}, 50, 50, 16, 16};
  p.mask_shape = {2, 1, 1, 50};
  p.mask_dtype = DType::Bool;
  p.causal = true;
  Function g = attention_group(p);
  LowerOptions gpu;
  gpu.gpu = true;
  PrimFunc f = lower_group(g, "attention_gpu", gpu);
  bool bound = false;
  visit_prim(
      f.body, [](const PrimExpr&) {},
      [&](const Stmt& s) {
        if (auto* l = s.as<ForNode>()) bound |= l->for_kind == ForKind::GpuThreadX;
      });
  EXPECT_TRUE(bound) << f;
  std::string ptx = codegen::compile_cuda({passes::lower_gpu_phases(f)})->get_source("ptx");
  EXPECT_NE(ptx.find(".entry attention_gpu"), std::string::npos) << ptx.substr(0, 2000);
}

TEST(AttentionLowering, LargeScoresFloat64AndFullyMaskedRows) {
  // Scores around 1e3 overflow exp without the running max.
  Problem big{{3}, 20, 33, 8, 8};
  Function g = attention_group(big);
  Data d = random_data(g, 5, 300.0);
  expect_close(run(lower_group(g, "k", LowerOptions{}), g, d), reference(big, d), 1e-5, 1e-4,
               "large scores");

  Problem f64{{2}, 9, 17, 3, 4};
  f64.dtype = DType::Float64;
  g = attention_group(f64);
  d = random_data(g, 6);
  expect_close(run(lower_group(g, "k", LowerOptions{}), g, d), reference(f64, d), 1e-12, 1e-10,
               "float64");

  // A row with every key masked is NaN, as softmax over all -inf is (and the compute rule).
  Problem masked{{1}, 4, 70, 4, 4};
  masked.mask_shape = {4, 70};
  masked.mask_dtype = DType::Bool;
  g = attention_group(masked);
  d = random_data(g, 7);
  for (int j = 0; j < 70; ++j) d.values[3][1 * 70 + j] = 0;  // row 1: all dropped
  for (int j = 0; j < 64; ++j) d.values[3][2 * 70 + j] = 0;  // row 2: only the last block
  auto want = reference(masked, d);
  ASSERT_TRUE(std::isnan(want[4]));
  ASSERT_FALSE(std::isnan(want[8]));
  expect_close(run(lower_group(g, "k", LowerOptions{}), g, d), want, 1e-5, 1e-4, "masked rows");
  expect_close(run(lower_compute_rule(g), g, d), want, 1e-5, 1e-4, "masked rows, compute rule");
}

TEST(AttentionLowering, TypeRelationRejectsBadOperands) {
  auto t = [](std::vector<int64_t> s, DType d = DType::Float32) { return TensorType{s, d}; };
  Expr q = var("q", t({2, 8, 4})), k = var("k", t({2, 10, 4})), v = var("v", t({2, 10, 6}));
  Expr out = call("nn.attention", {q, k, v}, {}, "attn");
  EXPECT_EQ(out->type.tensor(), t({2, 8, 6}));
  EXPECT_DOUBLE_EQ(as<CallNode>(out)->attrs.get_float("scale", 0), 0.5);
  auto fails = [&](std::vector<Expr> args, const std::string& needle, Attrs attrs = {}) {
    try {
      call("nn.attention", args, attrs, "attn");
      ADD_FAILURE() << "expected an error mentioning '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("attn"), std::string::npos) << e.what();
    }
  };
  fails({q, var("k2", t({3, 10, 4})), v}, "same batch dimensions");
  fails({q, var("k3", t({2, 10, 5})), v}, "features");
  fails({q, k, var("v2", t({2, 11, 6}))}, "number of rows");
  fails({q, k, v, var("m", t({8, 9}, DType::Bool))}, "does not broadcast");
  fails({q, k, v, var("m2", t({8, 10}, DType::Int32))}, "must be bool");
  fails({q, k}, "takes 3 inputs");
  fails({q, k, v}, "causal", Attrs({{"causal", int64_t{2}}}));
}

}  // namespace
}  // namespace ember::passes
