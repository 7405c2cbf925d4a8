// The GPU target without a GPU: every op and a conv + batch_norm + relu network compile to
// PTX that ptxas assembles for sm_80 and sm_90 (skipped when ptxas is absent); a fused
// conv + relu is one entry whose max precedes its global store; running without a driver is
// a clear ember::Error. With a GPU, kernels also run and match the CPU target.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <regex>

#include "../gpu_emulation.h"
#include "../op_examples.h"
#include "../ptxas.h"
#include "ember/codegen/build.h"
#include "ember/codegen/codegen.h"
#include "ember/ir/op.h"
#include "ember/passes/schedule.h"
#include "ember/runtime/cuda.h"
#include "ember/runtime/graph_executor.h"
#include "ember/support/error.h"

namespace ember {
namespace {

using namespace ember::ir;
using namespace ember::test_util;

// Builds `body` over `params` for the GPU and checks the PTX with ptxas for both archs.
void expect_assembles(const std::vector<Expr>& params, const Expr& body, const std::string& what) {
  auto lib = build(function(params, body), "cuda");
  std::string ptx = lib->get_source("ptx");
  ASSERT_NE(ptx.find(".entry"), std::string::npos) << what;
  ASSERT_NE(ptx.find(".target sm_80"), std::string::npos) << what;
  if (!have_ptxas()) return;
  EXPECT_EQ(ptxas(ptx, "sm_80"), "") << what;
  auto lib90 = build(function(params, body), "cuda -arch=sm_90");
  std::string ptx90 = lib90->get_source("ptx");
  EXPECT_NE(ptx90.find(".target sm_90"), std::string::npos) << what;
  EXPECT_EQ(ptxas(ptx90, "sm_90"), "") << what;
}

TEST(NVPTX, EveryOpAssemblesForSm80AndSm90) {
  if (!have_ptxas()) std::cout << "[ note ] " << kPtxas << " not found: PTX is not assembled\n";
  auto table = examples();
  std::vector<std::string> skipped;
  for (const std::string& name : list_ops()) {
    std::vector<Expr> params;
    Expr body;
    std::string why;
    try {
      if (table.count(name))
        body = table[name](params);
      else
        body = generic_example(name, params, &why);
    } catch (const Error& e) {
      why = e.what();  // the example's attributes no longer fit the op: report, do not fail
      body = nullptr;
    }
    if (!body) {
      skipped.push_back(name + " (" + why.substr(0, 120) + ")");
      continue;
    }
    SCOPED_TRACE(name);
    expect_assembles(params, body, name);
  }
  for (auto& s : skipped) std::cout << "[ note ] no GPU example for op " << s << "\n";
  EXPECT_LT(skipped.size(), list_ops().size() / 4) << "most ops have no example";
}

runtime::NDArray random_tensor(const TensorType& t, std::mt19937& rng) {
  runtime::NDArray x = runtime::NDArray::empty(t.shape, t.dtype);
  std::normal_distribution<double> normal;
  for (int64_t i = 0; i < x.numel(); ++i) {
    switch (t.dtype) {
      case DType::Float32:
        x.data_as<float>()[i] = static_cast<float>(normal(rng));
        break;
      case DType::Float64:
        x.data_as<double>()[i] = normal(rng);
        break;
      case DType::BFloat16:
        x.data_as<uint16_t>()[i] = bf16_bits(static_cast<float>(normal(rng)));
        break;
      case DType::Int32:
        x.data_as<int32_t>()[i] = static_cast<int32_t>(rng() % 3);
        break;
      case DType::Int64:
        x.data_as<int64_t>()[i] = static_cast<int64_t>(rng() % 3);
        break;
      case DType::Bool:
        x.data_as<bool>()[i] = rng() % 2;
        break;
    }
  }
  return x;
}

double element(const runtime::NDArray& t, int64_t i) {
  switch (t.dtype()) {
    case DType::Float32:
      return t.data_as<float>()[i];
    case DType::Float64:
      return t.data_as<double>()[i];
    case DType::BFloat16:
      return bf16_to_float(t.data_as<uint16_t>()[i]);
    case DType::Int32:
      return t.data_as<int32_t>()[i];
    case DType::Int64:
      return static_cast<double>(t.data_as<int64_t>()[i]);
    case DType::Bool:
      return t.data_as<bool>()[i];
  }
  return 0;
}

// Runs `fn` built for "llvm" and the serialized "cuda" build on the CPU; same outputs (to
// `tol` relative to 1 + |value|: sums of a thousand products in another order need 1e-4).
void expect_gpu_schedule_matches_cpu(const Function& fn, const std::string& what, double tol = 1e-5,
                                     const passes::PassContext& ctx = {}) {
  std::mt19937 rng(7);
  std::vector<runtime::NDArray> inputs;
  for (auto& p : fn->params) inputs.push_back(random_tensor(p->type.tensor(), rng));
  auto cpu = build(fn, "llvm");
  auto gpu = build(fn, "cuda", {}, ctx);
  std::vector<PrimFunc> serial;
  for (PrimFunc f : gpu->prim_funcs) {
    // The tensor-core kernels' pipelined copies run as plain copies here (the mma stays a
    // serial loop: lower_warp_mma is the GPU's alone).
    f = passes::pipeline_shared_tiles(passes::lower_gpu_phases(f));
    f.body = SerializeGpuLoops().mutate(f.body);
    serial.push_back(f);
  }
  auto emulated = codegen::compile_cpu(serial);
  runtime::GraphExecutor a(cpu->graph, cpu->module), b(gpu->graph, emulated);
  for (size_t i = 0; i < inputs.size(); ++i) {
    a.set_input(static_cast<int>(i), inputs[i]);
    b.set_input(static_cast<int>(i), inputs[i]);
  }
  a.run();
  b.run();
  ASSERT_EQ(a.num_outputs(), b.num_outputs());
  for (int o = 0; o < a.num_outputs(); ++o) {
    runtime::NDArray x = a.get_output(o), y = b.get_output(o);
    ASSERT_EQ(x.shape(), y.shape()) << what;
    for (int64_t i = 0; i < x.numel(); ++i) {
      double u = element(x, i), v = element(y, i);
      if (std::isnan(u) && std::isnan(v)) continue;
      ASSERT_NEAR(u, v, tol * (1 + std::abs(u))) << what << ": output " << o << " element " << i;
    }
  }
}

TEST(NVPTX, GpuSchedulesComputeWhatTheCpuComputes) {
  auto table = examples();
  for (const std::string& name : list_ops()) {
    std::vector<Expr> params;
    std::string why;
    Expr body;
    try {
      body = table.count(name) ? table[name](params) : generic_example(name, params, &why);
    } catch (const Error&) {
      continue;  // reported by EveryOpAssemblesForSm80AndSm90
    }
    if (!body) continue;
    SCOPED_TRACE(name);
    expect_gpu_schedule_matches_cpu(function(params, body), name);
  }
}

// The tensor-core template (gpu_tensor_core.cc) at each precision. Emulated, its WarpMma
// loops run as float32 FMAs, so they match the CPU: this checks the lane ownership, the
// shared tiles and the epilogue; the PTX holds one mma.sync per warp tile and k step of the
// precision's shape and assembles. (The fragments' rounding is checked on a GPU:
// tests/gpu, benchmarks/gpu_gemm.py.)
TEST(NVPTX, TensorCoreTemplateComputesWhatTheCpuComputes) {
  struct Case {
    std::string name;
    Function fn;
    int64_t mma_per_kernel;  // per chunk at TF32 (FP16/BF16: half as many k steps)
  };
  std::vector<Case> cases;
  {
    // M 128 x N 192: 32 x 32 blocks of 4 warps (1 x 2 tiles each), K 256 in chunks of 32.
    Expr x = f32("x", {128, 256}), w = f32("w", {192, 256}), b = f32("b", {192});
    Expr y =
        call("nn.relu",
             {call("nn.bias_add", {call("nn.dense", {x, w}), b}, Attrs({{"axis", int64_t{-1}}}))});
    cases.push_back({"dense + bias + relu", function({x, w, b}, y), 2 * 4});
  }
  {
    // 2048 x 1024: 128 blocks of 128 x 128, 8 warps of 4 x 4 tiles; K 64 in chunks of 16 (two
    // chunks of both tiles fill most of the 48 KiB of shared memory).
    Expr x = f32("x", {2048, 64}), w = f32("w", {1024, 64});
    cases.push_back(
        {"dense in 128 x 128 blocks", function({x, w}, call("nn.dense", {x, w})), 16 * 2});
  }
  {
    // A dense over [batch, tokens, K] (BERT's): its two M axes are fused, 256 x 64.
    Expr x = f32("x", {2, 128, 64}), w = f32("w", {64, 64});
    cases.push_back({"dense of 3-D data", function({x, w}, call("nn.dense", {x, w})), 2 * 4});
  }
  {
    // B runs along N in memory; 4 batches of 64 x 96 in 32 x 32 blocks.
    Expr a = f32("a", {4, 64, 128}), b = f32("b", {4, 128, 96});
    cases.push_back({"batch_matmul", function({a, b}, call("nn.batch_matmul", {a, b})), 2 * 4});
  }
  // Convolutions: M is the output channels, N a strip of 8 pixel columns by rows; the
  // chunk runs along the input channels, the window's taps around it (0: some mma).
  using V = std::vector<int64_t>;
  auto conv = [&](const std::string& name, V x_shape, V w_shape, int64_t stride, int64_t pad) {
    Expr x = f32("x", x_shape), w = f32("w", w_shape), b = f32("b", {w_shape[0]});
    Expr y =
        call("nn.conv2d", {x, w}, Attrs({{"strides", V{stride, stride}}, {"padding", V{pad}}}));
    y = call("nn.relu", {call("nn.bias_add", {y, b}, Attrs({{"axis", int64_t{1}}}))});
    cases.push_back({name, function({x, w, b}, y), 0});
  };
  conv("3x3 conv + bias + relu", {1, 32, 12, 12}, {64, 32, 3, 3}, 1, 1);
  conv("1x1 conv of two images, 10 x 10 (shifted strips)", {2, 48, 10, 10}, {32, 48, 1, 1}, 1, 0);
  conv("3x3 conv of stride 2", {1, 16, 17, 17}, {32, 16, 3, 3}, 2, 1);
  conv("3x3 conv of 7 x 7 pixels (a strip past the edge)", {2, 32, 7, 7}, {64, 32, 3, 3}, 1, 1);
  for (const char* precision : {"tf32", "bf16", "fp16"}) {
    passes::PassContext ctx;
    ctx.config["cuda.matmul_precision"] = precision;
    for (const Case& c : cases) {
      SCOPED_TRACE(c.name + std::string(" at ") + precision);
      expect_gpu_schedule_matches_cpu(c.fn, c.name, 1e-4, ctx);
      auto lib = build(c.fn, "cuda -arch=sm_90", {}, ctx);
      const std::string ptx = lib->get_source("ptx");
      const std::string type = precision == std::string("fp16") ? "f16" : precision;
      const std::string shape =
          type == "tf32" ? "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
                         : "mma.sync.aligned.m16n8k16.row.col.f32." + type + "." + type + ".f32";
      int64_t count = 0;
      for (size_t at = ptx.find(shape); at != std::string::npos; at = ptx.find(shape, at + 1))
        ++count;
      const int64_t want =
          precision == std::string("tf32") ? c.mma_per_kernel : c.mma_per_kernel / 2;
      // LLVM may unroll the chunk loop (the halves alternate), repeating its mma.
      EXPECT_TRUE(count > 0 && (want == 0 || count % want == 0)) << count << " vs " << want;
      if (c.mma_per_kernel) {  // GEMMs: pipelined (a padded conv input stays synchronous)
        EXPECT_NE(ptx.find("cp.async.ca.shared.global"), std::string::npos);
        EXPECT_NE(ptx.find("cp.async.wait_group 1"), std::string::npos);
      }
      if (have_ptxas()) EXPECT_EQ(ptxas(ptx, "sm_90"), "");
    }
  }
}

TEST(NVPTX, TensorCoresAtAnySizeOfAtLeastOneTile) {
  passes::PassContext ctx;
  ctx.config["cuda.matmul_precision"] = "tf32";
  auto mma = [&](const Function& fn, const passes::PassContext& c) {
    return build(fn, "cuda", {}, c)->get_source("ptx").find("mma.sync") != std::string::npos;
  };
  {
    // M 70, N 50: 32 x 32 tiles, the last of each axis shifted back over the one before.
    Expr x = f32("x", {70, 96}), w = f32("w", {50, 96}), b = f32("b", {50});
    Function fn =
        function({x, w, b}, call("nn.relu", {call("nn.bias_add", {call("nn.dense", {x, w}), b},
                                                  Attrs({{"axis", int64_t{-1}}}))}));
    expect_gpu_schedule_matches_cpu(fn, "dense 70 x 50", 1e-5, ctx);
    EXPECT_TRUE(mma(fn, ctx));
    EXPECT_FALSE(mma(fn, {}));  // precision highest: the FMA templates
  }
  {
    // N 20 is less than a tile; K 36 is no multiple of 8: the FMA templates.
    Expr x = f32("x", {64, 96}), w = f32("w", {20, 96});
    Function fn = function({x, w}, call("nn.dense", {x, w}));
    expect_gpu_schedule_matches_cpu(fn, "dense 64 x 20", 1e-5, ctx);
    EXPECT_FALSE(mma(fn, ctx));
    Expr y = f32("y", {64, 36}), v = f32("v", {64, 36});
    EXPECT_FALSE(mma(function({y, v}, call("nn.dense", {y, v})), ctx));
  }
}

// The tensor-core passes before and after, on one kernel's loop IR: lower_warp_mma leaves
// no WarpMma loop and makes one mma_sync per lane element of each tile and k step;
// pipeline_shared_tiles doubles the two operand tiles and turns their staging into
// asynchronous copies with one wait per chunk, and leaves a kernel without mma as it was.
TEST(NVPTX, TensorCorePassesBeforeAndAfter) {
  Expr x = f32("x", {128, 64}), w = f32("w", {128, 64});
  passes::PassContext ctx;
  ctx.config["cuda.matmul_precision"] = "tf32";
  auto lib = build(function({x, w}, call("nn.dense", {x, w})), "cuda", {}, ctx);
  ASSERT_EQ(lib->prim_funcs.size(), 1u);
  PrimFunc phased = passes::lower_gpu_phases(lib->prim_funcs[0]);
  auto count = [](const Stmt& s, auto pred) {
    int64_t n = 0;
    visit_prim(
        s, [&](const PrimExpr& e) { n += pred(e, Stmt()); },
        [&](const Stmt& x) { n += pred(PrimExpr(), x); });
    return n;
  };
  auto warp_loops = [](const PrimExpr&, const Stmt& s) {
    auto* f = s ? s.as<ForNode>() : nullptr;
    return f && f->for_kind == ForKind::WarpMma;
  };
  auto calls = [](Intrinsic op) {
    return [op](const PrimExpr& e, const Stmt&) {
      auto* c = e ? e.as<PrimCallNode>() : nullptr;
      return c && c->op == op;
    };
  };
  EXPECT_EQ(count(phased.body, warp_loops), 1);
  EXPECT_EQ(count(phased.body, calls(Intrinsic::MmaSync)), 0);
  PrimFunc mma = passes::lower_warp_mma(phased, MmaPrecision::TF32);
  EXPECT_EQ(count(mma.body, warp_loops), 0);
  // 128 x 128 in 32 x 32 blocks (the most blocks): 4 warps of 1 x 2 tiles, 4 elements each,
  // per k step (an unrolled loop).
  EXPECT_EQ(count(mma.body, calls(Intrinsic::MmaSync)), 1 * 2 * 4);

  PrimFunc piped = passes::pipeline_shared_tiles(mma);
  EXPECT_EQ(count(mma.body, calls(Intrinsic::AsyncCopy)), 0);
  EXPECT_EQ(count(piped.body, calls(Intrinsic::AsyncCopy)), 2 * 2);  // before and in the loop
  EXPECT_EQ(count(piped.body, calls(Intrinsic::AsyncWait)), 1);
  EXPECT_EQ(count(piped.body, calls(Intrinsic::AsyncCommit)), 2);
  auto shared_elements = [](const Stmt& s) {
    int64_t n = 0;
    visit_prim(
        s, [](const PrimExpr&) {},
        [&](const Stmt& x) {
          auto* a = x.as<AllocateNode>();
          if (a && a->buffer->scope == BufferScope::Shared) n += a->buffer->numel();
        });
    return n;
  };
  EXPECT_EQ(shared_elements(piped.body), 2 * shared_elements(mma.body));

  // The FMA template's kernel (precision highest) has no mma: the pass leaves it alone.
  auto fma = build(function({x, w}, call("nn.dense", {x, w})), "cuda");
  PrimFunc plain = passes::lower_gpu_phases(fma->prim_funcs[0]);
  EXPECT_TRUE(passes::pipeline_shared_tiles(plain).body.same_as(plain.body));
}

TEST(NVPTX, MatmulPrecisionErrorsSayWhatToDo) {
  Expr x = f32("x", {128, 64}), w = f32("w", {128, 64});
  Function fn = function({x, w}, call("nn.dense", {x, w}));
  auto expect_error = [&](const std::string& target, const std::string& p, const char* says) {
    passes::PassContext ctx;
    ctx.config["cuda.matmul_precision"] = p;
    try {
      build(fn, target, {}, ctx);
      ADD_FAILURE() << target << " " << p << " built";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  expect_error("llvm", "tf32", "is for target \"cuda\"");
  expect_error("cuda -arch=sm_75", "fp16", "sm_80 or newer");
  expect_error("cuda", "float16", "unknown matmul precision 'float16'");
  passes::PassContext highest;
  highest.config["cuda.matmul_precision"] = "highest";
  EXPECT_NO_THROW(build(fn, "llvm", {}, highest));
}

// Shapes large enough for the shared-memory templates (tiled conv/dense/matmul, block
// reductions), with tails that do not divide the tiles: emulated, they match the CPU.
std::vector<std::pair<std::string, Function>> template_cases() {
  using V = std::vector<int64_t>;
  std::vector<std::pair<std::string, Function>> cases;
  auto add = [&](const std::string& name, std::vector<Expr> p, Expr body) {
    cases.emplace_back(name, function(std::move(p), std::move(body)));
  };
  auto dense_bias = [](const Expr& x, const Expr& w, const Expr& b) {
    return call("nn.bias_add", {call("nn.dense", {x, w}), b}, Attrs({{"axis", int64_t{-1}}}));
  };
  {
    Expr x = f32("x", {70, 100}), w = f32("w", {50, 100}), b = f32("b", {50});
    add("dense + bias + relu", {x, w, b}, call("nn.relu", {dense_bias(x, w, b)}));
  }
  {
    // 26000 outputs: tiles shrink to 32 x 32 for more blocks; 130 and 200 leave tails.
    Expr x = f32("x", {130, 96}), w = f32("w", {200, 96});
    add("dense in small tiles", {x, w}, call("nn.dense", {x, w}));
  }
  {
    // Too few outputs for tiles over a long sum: a block per output (tree reduce).
    Expr x = f32("x", {1, 600}), w = f32("w", {37, 600}), b = f32("b", {37});
    add("batch-1 dense (block per output)", {x, w, b}, dense_bias(x, w, b));
  }
  {
    Expr x = f32("x", {1, 64, 5, 5}), w = f32("w", {24, 64, 3, 3});
    add("conv of few pixels (block per output)", {x, w},
        call("nn.relu", {call("nn.conv2d", {x, w}, Attrs({{"padding", V{1}}}))}));
  }
  {
    // 32 x 1040 outputs: 33 tiles of 32 x 32 (a partial last one), too few blocks for the
    // GPU, over 1000 products: 4 groups of 64 threads split the sum (split-K in the block),
    // each staging chunks of 10; the epilogue adds the groups' partials and the bias.
    Expr x = f32("x", {32, 1000}), w = f32("w", {1040, 1000}), b = f32("b", {1040});
    add("dense, few tiles (split-K)", {x, w, b}, dense_bias(x, w, b));
  }
  {
    // A batch-1 conv of 16 x 16 pixels, 128 channels: 32 tiles, each group 32 channels.
    Expr x = f32("x", {1, 128, 16, 16}), w = f32("w", {128, 128, 3, 3});
    add("conv 3x3, few tiles (split-K)", {x, w},
        call("nn.relu", {call("nn.conv2d", {x, w}, Attrs({{"padding", V{1}}}))}));
    // 14 x 14 pixels in tiles of 16 columns: the partials are copied under the edge's guard.
    Expr x2 = f32("x", {1, 512, 14, 14}), w2 = f32("w", {256, 512, 1, 1});
    add("conv 1x1, 14 x 14, few tiles (split-K)", {x2, w2}, call("nn.conv2d", {x2, w2}));
  }
  {
    Expr a = f32("a", {2, 33, 40}), b = f32("b", {40, 65});
    add("matmul", {a, b}, call("nn.matmul", {a, b}));
  }
  {
    Expr a = f32("a", {3, 40, 24}), b = f32("b", {3, 24, 70});
    add("batch_matmul", {a, b}, call("nn.batch_matmul", {a, b}));
  }
  {
    Expr x = f32("x", {2, 8, 17, 17}), w = f32("w", {16, 8, 3, 3});
    add("conv 3x3 + relu", {x, w},
        call("nn.relu", {call("nn.conv2d", {x, w}, Attrs({{"padding", V{1}}}))}));
  }
  {
    Expr x = f32("x", {1, 6, 23, 19}), w = f32("w", {20, 6, 3, 3});
    add("conv stride 2", {x, w},
        call("nn.conv2d", {x, w}, Attrs({{"padding", V{1}}, {"strides", V{2}}})));
  }
  {
    // 14 rows in tiles of 4 (the last one partial, its guard tested once per thread), 20
    // channels in chunks of 4 (9 taps each): the register tile's loop has no guard.
    Expr x = f32("x", {2, 20, 14, 14}), w = f32("w", {32, 20, 3, 3});
    add("conv 3x3, 14 x 14 (operand loads shared)", {x, w},
        call("nn.conv2d", {x, w}, Attrs({{"padding", V{1}}})));
  }
  {
    Expr x = f32("x", {2, 24, 9, 9}), w = f32("w", {40, 24, 1, 1});
    add("conv 1x1", {x, w}, call("nn.conv2d", {x, w}));
  }
  {
    Expr x = f32("x", {1, 16, 12, 12}), w = f32("w", {16, 1, 3, 3});
    // Each output channel reads its own input channel: no reuse to tile for, so it keeps
    // the simple schedule (one thread per output).
    add("depthwise conv (simple schedule)", {x, w},
        call("nn.conv2d", {x, w}, Attrs({{"padding", V{1}}, {"groups", int64_t{16}}})));
  }
  {
    Expr x = f32("x", {4, 1000});
    add("softmax", {x}, call("nn.softmax", {x}));
  }
  {
    Expr x = f32("x", {2, 40, 3, 5});
    add("softmax axis 1", {x}, call("nn.softmax", {x}, Attrs({{"axis", int64_t{1}}})));
  }
  {
    Expr x = f32("x", {3, 300});
    add("log_softmax", {x}, call("nn.log_softmax", {x}));
  }
  {
    Expr x = f32("x", {2, 5, 200}), g = f32("g", {200}), b = f32("b", {200});
    add("layer_norm", {x, g, b}, call("nn.layer_norm", {x, g, b}));
  }
  {
    Expr x = f32("x", {2, 8, 9, 7});
    add("mean", {x}, call("mean", {x}, Attrs({{"axis", V{2, 3}}})));
  }
  {
    Expr x = f32("x", {3, 500, 4});
    add("sum", {x}, call("sum", {x}, Attrs({{"axis", V{1}}})));
  }
  {
    Expr x = f32("x", {5, 77});
    add("max", {x}, call("max", {x}, Attrs({{"axis", V{1}}})));
  }
  {
    // An encoder layer, as the transformer families: projections, attention, residual,
    // layer norms and a feed-forward block.
    const int64_t n = 8, d = 32;
    Expr x = f32("x", {2, n, d}), wq = f32("wq", {d, d}), wk = f32("wk", {d, d}),
         wv = f32("wv", {d, d}), w1 = f32("w1", {64, d}), w2 = f32("w2", {d, 64}),
         g = f32("g", {d}), b = f32("b", {d});
    auto heads = [&](Expr t) {
      t = call("reshape", {t}, Attrs({{"newshape", V{2, n, 4, 8}}}));
      return call("transpose", {t}, Attrs({{"axes", V{0, 2, 1, 3}}}));
    };
    Expr q = heads(call("nn.dense", {x, wq})), k = heads(call("nn.dense", {x, wk})),
         v = heads(call("nn.dense", {x, wv}));
    Expr att =
        call("transpose", {call("nn.attention", {q, k, v})}, Attrs({{"axes", V{0, 2, 1, 3}}}));
    Expr h =
        call("nn.layer_norm",
             {call("add", {x, call("reshape", {att}, Attrs({{"newshape", V{2, n, d}}}))}), g, b});
    Expr ff = call("nn.dense", {call("nn.relu", {call("nn.dense", {h, w1})}), w2});
    add("encoder layer", {x, wq, wk, wv, w1, w2, g, b},
        call("nn.layer_norm", {call("add", {h, ff}), g, b}));
  }
  {
    // Attention on the GPU: 24 rows per block (L = 48), keys staged 32 at a time (48 keys:
    // a partial second tile), causal; and a broadcast mask over 70 keys with 20 rows per
    // block; and 5 rows, too few for a block of one entry's rows (a row per thread).
    Expr q = f32("q", {2, 48, 16}), k = f32("k", {2, 48, 16}), v = f32("v", {2, 48, 24});
    add("attention, causal, key tiles", {q, k, v},
        call("nn.attention", {q, k, v}, Attrs({{"causal", int64_t{1}}})));
    Expr q2 = f32("q", {3, 40, 16}), k2 = f32("k", {3, 70, 16}), v2 = f32("v", {3, 70, 8}),
         m2 = f32("mask", {40, 70});
    add("attention, mask, key tiles", {q2, k2, v2, m2}, call("nn.attention", {q2, k2, v2, m2}));
    Expr q3 = f32("q", {4, 5, 16}), k3 = f32("k", {4, 9, 16}), v3 = f32("v", {4, 9, 16});
    add("attention, a row per thread (simple schedule)", {q3, k3, v3},
        call("nn.attention", {q3, k3, v3}));
  }
  {
    Expr x = f32("x", {2, 16, 8, 8});
    add("global average pool", {x},
        call("nn.adaptive_avg_pool2d", {x}, Attrs({{"output_size", V{1}}})));
  }
  return cases;
}

std::ptrdiff_t count(const std::string& text, const std::string& what) {
  std::ptrdiff_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(NVPTX, SharedMemoryTemplatesComputeWhatTheCpuComputes) {
  for (auto& [name, fn] : template_cases()) {
    SCOPED_TRACE(name);
    bool split = name.find("split-K") != std::string::npos;
    expect_gpu_schedule_matches_cpu(fn, name, split ? 1e-4 : 1e-5);
    std::string ptx = build(fn, "cuda")->get_source("ptx");
    // The other cases are large enough for a template that shares memory in the block.
    bool simple = name.find("simple schedule") != std::string::npos;
    EXPECT_EQ(ptx.find(".shared") == std::string::npos, simple) << name;
    EXPECT_EQ(ptx.find("bar.sync") == std::string::npos, simple) << name;
    // Register tiles, accumulators and attention rows stay in registers: no local memory.
    EXPECT_EQ(ptx.find(".local"), std::string::npos) << name;
    // Which template: a tree of partial sums for a block per output, padded operand rows
    // (33 words, not 32: no bank conflicts) for the tiles.
    std::string loop = build(fn, "cuda")->get_source("loop");
    if (name.find("block per output") != std::string::npos)
      EXPECT_NE(loop.find(".tree"), std::string::npos) << loop;
    if (name.find("small tiles") != std::string::npos)
      EXPECT_NE(loop.find("*33)"), std::string::npos) << loop;
    // Split-K: the groups' partials, and 256 threads (4 groups of 64).
    EXPECT_EQ(loop.find(".partial.local") != std::string::npos, split) << loop;
    if (split) EXPECT_NE(loop.find("[0, 256) threadIdx.x"), std::string::npos) << loop;
    // A register tile shares each operand value between FMAs (here 144 FMAs per 60 shared
    // loads), also where its rows leave a partial last tile and its channels a chunk that
    // would not divide: a guard left inside the tile made LLVM load both operands once per
    // FMA (1 FMA per 2 loads).
    if (name.find("loads shared") != std::string::npos)
      EXPECT_GE(2 * count(ptx, "fma.rn.f32"), 3 * count(ptx, "ld.shared")) << name << "\n" << loop;
  }
}

// A conv and the pooling of its output are one kernel on the GPU too; a depthwise conv and the
// pointwise conv after it are two there (FuseOps: the GPU's one-kernel form recomputed the
// depthwise conv per output channel). Emulated, each matches the CPU.
TEST(NVPTX, TwoAnchorKernelsComputeWhatTheCpuComputes) {
  using V = std::vector<int64_t>;
  Expr x = f32("x", {2, 8, 13, 11}), w = f32("w", {12, 8, 3, 3}), dw = f32("dw", {8, 1, 3, 3}),
       pw = f32("pw", {16, 8, 1, 1});
  Expr conv = call("nn.relu", {call("nn.conv2d", {x, w}, Attrs({{"padding", V{1}}}))});
  std::vector<std::pair<std::string, Function>> cases{
      {"conv + max pool 3x3/2",
       function({x, w},
                call("nn.max_pool2d", {conv},
                     Attrs({{"pool_size", V{3, 3}}, {"strides", V{2, 2}}, {"padding", V{1, 1}}})))},
      {"conv + avg pool 2x2/2",
       function({x, w}, call("nn.avg_pool2d", {conv},
                             Attrs({{"pool_size", V{2, 2}}, {"strides", V{2, 2}}})))},
      {"depthwise + pointwise",
       function(
           {x, dw, pw},
           call("nn.relu",
                {call("nn.conv2d",
                      {call("nn.relu", {call("nn.conv2d", {x, dw},
                                             Attrs({{"padding", V{1}}, {"groups", int64_t{8}}}))}),
                       pw})}))},
  };
  for (auto& [name, fn] : cases) {
    SCOPED_TRACE(name);
    EXPECT_EQ(build(fn, "cuda")->kernels.size(), name == "depthwise + pointwise" ? 2u : 1u);
    expect_gpu_schedule_matches_cpu(fn, name);
  }
}

TEST(NVPTX, SharedMemoryTemplatesAssemble) {
  if (!have_ptxas()) GTEST_SKIP() << kPtxas << " not found";
  for (auto& [name, fn] : template_cases()) {
    SCOPED_TRACE(name);
    expect_assembles(fn->params, fn->body, name);
  }
}

TEST(NVPTX, Float64AndIntegerKernelsAssemble) {
  auto f64 = [](const char* n) { return var(n, TensorType{{4, 33}, DType::Float64}); };
  std::vector<Expr> p{f64("a"), f64("b")};
  expect_assembles(p, call("nn.softmax", {call("maximum", {p[0], p[1]})}), "float64");
  std::vector<Expr> q{var("i", TensorType{{4, 33}, DType::Int64}),
                      var("j", TensorType{{33}, DType::Int64})};
  expect_assembles(q, call("maximum", {call("add", {q[0], q[1]}), q[0]}), "int64");
}

// x -> conv2d -> batch_norm -> relu, and a dense head.
TEST(NVPTX, ConvBatchNormReluNetworkAssembles) {
  using V = std::vector<int64_t>;
  Expr x = f32("x", {1, 3, 32, 32}), w = f32("w", {16, 3, 3, 3});
  std::vector<Expr> params{x, w};
  std::vector<Expr> bn{call("nn.conv2d", {x, w}, Attrs({{"padding", V{1}}}), "conv1")};
  for (const char* n : {"gamma", "beta", "mean", "var"})
    bn.push_back(params.emplace_back(f32(n, {16})));
  Expr y = call("nn.relu", {call("nn.batch_norm", bn, {}, "bn1")}, {}, "relu1");
  Expr fc = params.emplace_back(f32("fc", {10, 16}));
  Expr z = call(
      "nn.dense",
      {call("flatten", {call("nn.adaptive_avg_pool2d", {y}, Attrs({{"output_size", V{1}}}))}), fc});
  expect_assembles(params, call("nn.softmax", {z}), "conv + batch_norm + relu network");
  expect_gpu_schedule_matches_cpu(function(params, call("nn.softmax", {z})), "network");
}

// Every value the kernel stores to global memory is the result of a max (the ReLU applied
// to the accumulator in registers), and the kernel stores nothing else: the epilogue is
// fused, not a second pass over memory.
void expect_relu_before_each_global_store(const std::string& ptx) {
  std::regex store_re(R"(st\.global\.f32\s+\[[^\]]*\],\s*(%f\d+);)");
  int stores = 0;
  for (auto it = std::sregex_iterator(ptx.begin(), ptx.end(), store_re);
       it != std::sregex_iterator(); ++it) {
    ++stores;
    std::string reg = (*it)[1];
    // The register's definition: the last instruction before the store that writes it.
    std::regex def_re("\\n\\s*([a-z][A-Za-z0-9.]*)\\s+" + reg + ",");
    std::string before = ptx.substr(0, it->position());
    std::string op;
    for (auto d = std::sregex_iterator(before.begin(), before.end(), def_re);
         d != std::sregex_iterator(); ++d)
      op = (*d)[1];
    EXPECT_EQ(op.rfind("max.", 0), 0u) << "store " << stores << " stores " << reg
                                       << ", defined by '" << op << "', not by the ReLU's max";
  }
  EXPECT_GT(stores, 0) << ptx;
  std::regex any_store(R"(st\.global)");
  EXPECT_EQ(std::distance(std::sregex_iterator(ptx.begin(), ptx.end(), any_store),
                          std::sregex_iterator()),
            stores)
      << "only the ReLU's results are stored:\n"
      << ptx;
}

// conv2d and relu scheduled together: one entry point, the relu's max applied to the
// accumulator before each global store.
TEST(NVPTX, FusedConvReluIsOneKernelWithMaxBeforeStore) {
  using V = std::vector<int64_t>;
  auto in = placeholder("x", {1, 8, 16, 16}, DType::Float32);
  auto wt = placeholder("w", {16, 8, 3, 3}, DType::Float32);
  Expr conv = call("nn.conv2d", {f32("x", {1, 8, 16, 16}), f32("w", {16, 8, 3, 3})},
                   Attrs({{"padding", V{1}}}));
  auto* c = as<CallNode>(conv);
  Tensor out = c->op->compute({in, wt}, c->attrs, conv->type.tensor());
  Tensor relu = compute("relu", out.shape(), [&](const std::vector<PrimVar>& i) {
    return max(out(std::vector<PrimExpr>(i.begin(), i.end())), PrimExpr(0.0));
  });
  passes::Schedule sch({relu});
  passes::apply_gpu_schedule(sch);
  PrimFunc f = passes::lower_schedule(sch, "conv_relu", {in, wt});
  std::string loop = to_string(f);
  EXPECT_NE(loop.find("blockIdx.x"), std::string::npos) << loop;
  EXPECT_NE(loop.find("threadIdx.x"), std::string::npos) << loop;
  auto mod = codegen::compile_cuda({passes::lower_gpu_phases(f)});
  std::string ptx = mod->get_source("ptx");
  std::regex entry(R"(\.entry\s)");
  EXPECT_EQ(
      std::distance(std::sregex_iterator(ptx.begin(), ptx.end(), entry), std::sregex_iterator()), 1)
      << ptx;
  expect_relu_before_each_global_store(ptx);
  EXPECT_NE(ptx.find(".shared"), std::string::npos) << "conv is tiled through shared memory";
  EXPECT_NE(ptx.find("%tid.x"), std::string::npos);
  EXPECT_NE(ptx.find("%ctaid.x"), std::string::npos);
  EXPECT_EQ(ptx.find("tanh.approx"), std::string::npos);
  if (have_ptxas()) EXPECT_EQ(ptxas(ptx, "sm_80"), "");
}

// The whole pipeline on conv -> batch_norm -> relu with constant parameters: one kernel,
// one PTX entry, the conv tiled through shared memory and the ReLU's max applied to each
// value before its global store; emulated, it matches the CPU target.
TEST(NVPTX, FusedConvBatchNormReluThroughThePipeline) {
  using V = std::vector<int64_t>;
  std::mt19937 rng(3);
  auto param = [&](std::vector<int64_t> shape, double lo, double hi) {
    runtime::NDArray t = runtime::NDArray::empty(shape, DType::Float32);
    std::uniform_real_distribution<float> u(static_cast<float>(lo), static_cast<float>(hi));
    for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = u(rng);
    return constant(t);
  };
  Expr x = f32("x", {1, 8, 18, 18});
  Expr y =
      call("nn.conv2d", {x, param({16, 8, 3, 3}, -0.3, 0.3)}, Attrs({{"padding", V{1}}}), "conv1");
  y = call("nn.batch_norm",
           {y, param({16}, 0.5, 1.5), param({16}, -0.2, 0.2), param({16}, -0.2, 0.2),
            param({16}, 0.5, 1.5)},
           {}, "bn1");
  Function fn = function({x}, call("nn.relu", {y}, {}, "relu1"));
  auto lib = build(fn, "cuda");
  ASSERT_EQ(lib->graph->kernels.size(), 1u) << lib->get_source("graph");
  std::string ptx = lib->get_source("ptx");
  std::regex entry(R"(\.entry\s)");
  EXPECT_EQ(
      std::distance(std::sregex_iterator(ptx.begin(), ptx.end(), entry), std::sregex_iterator()),
      1);
  EXPECT_NE(ptx.find(".shared"), std::string::npos);
  EXPECT_NE(ptx.find("bar.sync"), std::string::npos);
  expect_relu_before_each_global_store(ptx);
  if (have_ptxas()) {
    EXPECT_EQ(ptxas(ptx, "sm_80"), "");
    EXPECT_EQ(ptxas(build(fn, "cuda -arch=sm_90")->get_source("ptx"), "sm_90"), "");
  }
  expect_gpu_schedule_matches_cpu(fn, "conv + batch_norm + relu");
}

// Hand-written loop IR: shared memory, a barrier and a block-wide tree reduction.
TEST(NVPTX, SharedMemoryAndBarrier) {
  auto a = make_buffer("A", DType::Float32, {4, 128});
  auto out = make_buffer("out", DType::Float32, {4});
  auto sh = make_buffer("partial", DType::Float32, {128}, BufferScope::Shared);
  PrimVar b("b"), t("t"), s("s");
  std::vector<Stmt> body{store(sh, t, load(a, b * 128 + t)), evaluate(barrier())};
  for (int64_t half = 64; half >= 1; half /= 2) {
    body.push_back(
        if_then_else(t < PrimExpr(half), store(sh, t, load(sh, t) + load(sh, t + PrimExpr(half)))));
    body.push_back(evaluate(barrier()));
  }
  body.push_back(if_then_else(t == PrimExpr(0), store(out, b, load(sh, PrimExpr(0)))));
  Stmt nest = for_loop(b, 0, 4, ForKind::GpuBlockX,
                       allocate(sh, for_loop(t, 0, 128, ForKind::GpuThreadX, seq(body))));
  PrimFunc f{"block_sum", {a, out}, 1, nest};
  auto mod = codegen::compile_cuda({passes::lower_gpu_phases(f)}, {"sm_90"});
  std::string ptx = mod->get_source("ptx");
  EXPECT_NE(ptx.find(".shared"), std::string::npos) << ptx;
  EXPECT_NE(ptx.find("bar.sync"), std::string::npos) << ptx;
  EXPECT_NE(ptx.find(".maxntid 128, 1, 1"), std::string::npos) << ptx;
  auto& dims = std::static_pointer_cast<runtime::cuda::CudaModule>(mod)->kernels().at("block_sum");
  EXPECT_EQ(dims.grid[0], 4);
  EXPECT_EQ(dims.block[0], 128);
  if (have_ptxas()) EXPECT_EQ(ptxas(ptx, "sm_90"), "");
}

TEST(NVPTX, ErrorsAreClear) {
  Expr x = f32("x", {4});
  try {
    build(function({x}, call("nn.relu", {x})), "cuda -arch=sm_12");
    FAIL() << "expected an error";
  } catch (const InternalError& e) {
    FAIL() << e.what();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sm_12"), std::string::npos) << e.what();
  }
  // A GPU-bound loop on the CPU target is a compiler bug, never a crash.
  auto a = make_buffer("A", DType::Float32, {4});
  PrimVar i("i");
  PrimFunc f{
      "gpu_on_cpu", {a}, 0, for_loop(i, 0, 4, ForKind::GpuThreadX, store(a, i, PrimExpr(1.0)))};
  EXPECT_THROW(codegen::compile_cpu({f}), InternalError);
}

TEST(NVPTX, RunningWithoutAGpuIsAClearError) {
  if (runtime::cuda::available()) GTEST_SKIP() << "a GPU is present";
  Expr x = f32("x", {4});
  auto lib = build(function({x}, call("nn.relu", {x})), "cuda");
  try {
    runtime::GraphExecutor ex(lib->graph, lib->module);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("no CUDA"), std::string::npos) << msg;
    EXPECT_NE(msg.find("target=\"llvm\""), std::string::npos) << msg;
  }
}

// A tensor in GPU memory is never read on the host: clone and copy_from go through the
// driver (a clear error without one), never a memcpy of a device pointer.
TEST(NVPTX, CudaTensorsAreCopiedByTheDriver) {
  if (runtime::cuda::available()) GTEST_SKIP() << "a GPU is present";
  auto host = std::make_shared<std::vector<float>>(4, 1.0f);
  runtime::NDArray dev = runtime::NDArray::view(host, host->data(), {4}, DType::Float32,
                                                runtime::Device{runtime::DeviceType::CUDA, 0});
  runtime::NDArray cpu = runtime::NDArray::zeros({4}, DType::Float32);
  for (auto& attempt : std::vector<std::function<void()>>{
           [&] { dev.clone(); }, [&] { cpu.copy_from(dev); }, [&] { dev.copy_from(cpu); }}) {
    try {
      attempt();
      FAIL() << "expected an error";
    } catch (const InternalError& e) {
      FAIL() << e.what();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("CUDA"), std::string::npos) << e.what();
    }
  }
}

// With a GPU: the network of the test above runs and matches the CPU target.
TEST(NVPTX, GpuMatchesCpu) {
  if (!runtime::cuda::available()) GTEST_SKIP() << "no CUDA GPU: GPU kernels are not run";
  using V = std::vector<int64_t>;
  Expr x = f32("x", {2, 3, 17, 17}), w = f32("w", {8, 3, 3, 3});
  Expr y = call("nn.relu", {call("nn.conv2d", {x, w}, Attrs({{"padding", V{1}}}))});
  Expr z = call("nn.softmax",
                {call("flatten", {call("nn.max_pool2d", {y}, Attrs({{"pool_size", V{2}}}))})});
  Function fn = function({x, w}, z);
  std::mt19937 rng(0);
  std::normal_distribution<float> dist;
  std::vector<runtime::NDArray> inputs;
  for (auto& p : fn->params) {
    runtime::NDArray t = runtime::NDArray::empty(p->type.tensor().shape, DType::Float32);
    for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = dist(rng);
    inputs.push_back(t);
  }
  std::vector<runtime::NDArray> outs;
  for (const char* target : {"llvm", "cuda"}) {
    auto lib = build(fn, target);
    runtime::GraphExecutor ex(lib->graph, lib->module);
    for (size_t i = 0; i < inputs.size(); ++i) ex.set_input(static_cast<int>(i), inputs[i]);
    ex.run();
    outs.push_back(runtime::cuda::to_host(ex.get_output(0)).clone());
  }
  ASSERT_EQ(outs[0].numel(), outs[1].numel());
  for (int64_t i = 0; i < outs[0].numel(); ++i)
    EXPECT_NEAR(outs[0].data_as<float>()[i], outs[1].data_as<float>()[i], 1e-5) << i;
}

}  // namespace
}  // namespace ember
