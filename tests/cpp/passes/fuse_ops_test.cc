#include "ember/passes/fuse_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ember/codegen/build.h"
#include "ember/ir/op.h"
#include "ember/passes/lower.h"
#include "ember/support/error.h"
#include "pass_test_util.h"

namespace ember::passes {
namespace {

using namespace ir;
using runtime::NDArray;

NDArray random_tensor(std::vector<int64_t> shape, unsigned seed) {
  return testing::normal_tensor(shape, seed);
}

Expr conv(const Expr& x, int64_t out_c, unsigned seed, const std::string& name) {
  int64_t in_c = x->type.tensor().shape[1];
  return call("nn.conv2d", {x, constant(random_tensor({out_c, in_c, 3, 3}, seed), name + ".w")},
              Attrs({{"padding", std::vector<int64_t>{1, 1}}}), name);
}

Expr bias(const Expr& x, unsigned seed, const std::string& name) {
  int64_t c = x->type.tensor().shape[1];
  return call("add", {x, constant(random_tensor({c, 1, 1}, seed), name + ".b")}, {}, name);
}

// The primitive-function calls in the body of `f`, in order.
std::vector<const CallNode*> groups(const Function& f) {
  std::vector<const CallNode*> out;
  for (auto& e : post_order(f->body))
    if (auto* c = as<CallNode>(e); c && c->fn) out.push_back(c);
  return out;
}

std::vector<std::string> ops_of(const CallNode* group) {
  std::vector<std::string> ops;
  for (auto& e : post_order(group->fn->body))
    if (auto* c = as<CallNode>(e)) ops.push_back(c->op->name);
  return ops;
}

Expr input() { return var("x", TensorType{{1, 4, 8, 8}, DType::Float32}); }

TEST(FuseOps, ConvBiasReluIsOneGroup) {
  Expr x = input();
  Expr y = call("nn.relu", {bias(conv(x, 8, 1, "conv1"), 2, "bn1")}, {}, "relu1");
  Function f = fuse_ops(function({x}, y));
  auto g = groups(f);
  ASSERT_EQ(g.size(), 1u) << to_string(f);
  EXPECT_EQ(ops_of(g[0]), (std::vector<std::string>{"nn.conv2d", "add", "nn.relu"}));
  EXPECT_EQ(g[0]->fn->name, "conv1 + bn1 + relu1");
  auto patterns = fusion_patterns(g[0]->fn);
  ASSERT_EQ(patterns.size(), 1u);
  EXPECT_EQ(patterns[0], "conv2d+bias/residual+activation epilogue");
}

TEST(FuseOps, ResidualAddJoinsTheSecondConv) {
  Expr x = input();
  Expr a = call("nn.relu", {conv(x, 4, 1, "conv1")}, {}, "relu1");
  Expr b = conv(a, 4, 2, "conv2");
  Expr y = call("nn.relu", {call("add", {b, a}, {}, "add")}, {}, "relu2");
  Function f = fuse_ops(function({x}, y));
  auto g = groups(f);
  ASSERT_EQ(g.size(), 2u) << to_string(f);
  EXPECT_EQ(ops_of(g[0]), (std::vector<std::string>{"nn.conv2d", "nn.relu"}));
  EXPECT_EQ(ops_of(g[1]), (std::vector<std::string>{"nn.conv2d", "add", "nn.relu"}));
}

TEST(FuseOps, TwoConvBranchesThatDoNotRejoinElementwiseStaySeparate) {
  Expr x = input();
  Expr a = conv(x, 4, 1, "conv1");
  Expr b1 = conv(a, 4, 2, "conv2");
  Expr b2 = conv(a, 4, 3, "conv3");
  Expr y = call("concatenate", {b1, b2}, Attrs({{"axis", int64_t{1}}}), "cat");
  std::vector<runtime::FusionEdge> why;
  Function f = fuse_ops(function({x}, y), 256, &why);
  auto g = groups(f);
  ASSERT_EQ(g.size(), 4u) << to_string(f);
  for (auto* c : g) EXPECT_EQ(ops_of(c).size(), 1u);
  // Each edge out of conv1 is reported with a reason.
  int reported = 0;
  for (auto& d : why)
    if (d.producer == "nn.conv2d 'conv1'") {
      EXPECT_FALSE(d.fused);
      EXPECT_NE(d.reason.find("anchor"), std::string::npos) << d.reason;
      ++reported;
    }
  EXPECT_EQ(reported, 2);
}

Expr max_pool(const Expr& x, int64_t k, int64_t s, int64_t p, const std::string& name) {
  return call("nn.max_pool2d", {x},
              Attrs({{"pool_size", std::vector<int64_t>{k, k}},
                     {"strides", std::vector<int64_t>{s, s}},
                     {"padding", std::vector<int64_t>{p, p}}}),
              name);
}

Expr depthwise(const Expr& x, unsigned seed, const std::string& name) {
  int64_t c = x->type.tensor().shape[1];
  return call("nn.conv2d", {x, constant(random_tensor({c, 1, 3, 3}, seed), name + ".w")},
              Attrs({{"padding", std::vector<int64_t>{1, 1}}, {"groups", c}}), name);
}

Expr pointwise(const Expr& x, int64_t out_c, unsigned seed, const std::string& name,
               int64_t stride = 1) {
  int64_t in_c = x->type.tensor().shape[1];
  return call("nn.conv2d", {x, constant(random_tensor({out_c, in_c, 1, 1}, seed), name + ".w")},
              Attrs({{"strides", std::vector<int64_t>{stride, stride}}}), name);
}

TEST(FuseOps, ConvActivationPoolingIsOneKernelAndTheNextConvItsOwn) {
  Expr x = input();
  Expr a = call("nn.relu", {conv(x, 4, 1, "conv1")}, {}, "relu1");
  Expr p = max_pool(a, 2, 2, 0, "pool");
  Expr y = conv(p, 4, 2, "conv2");
  Function f = fuse_ops(function({x}, y));
  auto g = groups(f);
  ASSERT_EQ(g.size(), 2u) << to_string(f);
  EXPECT_EQ(ops_of(g[0]), (std::vector<std::string>{"nn.conv2d", "nn.relu", "nn.max_pool2d"}));
  auto patterns = fusion_patterns(g[0]->fn);
  EXPECT_NE(std::find(patterns.begin(), patterns.end(), "conv+pooling"), patterns.end());
  EXPECT_EQ(ops_of(g[1]), (std::vector<std::string>{"nn.conv2d"}));
}

TEST(FuseOps, DepthwiseThenPointwiseConvIsOneKernel) {
  Expr x = input();
  Expr a = call("nn.relu", {depthwise(x, 1, "dw")}, {}, "relu1");
  Expr y = call("nn.relu", {bias(pointwise(a, 8, 2, "pw"), 3, "b")}, {}, "relu2");
  Function f = fuse_ops(function({x}, y));
  auto g = groups(f);
  ASSERT_EQ(g.size(), 1u) << to_string(f);
  auto patterns = fusion_patterns(g[0]->fn);
  EXPECT_NE(std::find(patterns.begin(), patterns.end(), "depthwise conv -> pointwise conv"),
            patterns.end());
}

TEST(FuseOps, TwoAnchorPatternsKeepTheirConstraints) {
  Expr x = input();
  // A strided 1x1 conv, a 3x3 conv after a depthwise one, and a depthwise conv whose output
  // is also used elsewhere: none fuses with the conv before it.
  Expr dw1 = depthwise(x, 1, "dw1");
  Expr s = pointwise(dw1, 4, 2, "strided", 2);
  Expr full = conv(depthwise(x, 3, "dw2"), 4, 4, "full");
  Expr dw3 = depthwise(x, 5, "dw3");
  Expr used = call("add", {pointwise(dw3, 4, 6, "pw3"), dw3}, {}, "add");
  Function f = fuse_ops(function({x}, tuple({s, full, used})));
  for (auto* g : groups(f))
    for (auto& p : fusion_patterns(g->fn))
      EXPECT_EQ(p.find("pointwise"), std::string::npos) << g->fn->name;
}

// The conv under a pooling and the depthwise conv under a pointwise conv are computed tile by
// tile: no buffer holds either whole, and the fused kernel matches the unfused build.
TEST(FuseOps, TwoAnchorKernelsKeepNoWholeIntermediateAndAgree) {
  Expr x = var("x", TensorType{{2, 8, 14, 20}, DType::Float32});
  Expr pooled =
      max_pool(call("nn.relu", {bias(conv(x, 8, 1, "c"), 2, "b")}, {}, "r"), 3, 2, 1, "mp");
  Expr dwpw =
      call("nn.relu", {pointwise(call("nn.relu", {depthwise(x, 3, "dw")}, {}, "r1"), 12, 4, "pw")},
           {}, "r2");
  for (Expr y : {pooled, dwpw}) {
    Function f = function({x}, y);
    Function fused = fuse_ops(f);
    auto g = groups(fused);
    ASSERT_EQ(g.size(), 1u);
    PrimFunc pf = lower_group(g[0]->fn, "k", LowerOptions{});
    const int64_t intermediate = 2 * 8 * 14 * 20;
    visit_prim(
        pf.body, [](const PrimExpr&) {},
        [&](const Stmt& s) {
          // The conv's padded input is the only whole-size buffer (it is a kernel input).
          if (auto* a = s.as<AllocateNode>(); a && a->buffer->name != "conv2d_pad")
            EXPECT_LT(a->buffer->numel(), intermediate / 4) << a->buffer->name << "\n" << pf;
        });
    NDArray in = random_tensor({2, 8, 14, 20}, 9);
    std::vector<NDArray> outs;
    for (bool fuse : {true, false}) {
      PassContext ctx;
      if (!fuse) ctx.disabled_passes = {"FuseOps"};
      auto lib = build(f, "llvm", {}, ctx);
      runtime::GraphExecutor ex(lib->graph, lib->module);
      ex.set_input(0, in);
      ex.run();
      outs.push_back(ex.get_output(0).clone());
    }
    for (int64_t i = 0; i < outs[0].numel(); ++i)
      ASSERT_NEAR(outs[0].data_as<float>()[i], outs[1].data_as<float>()[i], 1e-4) << i;
  }
}

// The conv under a pooling accumulates as many channels at once as the FMA latency needs
// (two ports x 4 cycles: 8), each a vector of its row, not a fixed 4 (half the FMA peak).
TEST(FuseOps, ConvUnderAPoolingAccumulatesEnoughChannelsForTheFmaLatency) {
  Expr x = var("x", TensorType{{1, 8, 10, 12}, DType::Float32});
  Function f = function({x}, max_pool(call("nn.relu", {conv(x, 16, 1, "c")}), 2, 2, 0, "mp"));
  Function fused = fuse_ops(f);
  auto g = groups(fused);
  ASSERT_EQ(g.size(), 1u);
  // Rows of 12 pixels: one 12-lane vector at 512 bits, vectors of 8 at 256.
  for (auto [bits, lanes] : {std::pair<int, int64_t>{512, 12}, {256, 8}}) {
    PrimFunc pf = lower_group(g[0]->fn, "k", LowerOptions{MachineModel::for_vector_bits(bits)});
    int64_t accumulators = 0;
    visit_prim(
        pf.body, [](const PrimExpr&) {},
        [&](const Stmt& s) {
          if (auto* a = s.as<AllocateNode>(); a && a->buffer->name == "conv2d.local")
            accumulators = a->buffer->numel() / lanes;
        });
    EXPECT_EQ(accumulators, 8) << bits << "\n" << pf;
  }
}

TEST(FuseOps, IntermediateThatIsAlsoAnOutputIsNotFusedAway) {
  Expr x = input();
  Expr a = conv(x, 4, 1, "conv1");
  Expr r = call("nn.relu", {a}, {}, "relu1");
  std::vector<runtime::FusionEdge> why;
  Function f = fuse_ops(function({x}, tuple({a, r})), 256, &why);
  auto g = groups(f);
  ASSERT_EQ(g.size(), 2u) << to_string(f);
  ASSERT_EQ(why.size(), 1u);
  EXPECT_FALSE(why[0].fused);
  EXPECT_NE(why[0].reason.find("model output"), std::string::npos) << why[0].reason;
}

TEST(FuseOps, MaxDepthLimitsGroupSize) {
  Expr x = input();
  Expr y = x;
  for (int i = 0; i < 6; ++i) y = call("nn.relu", {y}, {}, "r" + std::to_string(i));
  EXPECT_EQ(groups(fuse_ops(function({x}, y))).size(), 1u);
  EXPECT_GT(groups(fuse_ops(function({x}, y), 2)).size(), 1u);
  EXPECT_THROW(fuse_ops(function({x}, y), 0), Error);
}

TEST(FuseOps, ViewsStayOutsideKernels) {
  Expr x = input();
  Expr r =
      call("reshape", {call("nn.relu", {x})}, Attrs({{"newshape", std::vector<int64_t>{1, -1}}}));
  Function f = fuse_ops(function({x}, r));
  // relu fuses into the reshape's group (one kernel that writes the reshaped output).
  EXPECT_EQ(groups(f).size(), 1u) << to_string(f);
  Function only_view = fuse_ops(
      function({x}, call("reshape", {x}, Attrs({{"newshape", std::vector<int64_t>{-1}}}))));
  EXPECT_EQ(groups(only_view).size(), 0u);
}

// The fused conv + bias + relu kernel is one loop nest: the conv is accumulated in a tile of
// one vector and the ReLU reads it there; no buffer holds the whole conv output.
TEST(FuseOps, FusedKernelHasNoIntermediateBufferForTheReluInput) {
  Expr x = var("x", TensorType{{1, 4, 8, 32}, DType::Float32});
  Expr y = call("nn.relu", {bias(conv(x, 8, 1, "conv"), 2, "bn")}, {}, "relu");
  Function f = fuse_ops(function({x}, y));
  auto g = groups(f);
  ASSERT_EQ(g.size(), 1u);
  PrimFunc pf = lower_group(g[0]->fn, "k", LowerOptions{});
  int64_t conv_size = 1 * 8 * 8 * 32;
  int allocs = 0;
  // Under the allocation of the padded input: its nest, then the conv/epilogue nest.
  Stmt body = pf.body;
  while (auto* a = body.as<AllocateNode>()) body = a->body;
  size_t nests = body.as<SeqNode>() ? body.as<SeqNode>()->seq.size() : 1;
  visit_prim(
      pf.body, [](const PrimExpr&) {},
      [&](const Stmt& s) {
        if (auto* a = s.as<AllocateNode>()) {
          ++allocs;
          EXPECT_LT(a->buffer->numel(), conv_size) << "buffer " << a->buffer->name << "\n" << pf;
        }
      });
  // Padded input (its own nest) + the conv/epilogue nest.
  EXPECT_LE(nests, 2u) << pf;
  EXPECT_GE(allocs, 1) << pf;
  std::string text = to_string(pf);
  EXPECT_NE(text.find("max("), std::string::npos);
}

// Fused and unfused builds agree.
TEST(FuseOps, FusedAndUnfusedBuildsAgree) {
  Expr x = input();
  Expr a = call("nn.relu", {bias(conv(x, 6, 1, "conv1"), 2, "b1")}, {}, "relu1");
  Expr b = bias(conv(a, 6, 3, "conv2"), 4, "b2");
  Expr y = call("nn.relu", {call("add", {b, conv(x, 6, 5, "skip")})}, {}, "relu2");
  Function f = function({x}, y);
  NDArray in = random_tensor({1, 4, 8, 8}, 9);
  std::vector<NDArray> outs;
  for (bool fuse : {true, false}) {
    PassContext ctx;
    // The plain layout: AlterOpLayout would pad the 6 channels to a block of 8 at 256 bits
    // (not at 512), adding layout conversions to the kernel count.
    ctx.disabled_passes = {"AlterOpLayout"};
    if (!fuse) ctx.disabled_passes.insert("FuseOps");
    auto lib = build(f, "llvm", {}, ctx);
    EXPECT_EQ(lib->kernels.size(), fuse ? 3u : 8u);  // the skip conv is a second anchor
    runtime::GraphExecutor ex(lib->graph, lib->module);
    ex.set_input(0, in);
    ex.run();
    outs.push_back(ex.get_output(0).clone());
  }
  for (int64_t i = 0; i < outs[0].numel(); ++i)
    ASSERT_NEAR(outs[0].data_as<float>()[i], outs[1].data_as<float>()[i], 1e-5) << i;
}

}  // namespace
}  // namespace ember::passes
