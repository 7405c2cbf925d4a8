// Type relations of the registered ops: output shapes (against values PyTorch gives),
// attribute normalisation, user-facing errors, and the stages each compute rule builds.
// Op numerics are checked end to end against PyTorch in tests/python/test_ops.py; the
// prim_math expansions that no op exposes alone (log, erf, pow) and the float64 forms are
// checked here against the C library, compiled through a vectorized loop.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "../op_examples.h"
#include "ember/codegen/codegen.h"
#include "ember/ir/graph.h"
#include "ember/ir/op.h"
#include "ember/ir/prim_math.h"
#include "ember/support/error.h"

namespace ember::ir {
namespace {

Expr f32(const std::string& name, std::vector<int64_t> shape) {
  return var(name, TensorType{std::move(shape), DType::Float32});
}

std::vector<int64_t> shape_of(const Expr& e) { return e->type.tensor().shape; }

const Attrs& attrs_of(const Expr& e) { return as<CallNode>(e)->attrs; }

// Runs `fn`, expecting an ember::Error whose message contains every one of `words`.
template <class F>
void expect_error(F fn, std::vector<std::string> words) {
  try {
    fn();
    FAIL() << "expected an ember::Error";
  } catch (const InternalError& e) {
    FAIL() << "internal error instead of a user error: " << e.what();
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const auto& w : words)
      EXPECT_NE(msg.find(w), std::string::npos) << msg << "\nlacks: " << w;
  }
}

// Names of the compute stages (not placeholders) the op's compute rule builds.
std::vector<std::string> stage_names(const Expr& call_expr) {
  auto* c = as<CallNode>(call_expr);
  Tensor out = test_util::compute_on_placeholders(c);
  EXPECT_EQ(out.shape(), c->type.tensor().shape);
  EXPECT_EQ(out.dtype(), c->type.tensor().dtype);
  std::vector<std::string> names;
  for (const Tensor& t : topo_order({out}))
    if (!t->is_placeholder()) names.push_back(t->name);
  return names;
}

TEST(OpsTest, RegistryAndPatterns) {
  EXPECT_EQ(get_op("nn.conv2d")->pattern, OpPattern::OutEWiseFusable);
  EXPECT_EQ(get_op("nn.relu")->pattern, OpPattern::ElemWise);
  EXPECT_EQ(get_op("clip")->pattern, OpPattern::ElemWise);
  EXPECT_EQ(get_op("add")->pattern, OpPattern::Broadcast);
  EXPECT_EQ(get_op("nn.batch_norm")->pattern, OpPattern::Broadcast);
  EXPECT_EQ(get_op("transpose")->pattern, OpPattern::Injective);
  EXPECT_EQ(get_op("nn.max_pool2d")->pattern, OpPattern::OutEWiseFusable);
  EXPECT_EQ(get_op("nn.softmax")->pattern, OpPattern::Opaque);
  EXPECT_TRUE(get_op("reshape")->is_view);
  EXPECT_TRUE(get_op("flatten")->is_view);
  EXPECT_FALSE(get_op("transpose")->is_view);
  EXPECT_EQ(get_op("concatenate")->num_inputs, -1);
  EXPECT_STREQ(op_pattern_name(OpPattern::OutEWiseFusable), "OutEWiseFusable");
  auto ops = list_ops();
  for (const char* name : {"nn.dense", "nn.matmul", "nn.batch_matmul", "nn.bias_add",
                           "nn.avg_pool2d", "nn.adaptive_avg_pool2d", "sigmoid", "tanh", "exp",
                           "sqrt", "rsqrt", "subtract", "multiply", "divide", "flatten"})
    EXPECT_NE(std::find(ops.begin(), ops.end(), name), ops.end()) << name;
}

TEST(OpsTest, UnknownOpSuggestsNames) {
  expect_error([] { get_op("relu"); }, {"unknown op 'relu'", "did you mean", "nn.relu"});
  expect_error([] { get_op("nn.conv2"); }, {"nn.conv2d"});
  expect_error([] { get_op("frobnicate"); }, {"unknown op", "known ops are", "nn.softmax"});
}

TEST(OpsTest, Conv2dShapesAndNormalisedAttrs) {
  Expr x = f32("x", {2, 3, 32, 32});
  Expr c =
      call("nn.conv2d", {x, f32("w", {8, 3, 3, 3})}, Attrs({{"padding", std::vector<int64_t>{1}}}));
  EXPECT_EQ(shape_of(c), (std::vector<int64_t>{2, 8, 32, 32}));
  EXPECT_EQ(attrs_of(c).get_ints("padding", {}), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(attrs_of(c).get_ints("strides", {}), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(attrs_of(c).get_ints("dilation", {}), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(attrs_of(c).get_int("groups", 0), 1);
  // torch: conv2d(1x3x17x19, 5x3x7x7, stride 2, padding (3, 2), dilation 2) -> 1x5x6x6
  Expr d = call("nn.conv2d", {f32("a", {1, 3, 17, 19}), f32("w", {5, 3, 7, 7})},
                Attrs({{"strides", std::vector<int64_t>{2, 2}},
                       {"padding", std::vector<int64_t>{3, 2}},
                       {"dilation", std::vector<int64_t>{2, 2}}}));
  EXPECT_EQ(shape_of(d), (std::vector<int64_t>{1, 5, 6, 6}));
  EXPECT_EQ(attrs_of(d).get_ints("padding", {}), (std::vector<int64_t>{3, 2, 3, 2}));
  // Asymmetric padding (top, left, bottom, right) and depthwise.
  Expr e = call("nn.conv2d", {f32("a", {1, 24, 10, 10}), f32("w", {24, 1, 3, 3})},
                Attrs({{"padding", std::vector<int64_t>{0, 1, 2, 0}}, {"groups", int64_t{24}}}));
  EXPECT_EQ(shape_of(e), (std::vector<int64_t>{1, 24, 10, 9}));
  EXPECT_EQ(stage_names(c), (std::vector<std::string>{"conv2d_pad", "conv2d"}));
  // No padding: the compute reads the input directly.
  Expr f = call("nn.conv2d", {x, f32("w", {4, 3, 1, 1})});
  EXPECT_EQ(stage_names(f), (std::vector<std::string>{"conv2d"}));
}

TEST(OpsTest, Conv2dErrors) {
  Expr x = f32("x", {1, 64, 8, 8});
  expect_error([&] { call("nn.conv2d", {x, f32("w", {64, 32, 3, 3})}, {}, "layer1.0.conv1"); },
               {"nn.conv2d 'layer1.0.conv1'", "data has 64 channels but the weight expects 32",
                "[64, 32, 3, 3]", "groups=1", "check the weight or the groups attribute"});
  expect_error(
      [&] { call("nn.conv2d", {x, f32("w", {30, 16, 3, 3})}, Attrs({{"groups", int64_t{4}}})); },
      {"30 output channels", "groups=4"});
  expect_error([&] { call("nn.conv2d", {f32("x", {1, 3, 8}), f32("w", {4, 3, 3, 3})}); },
               {"data must be 4-D"});
  expect_error([&] { call("nn.conv2d", {f32("x", {1, 3, 2, 2}), f32("w", {4, 3, 5, 5})}); },
               {"larger than the padded input"});
  expect_error(
      [&] {
        call("nn.conv2d", {x, f32("w", {4, 64, 3, 3})},
             Attrs({{"padding", std::vector<int64_t>{1, 1, 1}}}));
      },
      {"padding", "1, 2 (h, w) or 4"});
  expect_error(
      [&] {
        call("nn.conv2d", {x, f32("w", {4, 64, 3, 3})},
             Attrs({{"strides", std::vector<int64_t>{0, 1}}}));
      },
      {"strides", ">= 1"});
  Expr xi = var("xi", TensorType{{1, 3, 8, 8}, DType::Int64});
  expect_error([&] { call("nn.conv2d", {xi, f32("w", {4, 3, 3, 3})}); }, {"float"});
}

TEST(OpsTest, BlockedLayoutsPadChannelsNoBlockDivides) {
  // 33 channels in blocks of 8: five blocks, the last with 7 pad channels; from_blocked
  // drops them again. The packed weight pads input and output channels alike.
  Expr x = f32("x", {1, 33, 5, 7});
  Expr b = call("to_blocked", {x}, Attrs({{"block", int64_t{8}}}));
  EXPECT_EQ(shape_of(b), (std::vector<int64_t>{1, 5, 5, 7, 8}));
  EXPECT_EQ(shape_of(call("from_blocked", {b}, Attrs({{"channels", int64_t{33}}}))),
            (std::vector<int64_t>{1, 33, 5, 7}));
  EXPECT_EQ(shape_of(call("from_blocked", {b})), (std::vector<int64_t>{1, 40, 5, 7}));
  Expr w = call("nn.pack_conv_weight", {f32("w", {5, 33, 3, 3})},
                Attrs({{"in_block", int64_t{8}}, {"out_block", int64_t{16}}}));
  EXPECT_EQ(shape_of(w), (std::vector<int64_t>{1, 5, 3, 3, 8, 16}));
  EXPECT_EQ(shape_of(call("nn.conv2d_blocked", {b, w})), (std::vector<int64_t>{1, 1, 3, 5, 16}));
  // Depthwise: groups is the real channel count, padded to the data's blocks.
  Expr dw = call("nn.pack_conv_weight", {f32("dw", {33, 1, 3, 3})},
                 Attrs({{"in_block", int64_t{1}}, {"out_block", int64_t{8}}}));
  EXPECT_EQ(shape_of(call("nn.conv2d_blocked", {b, dw}, Attrs({{"groups", int64_t{33}}}))),
            (std::vector<int64_t>{1, 5, 3, 5, 8}));
  expect_error([&] { call("nn.conv2d_blocked", {b, dw}, Attrs({{"groups", int64_t{41}}})); },
               {"does not match the packed weight", "groups=41"});
  expect_error([&] { call("from_blocked", {b}, Attrs({{"channels", int64_t{32}}}), "conv2"); },
               {"from_blocked 'conv2'", "channels = 32", "33 to 40"});
  expect_error([&] { call("to_blocked", {x}, Attrs({{"block", int64_t{0}}})); },
               {"block = 0", ">= 1"});
}

TEST(OpsTest, DenseMatmulBatchMatmul) {
  Expr d = call("nn.dense", {f32("x", {2, 7, 30}), f32("w", {10, 30})});
  EXPECT_EQ(shape_of(d), (std::vector<int64_t>{2, 7, 10}));
  EXPECT_EQ(stage_names(d), (std::vector<std::string>{"dense"}));
  expect_error([] { call("nn.dense", {f32("x", {4, 40}), f32("w", {10, 30})}, {}, "fc"); },
               {"nn.dense 'fc'", "40 features", "expects 30"});
  Expr m = call("nn.matmul", {f32("a", {3, 5, 6}), f32("b", {6, 4})});
  EXPECT_EQ(shape_of(m), (std::vector<int64_t>{3, 5, 4}));
  expect_error([] { call("nn.matmul", {f32("a", {5, 6}), f32("b", {5, 4})}); }, {"K is 6 vs 5"});
  Expr b = call("nn.batch_matmul", {f32("a", {3, 5, 6}), f32("b", {3, 6, 2})});
  EXPECT_EQ(shape_of(b), (std::vector<int64_t>{3, 5, 2}));
  expect_error([] { call("nn.batch_matmul", {f32("a", {3, 5, 6}), f32("b", {2, 6, 2})}); },
               {"batch sizes [3] and [2]", "do not broadcast"});
  // torch.matmul: batch dimensions broadcast, and a rank-1 right operand drops N.
  using V = std::vector<int64_t>;
  EXPECT_EQ(shape_of(call("nn.batch_matmul", {f32("a", {2, 1, 5, 6}), f32("b", {3, 6, 4})})),
            (V{2, 3, 5, 4}));
  EXPECT_EQ(shape_of(call("nn.batch_matmul", {f32("a", {5, 6}), f32("b", {3, 6, 4})})),
            (V{3, 5, 4}));
  EXPECT_EQ(shape_of(call("nn.matmul", {f32("a", {2, 5, 6}), f32("b", {6})})), (V{2, 5}));
  expect_error([] { call("nn.batch_matmul", {f32("a", {3, 5, 6}), f32("b", {3, 5, 2})}); },
               {"K is 6 vs 5"});
  expect_error([] { call("nn.matmul", {f32("a", {5, 6}), f32("b", {2, 6, 2})}); },
               {"[K, N] or [K]", "nn.batch_matmul"});
}

TEST(OpsTest, BroadcastAndElementwise) {
  Expr a = call("add", {f32("a", {4, 1, 3}), f32("b", {5, 1})});
  EXPECT_EQ(shape_of(a), (std::vector<int64_t>{4, 5, 3}));
  Expr s = call("multiply", {f32("a", {}), f32("b", {2, 3})});
  EXPECT_EQ(shape_of(s), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(stage_names(a), (std::vector<std::string>{"add"}));
  expect_error([] { call("subtract", {f32("a", {2, 3}), f32("b", {4})}, {}, "sub1"); },
               {"subtract 'sub1'", "cannot broadcast shapes [2, 3] and [4]", "3 vs 4"});
  Expr i = var("i", TensorType{{2}, DType::Int64});
  expect_error([&] { call("add", {f32("a", {2}), i}); }, {"dtypes differ", "int64"});
  expect_error([&] { call("nn.relu", {i}, {}, "act"); }, {"nn.relu 'act'", "int64", "float"});
  expect_error([&] { call("divide", {i, i}); }, {"divide", "int64", "float"});
  Expr c = call("clip", {f32("x", {3})}, Attrs({{"a_min", int64_t{0}}, {"a_max", 6.0}}));
  EXPECT_EQ(attrs_of(c).values().at("a_min"), AttrValue(0.0));
  expect_error([] { call("clip", {f32("x", {3})}, Attrs({{"a_min", 0.0}})); }, {"a_max"});
  expect_error([] { call("nn.relu", {f32("x", {3}), f32("y", {3})}); }, {"takes 1"});
  Expr r = call("nn.relu", {f32("x", {2, 3})});
  EXPECT_EQ(stage_names(r), (std::vector<std::string>{"relu"}));
}

TEST(OpsTest, BiasAddAndBatchNorm) {
  Expr x = f32("x", {2, 5, 4, 4});
  Expr b = call("nn.bias_add", {x, f32("b", {5})});
  EXPECT_EQ(shape_of(b), (std::vector<int64_t>{2, 5, 4, 4}));
  Expr b3 = call("nn.bias_add", {x, f32("b", {4})}, Attrs({{"axis", int64_t{-1}}}));
  EXPECT_EQ(attrs_of(b3).get_int("axis", 0), 3);
  expect_error([&] { call("nn.bias_add", {x, f32("b", {4})}); }, {"5 channels along axis 1"});
  Expr p = f32("p", {5});
  Expr bn = call("nn.batch_norm", {x, p, p, p, p});
  EXPECT_EQ(shape_of(bn), (std::vector<int64_t>{2, 5, 4, 4}));
  EXPECT_EQ(attrs_of(bn).get_float("epsilon", 0), 1e-5);
  expect_error([&] { call("nn.batch_norm", {x, p, p, f32("m", {3}), p}, {}, "bn1"); },
               {"nn.batch_norm 'bn1'", "moving_mean", "5 channels"});
}

TEST(OpsTest, PoolShapesMatchTorch) {
  auto pool = [](const char* op, std::vector<int64_t> in, Attrs attrs) {
    return shape_of(call(op, {f32("x", std::move(in))}, std::move(attrs)));
  };
  using V = std::vector<int64_t>;
  // Values from torch.nn.functional.max_pool2d / avg_pool2d.
  EXPECT_EQ(pool("nn.max_pool2d", {1, 1, 6, 6},
                 Attrs({{"pool_size", V{3}},
                        {"strides", V{2}},
                        {"padding", V{1}},
                        {"ceil_mode", int64_t{1}}})),
            (V{1, 1, 4, 4}));
  EXPECT_EQ(pool("nn.max_pool2d", {1, 1, 7, 8},
                 Attrs({{"pool_size", V{3, 3}}, {"strides", V{2, 2}}, {"ceil_mode", int64_t{1}}})),
            (V{1, 1, 3, 4}));
  // The last ceil-mode window would start in the padding: dropped.
  EXPECT_EQ(pool("nn.avg_pool2d", {1, 1, 5, 5},
                 Attrs({{"pool_size", V{2}},
                        {"strides", V{2}},
                        {"padding", V{1}},
                        {"ceil_mode", int64_t{1}}})),
            (V{1, 1, 3, 3}));
  EXPECT_EQ(pool("nn.max_pool2d", {2, 3, 9, 9}, Attrs({{"pool_size", V{3}}, {"dilation", V{2}}})),
            (V{2, 3, 5, 5}));
  EXPECT_EQ(pool("nn.adaptive_avg_pool2d", {1, 2, 7, 10}, Attrs({{"output_size", V{3, 4}}})),
            (V{1, 2, 3, 4}));
  Expr mp = call("nn.max_pool2d", {f32("x", {1, 1, 6, 6})},
                 Attrs({{"pool_size", V{3}}, {"strides", V{2}}, {"padding", V{1}}}));
  EXPECT_EQ(stage_names(mp), (std::vector<std::string>{"max_pool2d_pad", "max_pool2d"}));
  Expr ap = call("nn.avg_pool2d", {f32("x", {1, 1, 6, 6})},
                 Attrs({{"pool_size", V{2}}, {"strides", V{2}}}));
  EXPECT_EQ(stage_names(ap), (std::vector<std::string>{"avg_pool2d_sum", "avg_pool2d"}));
  expect_error([] { call("nn.max_pool2d", {f32("x", {1, 1, 6, 6})}); }, {"pool_size"});
  expect_error(
      [] {
        call("nn.max_pool2d", {f32("x", {1, 1, 6, 6})},
             Attrs({{"pool_size", V{2}}, {"padding", V{2}}}));
      },
      {"smaller than the pool window"});
}

// Huge strides and windows: checked arithmetic, not a size that wrapped past 64 bits (the
// ceil-mode count was (span + stride - 1) / stride, which wrapped to 0 outputs here).
TEST(OpsTest, PoolSizesDoNotOverflow) {
  using V = std::vector<int64_t>;
  const int64_t big = std::numeric_limits<int64_t>::max();
  auto pool = [](Attrs attrs) {
    return shape_of(call("nn.max_pool2d", {f32("x", {1, 1, 4, 4})}, std::move(attrs)));
  };
  // torch.nn.functional.max_pool2d(x, 2, stride=2**63 - 1, ceil_mode=True): 1 x 1.
  EXPECT_EQ(pool(Attrs({{"pool_size", V{2}}, {"strides", V{big}}, {"ceil_mode", int64_t{1}}})),
            (V{1, 1, 1, 1}));
  EXPECT_EQ(pool(Attrs({{"pool_size", V{3}},
                        {"strides", V{big - 1}},
                        {"padding", V{1}},
                        {"ceil_mode", int64_t{1}}})),
            (V{1, 1, 1, 1}));
  expect_error(
      [&] { pool(Attrs({{"pool_size", V{int64_t{1} << 40}}, {"dilation", V{int64_t{1} << 40}}})); },
      {"does not fit in 64 bits"});
}

TEST(OpsTest, ReshapeFlattenTransposeConcatenate) {
  using V = std::vector<int64_t>;
  Expr x = f32("x", {2, 3, 4});
  Expr r = call("reshape", {x}, Attrs({{"newshape", V{4, -1}}}));
  EXPECT_EQ(shape_of(r), (V{4, 6}));
  EXPECT_EQ(attrs_of(r).get_ints("newshape", {}), (V{4, 6}));
  expect_error([&] { call("reshape", {x}, Attrs({{"newshape", V{5, 5}}}), "view1"); },
               {"reshape 'view1'", "24 elements", "25 elements"});
  expect_error([&] { call("reshape", {x}, Attrs({{"newshape", V{-1, -1}}})); },
               {"more than one -1"});
  expect_error([&] { call("reshape", {x}, Attrs({{"newshape", V{5, -1}}})); }, {"24 elements"});
  EXPECT_EQ(shape_of(call("flatten", {x})), (V{2, 12}));
  EXPECT_EQ(shape_of(call("flatten", {x}, Attrs({{"start_dim", int64_t{0}}}))), (V{24}));
  EXPECT_EQ(shape_of(call("flatten", {x}, Attrs({{"end_dim", int64_t{-2}}}))), (V{2, 3, 4}));
  Expr t = call("transpose", {x});
  EXPECT_EQ(shape_of(t), (V{4, 3, 2}));
  EXPECT_EQ(attrs_of(t).get_ints("axes", {}), (V{2, 1, 0}));
  EXPECT_EQ(shape_of(call("transpose", {x}, Attrs({{"axes", V{0, -1, 1}}}))), (V{2, 4, 3}));
  expect_error([&] { call("transpose", {x}, Attrs({{"axes", V{0, 0, 1}}})); }, {"repeats axis 0"});
  expect_error([&] { call("transpose", {x}, Attrs({{"axes", V{0, 3, 1}}})); },
               {"axis 3 is out of range for a rank-3 tensor"});
  Expr c = call("concatenate", {x, f32("y", {2, 5, 4}), x}, Attrs({{"axis", int64_t{-2}}}));
  EXPECT_EQ(shape_of(c), (V{2, 11, 4}));
  EXPECT_EQ(attrs_of(c).get_int("axis", 0), 1);
  EXPECT_EQ(stage_names(c), (std::vector<std::string>{"concatenate"}));
  expect_error(
      [&] { call("concatenate", {x, f32("y", {2, 5, 5})}, Attrs({{"axis", int64_t{1}}})); },
      {"input 1", "except along axis 1"});
}

TEST(OpsTest, Softmax) {
  Expr s = call("nn.softmax", {f32("x", {2, 7})});
  EXPECT_EQ(attrs_of(s).get_int("axis", 0), 1);
  EXPECT_EQ(stage_names(s),
            (std::vector<std::string>{"softmax_max", "softmax_exp", "softmax_sum", "softmax"}));
  expect_error([] { call("nn.softmax", {f32("x", {2, 7})}, Attrs({{"axis", int64_t{2}}}), "sm"); },
               {"nn.softmax 'sm'", "axis 2 is out of range", "-2 to 1"});
}

TEST(OpsTest, NewOpPatterns) {
  for (const char* name :
       {"erf", "log", "abs", "negative", "floor", "ceil", "round", "cast", "logical_not", "nn.gelu",
        "nn.leaky_relu", "nn.silu", "nn.log_sigmoid", "nn.hardswish", "nn.hardsigmoid"})
    EXPECT_EQ(get_op(name)->pattern, OpPattern::ElemWise) << name;
  for (const char* name :
       {"power", "maximum", "minimum", "equal", "not_equal", "less", "less_equal", "greater",
        "greater_equal", "logical_and", "logical_or", "where", "broadcast_to"})
    EXPECT_EQ(get_op(name)->pattern, OpPattern::Broadcast) << name;
  for (const char* name : {"sum", "mean", "max", "min"})
    EXPECT_EQ(get_op(name)->pattern, OpPattern::CommReduce) << name;
  for (const char* name : {"strided_slice", "nn.pad", "expand_dims", "squeeze", "take"})
    EXPECT_EQ(get_op(name)->pattern, OpPattern::Injective) << name;
  EXPECT_EQ(get_op("nn.layer_norm")->pattern, OpPattern::CommReduce);  // epilogues fuse into it
  EXPECT_EQ(get_op("nn.log_softmax")->pattern, OpPattern::Opaque);
  EXPECT_TRUE(get_op("expand_dims")->is_view);
  EXPECT_TRUE(get_op("squeeze")->is_view);
  EXPECT_FALSE(get_op("strided_slice")->is_view);
}

TEST(OpsTest, Cumsum) {
  Expr x = f32("x", {2, 7, 3});
  Expr c = call("cumsum", {x}, Attrs({{"axis", int64_t{-2}}}), "cs");
  EXPECT_EQ(shape_of(c), (std::vector<int64_t>{2, 7, 3}));
  EXPECT_EQ(c->type.tensor().dtype, DType::Float32);
  EXPECT_EQ(attrs_of(c).get_int("axis", 0), 1);                // normalised
  for (DType t : {DType::Int32, DType::Int64, DType::Bool}) {  // torch's promotion
    Expr i = call("cumsum", {var("i", TensorType{{5}, t})}, Attrs({{"axis", int64_t{0}}}));
    EXPECT_EQ(i->type.tensor().dtype, DType::Int64);
  }
  EXPECT_EQ(get_op("cumsum")->pattern, OpPattern::Opaque);  // a scan: its own loop nest
  EXPECT_TRUE(get_op("cumsum")->lower);
  EXPECT_FALSE(get_op("cumsum")->compute);
  expect_error([&] { call("cumsum", {x}, Attrs({{"axis", int64_t{3}}}), "cs"); },
               {"cumsum 'cs'", "axis 3 is out of range"});
  expect_error([&] { call("cumsum", {x}, {}, "cs"); }, {"cumsum 'cs'", "needs the attribute axis"});
  expect_error([&] { call("cumsum", {f32("s", {})}, Attrs({{"axis", int64_t{0}}}), "cs"); },
               {"cumsum 'cs'", "scalar", "reshape it to [1]"});
}

TEST(OpsTest, ElementwiseDtypes) {
  using V = std::vector<int64_t>;
  Expr i = var("i", TensorType{{2, 3}, DType::Int32});
  Expr b = var("b", TensorType{{3}, DType::Bool});
  Expr c = call("less", {f32("a", {2, 1}), f32("b", {3})});
  EXPECT_EQ(c->type.tensor(), (TensorType{V{2, 3}, DType::Bool}));
  EXPECT_EQ(call("equal", {b, b})->type.tensor().dtype, DType::Bool);
  EXPECT_EQ(call("logical_and", {b, i})->type.tensor(), (TensorType{V{2, 3}, DType::Bool}));
  EXPECT_EQ(call("logical_not", {i})->type.tensor().dtype, DType::Bool);
  EXPECT_EQ(call("maximum", {i, i})->type.tensor().dtype, DType::Int32);
  EXPECT_EQ(call("abs", {i})->type.tensor().dtype, DType::Int32);
  EXPECT_EQ(call("negative", {i})->type.tensor().dtype, DType::Int32);
  expect_error([&] { call("negative", {b}, {}, "neg"); }, {"negative 'neg'", "bool"});
  expect_error([&] { call("log", {i}); }, {"log", "int32", "float"});
  expect_error([&] { call("power", {i, i}); }, {"power", "float"});
  expect_error([&] { call("greater", {i, f32("x", {3})}); }, {"dtypes differ"});
  Expr w = call("where", {b, f32("x", {2, 1}), f32("y", {})});
  EXPECT_EQ(w->type.tensor(), (TensorType{V{2, 3}, DType::Float32}));
  EXPECT_EQ(stage_names(w), (std::vector<std::string>{"where"}));
  expect_error([&] { call("where", {f32("c", {3}), f32("x", {3}), f32("y", {3})}, {}, "sel"); },
               {"where 'sel'", "condition", "must be bool"});
  expect_error([&] { call("where", {b, f32("x", {3}), i}); }, {"third input", "same dtype"});
  expect_error([&] { call("where", {b, f32("x", {4}), f32("y", {3})}); }, {"cannot broadcast"});
  Expr k = call("cast", {i}, Attrs({{"dtype", std::string("float64")}}));
  EXPECT_EQ(k->type.tensor(), (TensorType{V{2, 3}, DType::Float64}));
  EXPECT_EQ(call("cast", {b})->type.tensor().dtype, DType::Float32);  // the default
  expect_error([&] { call("cast", {i}, Attrs({{"dtype", std::string("float16")}}), "to_half"); },
               {"cast 'to_half'", "float16", "float32, float64"});
  Expr g = call("nn.gelu", {f32("x", {4})});
  EXPECT_EQ(attrs_of(g).get_str("approximate", ""), "none");
  expect_error(
      [] { call("nn.gelu", {f32("x", {4})}, Attrs({{"approximate", std::string("fast")}})); },
      {"approximate = 'fast'", "'none' or 'tanh'"});
  Expr l = call("nn.leaky_relu", {f32("x", {4})}, Attrs({{"alpha", int64_t{1}}}));
  EXPECT_EQ(attrs_of(l).values().at("alpha"), AttrValue(1.0));
  EXPECT_EQ(stage_names(call("nn.hardswish", {f32("x", {4})})),
            (std::vector<std::string>{"hardswish"}));
}

TEST(OpsTest, Reductions) {
  using V = std::vector<int64_t>;
  Expr x = f32("x", {2, 3, 4});
  Expr s = call("sum", {x}, Attrs({{"axis", V{-1, 0}}}));
  EXPECT_EQ(shape_of(s), (V{3}));
  EXPECT_EQ(attrs_of(s).get_ints("axis", {}), (V{0, 2}));
  EXPECT_EQ(shape_of(call("max", {x}, Attrs({{"axis", V{1}}, {"keepdims", int64_t{1}}}))),
            (V{2, 1, 4}));
  Expr all = call("min", {x});
  EXPECT_EQ(shape_of(all), (V{}));
  EXPECT_EQ(attrs_of(all).get_ints("axis", {}), (V{0, 1, 2}));
  Expr m = call("mean", {x}, Attrs({{"axis", V{1, 2}}, {"keepdims", int64_t{1}}}));
  EXPECT_EQ(shape_of(m), (V{2, 1, 1}));
  EXPECT_EQ(stage_names(m), (std::vector<std::string>{"mean_sum", "mean"}));
  EXPECT_EQ(stage_names(s), (std::vector<std::string>{"sum"}));
  expect_error([&] { call("sum", {x}, Attrs({{"axis", V{3}}}), "total"); },
               {"sum 'total'", "axis 3 is out of range"});
  expect_error([&] { call("sum", {x}, Attrs({{"axis", V{1, -2}}})); }, {"repeats an axis"});
  expect_error([] { call("mean", {var("i", TensorType{{3}, DType::Int64})}); }, {"float"});
  expect_error([] { call("max", {f32("e", {2, 0})}, Attrs({{"axis", V{1}}})); },
               {"axis 1", "empty"});
  EXPECT_EQ(shape_of(call("sum", {f32("e", {2, 0})}, Attrs({{"axis", V{1}}}))), (V{2}));
}

TEST(OpsTest, LayerNormLogSoftmaxPad) {
  using V = std::vector<int64_t>;
  Expr x = f32("x", {2, 3, 4});
  Expr ln = call("nn.layer_norm", {x, f32("g", {3, 4}), f32("b", {3, 4})},
                 Attrs({{"axis", int64_t{-2}}}));
  EXPECT_EQ(shape_of(ln), (V{2, 3, 4}));
  EXPECT_EQ(attrs_of(ln).get_int("axis", 0), 1);
  EXPECT_EQ(attrs_of(ln).get_float("epsilon", 0), 1e-5);
  EXPECT_EQ(stage_names(ln),
            (std::vector<std::string>{"layer_norm_shift", "layer_norm_sum", "layer_norm_var",
                                      "layer_norm_fix", "layer_norm"}));
  expect_error([&] { call("nn.layer_norm", {x, f32("g", {4}), f32("b", {3})}, {}, "ln1"); },
               {"nn.layer_norm 'ln1'", "beta is float32[3]", "must have shape [4]"});
  expect_error(
      [&] { call("nn.layer_norm", {x, f32("g", {4}), f32("b", {4})}, Attrs({{"epsilon", -1.0}})); },
      {"epsilon"});
  Expr ls = call("nn.log_softmax", {x}, Attrs({{"axis", int64_t{1}}}));
  EXPECT_EQ(stage_names(ls),
            (std::vector<std::string>{"log_softmax_max", "log_softmax_sum", "log_softmax"}));
  Expr p = call("nn.pad", {x}, Attrs({{"pad_width", V{0, 0, 1, 2, -1, 3}}}));
  EXPECT_EQ(shape_of(p), (V{2, 6, 6}));
  EXPECT_EQ(attrs_of(p).values().at("pad_value"), AttrValue(0.0));
  expect_error([&] { call("nn.pad", {x}, Attrs({{"pad_width", V{1, 1}}}), "pad1"); },
               {"nn.pad 'pad1'", "needs 6", "before and an after"});
  expect_error([&] { call("nn.pad", {x}, Attrs({{"pad_width", V{0, 0, 0, 0, -3, -2}}})); },
               {"negative size -1"});
  expect_error(
      [&] {
        call("nn.pad", {x},
             Attrs({{"pad_width", V{0, 0, 0, 0, 1, 1}}, {"pad_mode", std::string("reflect")}}));
      },
      {"pad_mode 'reflect'", "constant"});
}

TEST(OpsTest, SliceSqueezeExpandBroadcastTake) {
  using V = std::vector<int64_t>;
  Expr x = f32("x", {4, 5, 6});
  // Python-style normalisation: x[1:, ::2] and x[:, :, -4:100:3].
  Expr s = call("strided_slice", {x},
                Attrs({{"begin", V{1, 0}},
                       {"end", V{std::numeric_limits<int64_t>::max(), 5}},
                       {"strides", V{1, 2}}}));
  EXPECT_EQ(shape_of(s), (V{3, 3, 6}));
  EXPECT_EQ(attrs_of(s).get_ints("end", {}), (V{4, 5}));
  EXPECT_EQ(attrs_of(s).get_ints("axes", {}), (V{0, 1}));
  Expr t = call("strided_slice", {x},
                Attrs({{"begin", V{-4}}, {"end", V{100}}, {"strides", V{3}}, {"axes", V{-1}}}));
  EXPECT_EQ(shape_of(t), (V{4, 5, 2}));  // elements 2 and 5
  EXPECT_EQ(attrs_of(t).get_ints("begin", {}), (V{2}));
  EXPECT_EQ(shape_of(call("strided_slice", {x}, Attrs({{"begin", V{3}}, {"end", V{1}}}))),
            (V{0, 5, 6}));
  expect_error(
      [&] {
        call("strided_slice", {x}, Attrs({{"begin", V{0}}, {"end", V{2}}, {"strides", V{-1}}}),
             "flip");
      },
      {"strided_slice 'flip'", "must be positive"});
  expect_error([&] { call("strided_slice", {x}, Attrs({{"begin", V{0, 0}}, {"end", V{2}}})); },
               {"one entry per sliced axis"});
  Expr e = call("expand_dims", {x}, Attrs({{"axis", int64_t{-1}}, {"num_newaxis", int64_t{2}}}));
  EXPECT_EQ(shape_of(e), (V{4, 5, 6, 1, 1}));
  EXPECT_EQ(shape_of(call("expand_dims", {x}, Attrs({{"axis", int64_t{0}}}))), (V{1, 4, 5, 6}));
  expect_error([&] { call("expand_dims", {x}, Attrs({{"axis", int64_t{4}}})); }, {"out of range"});
  Expr y = f32("y", {1, 3, 1, 2});
  EXPECT_EQ(shape_of(call("squeeze", {y})), (V{3, 2}));
  EXPECT_EQ(shape_of(call("squeeze", {y}, Attrs({{"axis", V{-2}}}))), (V{1, 3, 2}));
  expect_error([&] { call("squeeze", {y}, Attrs({{"axis", V{1}}}), "sq"); },
               {"squeeze 'sq'", "axis 1", "has size 3", "only size-1 axes"});
  Expr b = call("broadcast_to", {f32("z", {3, 1})}, Attrs({{"shape", V{2, -1, 4}}}));
  EXPECT_EQ(shape_of(b), (V{2, 3, 4}));
  expect_error([&] { call("broadcast_to", {f32("z", {3, 2})}, Attrs({{"shape", V{3, 4}}}), "bc"); },
               {"broadcast_to 'bc'", "dimension 1 has size 2", "1 or 4"});
  expect_error([&] { call("broadcast_to", {f32("z", {3, 2})}, Attrs({{"shape", V{2}}})); },
               {"fewer dimensions"});
  Expr ids = var("ids", TensorType{{2, 7}, DType::Int64});
  Expr emb = call("take", {f32("w", {10, 16}), ids}, {}, "embed");
  EXPECT_EQ(shape_of(emb), (V{2, 7, 16}));
  EXPECT_EQ(stage_names(emb), (std::vector<std::string>{"take"}));
  Expr ids32 = var("ids", TensorType{{3}, DType::Int32});
  EXPECT_EQ(shape_of(call("take", {x, ids32}, Attrs({{"axis", int64_t{1}}}))), (V{4, 3, 6}));
  expect_error([&] { call("take", {x, f32("f", {3})}, {}, "embed"); },
               {"take 'embed'", "indices must be int32 or int64, got float32[3]"});
  expect_error([&] { call("take", {x, ids32}, Attrs({{"axis", int64_t{3}}})); }, {"out of range"});
}

// ---------------------------------------------------------------- prim_math accuracy

// Computes out[i] = fn(a[i], b[i]) with a compiled kernel whose inner loop is vectorized.
template <class T>
std::vector<T> eval_prim(const std::function<PrimExpr(PrimExpr, PrimExpr)>& fn, std::vector<T> a,
                         std::vector<T> b) {
  DType dt = sizeof(T) == 4 ? DType::Float32 : DType::Float64;
  int64_t lanes = codegen::native_vector_lanes(dt);
  size_t n = a.size();
  int64_t rows = (static_cast<int64_t>(n) + lanes - 1) / lanes;
  a.resize(rows * lanes, T(1));
  b.resize(rows * lanes, T(1));
  Buffer ba = make_buffer("a", dt, {rows * lanes}), bb = make_buffer("b", dt, {rows * lanes});
  Buffer bo = make_buffer("out", dt, {rows * lanes});
  PrimVar io("io"), ii("ii");
  PrimExpr i = io * PrimExpr(lanes) + ii;
  PrimFunc f;
  f.name = "prim_math_kernel";
  f.params = {ba, bb, bo};
  f.num_inputs = 2;
  f.body = for_loop(
      io, 0, rows, ForKind::Serial,
      for_loop(ii, 0, lanes, ForKind::Vectorized, store(bo, i, fn(load(ba, i), load(bb, i)))));
  std::vector<T> out(a.size());
  auto m = codegen::compile_cpu({f});
  std::vector<void*> args{a.data(), b.data(), out.data()};
  m->get_function(f.name)(args.data());
  out.resize(n);
  return out;
}

template <class T>
std::vector<T> eval_unary(PrimExpr (*fn)(const PrimExpr&), const std::vector<T>& x) {
  return eval_prim<T>([fn](PrimExpr a, PrimExpr) { return fn(a); }, x, x);
}

// Error of `got` in units of the float32 spacing at the double reference (the spacing of
// the smallest normal below it, so denormal results count absolute error).
double ulp_error32(float got, double ref) {
  float r = static_cast<float>(ref);
  if (std::isnan(ref)) return std::isnan(got) ? 0 : INFINITY;
  if (std::isinf(r)) return got == r ? 0 : INFINITY;
  double a = std::max(std::fabs(static_cast<double>(r)), double(std::numeric_limits<float>::min()));
  double spacing = std::nextafter(static_cast<float>(a), INFINITY) - static_cast<float>(a);
  return std::fabs(got - ref) / spacing;
}

TEST(OpsTest, GroupedMatmulShapesAndErrors) {
  auto offsets = [](std::vector<int64_t> shape, DType t = DType::Int32) {
    return var("offs", TensorType{std::move(shape), t});
  };
  auto packed = [](int64_t block) { return Attrs({{"weight_block", block}}); };
  Expr x = f32("x", {10, 16});
  EXPECT_EQ(shape_of(call("nn.grouped_matmul", {x, f32("w", {3, 16, 24}), offsets({3})})),
            (std::vector<int64_t>{10, 24}));
  EXPECT_EQ(
      shape_of(call("nn.grouped_matmul", {x, f32("w", {3, 2, 16, 12}), offsets({3})}, packed(12))),
      (std::vector<int64_t>{10, 24}));
  expect_error([&] { call("nn.grouped_matmul", {x, f32("w", {3, 15, 24}), offsets({3})}); },
               {"nn.grouped_matmul", "data's K (dimension 1) must equal weight's K"});
  expect_error([&] { call("nn.grouped_matmul", {x, f32("w", {3, 16, 24}), offsets({2})}); },
               {"nn.grouped_matmul", "one entry per group"});
  expect_error(
      [&] { call("nn.grouped_matmul", {x, f32("w", {3, 16, 24}), offsets({3}, DType::Float32)}); },
      {"nn.grouped_matmul", "offsets", "int32 or int64"});
  expect_error([&] { call("nn.grouped_matmul", {x, f32("w", {16, 24}), offsets({3})}); },
               {"nn.grouped_matmul", "weight must be 3-D"});
  expect_error(
      [&] { call("nn.grouped_matmul", {x, f32("w", {3, 16, 24}), offsets({3})}, packed(8)); },
      {"nn.grouped_matmul", "weight must be 4-D [groups, N / 8, K, 8]"});
}

std::vector<float> f32_grid(double lo, double hi, int n) {
  std::vector<float> v;
  for (int i = 0; i < n; ++i) v.push_back(static_cast<float>(lo + (hi - lo) * i / (n - 1)));
  const float inf = std::numeric_limits<float>::infinity();
  for (float s : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-45f, -1e-45f, 1e-38f, inf, -inf,
                  std::numeric_limits<float>::quiet_NaN(), 1.0f, -1.0f})
    v.push_back(s);
  return v;
}

// Max ulp error of fn over xs against the double-precision reference, also checking that
// special values match exactly (NaN, inf, signed zero).
double max_ulp32(PrimExpr (*fn)(const PrimExpr&), double (*ref)(double),
                 const std::vector<float>& xs) {
  std::vector<float> got = eval_unary<float>(fn, xs);
  double worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    double r = ref(xs[i]);
    double e = ulp_error32(got[i], r);
    if (r == 0) EXPECT_EQ(std::signbit(got[i]), std::signbit(r)) << "x = " << xs[i];
    EXPECT_LE(e, 4.0) << "x = " << xs[i] << " got " << got[i] << " want " << r;
    worst = std::max(worst, e);
  }
  return worst;
}

double ref_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double ref_rsqrt(double x) { return 1.0 / std::sqrt(x); }

TEST(PrimMathTest, Float32WithinFewUlp) {
  // Expected maxima from the design: ~1.2 ulp for exp/log, ~1.5 tanh, ~2 erf/sigmoid.
  EXPECT_LE(max_ulp32(exp, [](double x) { return std::exp(x); }, f32_grid(-110, 92, 200001)), 2.0);
  EXPECT_LE(max_ulp32(tanh, [](double x) { return std::tanh(x); }, f32_grid(-12, 12, 200001)), 2.0);
  EXPECT_LE(
      max_ulp32(tanh, [](double x) { return std::tanh(x); }, f32_grid(-1e-3, 1e-3, 20001)), 2.0);
  EXPECT_LE(max_ulp32(erf, [](double x) { return std::erf(x); }, f32_grid(-7, 7, 200001)), 2.5);
  EXPECT_LE(
      max_ulp32(erf, [](double x) { return std::erf(x); }, f32_grid(-1e-3, 1e-3, 20001)), 2.5);
  EXPECT_LE(max_ulp32(sigmoid, ref_sigmoid, f32_grid(-110, 110, 200001)), 2.5);
  EXPECT_LE(max_ulp32(sqrt, [](double x) { return std::sqrt(x); }, f32_grid(0, 1e6, 20001)), 0.5);
  EXPECT_LE(max_ulp32(rsqrt, ref_rsqrt, f32_grid(1e-3, 1e6, 20001)), 1.5);
  // log over every 4099th positive float (denormals to FLT_MAX) plus the grid's specials
  // (0 -> -inf, negatives -> NaN, inf, NaN).
  std::vector<float> xs = f32_grid(-2, 2, 4001);
  for (uint32_t bits = 1; bits < 0x7f800000u; bits += 4099) {
    float x;
    std::memcpy(&x, &bits, sizeof x);
    xs.push_back(x);
  }
  EXPECT_LE(max_ulp32(log, [](double x) { return std::log(x); }, xs), 1.5);
}

// The softmax exponentials: exp_nonpositive(x) and exp2_nonpositive(x) for x <= 0, within
// 2 ulp where the result is a normal float, within the smallest normal below that (flushed
// or not); -inf -> 0, NaN -> NaN.
TEST(PrimMathTest, NonpositiveExponentials) {
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    PrimExpr (*fn)(const PrimExpr&);
    double (*ref)(double);
    double lowest;  // the grid runs from here to 0
  };
  for (const Case& c : {Case{exp_nonpositive, [](double x) { return std::exp(x); }, -130},
                        Case{exp2_nonpositive, [](double x) { return std::exp2(x); }, -190}}) {
    std::vector<float> xs = f32_grid(c.lowest, 0, 200001);
    xs.resize(200001);  // the grid without its positive specials
    for (float s : {-inf, std::numeric_limits<float>::quiet_NaN(), -0.0f, -1e-30f, -1e-45f})
      xs.push_back(s);
    std::vector<float> got = eval_unary<float>(c.fn, xs);
    for (size_t i = 0; i < xs.size(); ++i) {
      double want = c.ref(xs[i]);
      if (std::isnan(xs[i]))
        EXPECT_TRUE(std::isnan(got[i]));
      else if (want >= std::numeric_limits<float>::min())
        EXPECT_LE(ulp_error32(got[i], want), 2.0) << "x = " << xs[i] << " got " << got[i];
      else
        EXPECT_LE(std::fabs(got[i] - want), std::numeric_limits<float>::min()) << "x = " << xs[i];
    }
    EXPECT_EQ(got[200001], 0.0f);  // -inf
  }
}

TEST(PrimMathTest, Float64) {
  std::vector<double> xs;
  for (int i = 0; i <= 20000; ++i) xs.push_back(-708.0 + 1417.0 * i / 20000);  // normal results
  auto got = eval_unary<double>(exp, xs);
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_NEAR(got[i] / std::exp(xs[i]), 1.0, 1e-14) << xs[i];
  auto edges = eval_unary<double>(exp, {710.0, -740.0, -745.0, -800.0});
  EXPECT_TRUE(std::isinf(edges[0]));
  EXPECT_NEAR(edges[1], std::exp(-740.0), 1e-323);  // denormal results
  EXPECT_EQ(edges[2], std::exp(-745.0));
  EXPECT_EQ(edges[3], 0.0);
  std::vector<double> ps;
  for (int i = 1; i <= 20000; ++i) ps.push_back(std::ldexp(1.0 + i / 20000.0, i % 2000 - 1000));
  ps.push_back(4.9e-324);  // smallest denormal
  auto lg = eval_unary<double>(log, ps);
  for (size_t i = 0; i < ps.size(); ++i)
    EXPECT_NEAR(lg[i], std::log(ps[i]), 1e-15 * std::max(1.0, std::fabs(std::log(ps[i])))) << ps[i];
  // tanh and erf use float32-fitted polynomials: float64 inputs get ~1e-9 relative accuracy.
  std::vector<double> ts;
  for (int i = 0; i <= 20000; ++i) ts.push_back(-8.0 + 16.0 * i / 20000);
  auto th = eval_unary<double>(tanh, ts), ef = eval_unary<double>(erf, ts);
  for (size_t i = 0; i < ts.size(); ++i) {
    EXPECT_NEAR(th[i], std::tanh(ts[i]), 1e-9 * std::fabs(std::tanh(ts[i]))) << ts[i];
    EXPECT_NEAR(ef[i], std::erf(ts[i]), 1e-9 * std::fabs(std::erf(ts[i]))) << ts[i];
  }
}

TEST(PrimMathTest, PowMatchesCLibrary) {
  const float inf = std::numeric_limits<float>::infinity(),
              nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> bases{0.0f,  -0.0f, 1.0f,  -1.0f, 2.0f, -2.0f, 0.5f,
                           -0.5f, 3.7f,  -3.7f, inf,   -inf, nan,   1e-30f};
  std::vector<float> exps{0.0f, -0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 3.0f, -3.0f,
                          0.5f, -0.5f, 2.5f, inf,   -inf, nan,   1e10f};
  std::vector<float> a, b;
  for (float x : bases)
    for (float y : exps) a.push_back(x), b.push_back(y);
  // Dense positive grid: error grows with |y log x| (exp amplifies the product's rounding).
  for (int i = 1; i <= 400; ++i)
    for (int j = 0; j <= 40; ++j) a.push_back(i * 0.025f), b.push_back(-20.0f + j);
  std::vector<float> got = eval_prim<float>([](PrimExpr x, PrimExpr y) { return pow(x, y); }, a, b);
  for (size_t i = 0; i < a.size(); ++i) {
    double ref = std::pow(static_cast<double>(a[i]), static_cast<double>(b[i]));
    if (std::isnan(ref) || std::isinf(static_cast<float>(ref)) || ref == 0) {
      if (std::isnan(ref))
        EXPECT_TRUE(std::isnan(got[i])) << a[i] << " ** " << b[i];
      else
        EXPECT_EQ(got[i], static_cast<float>(ref)) << a[i] << " ** " << b[i];
      if (ref == 0) EXPECT_EQ(std::signbit(got[i]), std::signbit(ref)) << a[i] << " ** " << b[i];
    } else if (static_cast<float>(ref) != 0) {
      double allowed = 4.0 + 2.0 * std::fabs(std::log(std::fabs(ref)));  // |y log x|
      EXPECT_LE(ulp_error32(got[i], ref), allowed) << a[i] << " ** " << b[i] << " = " << got[i];
    }
  }
}

}  // namespace
}  // namespace ember::ir
