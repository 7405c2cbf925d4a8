// Type relations of the registered ops: output shapes (against values PyTorch gives),
// attribute normalisation, user-facing errors, and the stages each compute rule builds.
// Numerical results (including prim_math accuracy) are checked end to end in
// tests/python/test_ops.py.
#include <gtest/gtest.h>

#include <algorithm>

#include "ember/ir/graph.h"
#include "ember/ir/op.h"
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
    for (const auto& w : words) EXPECT_NE(msg.find(w), std::string::npos) << msg << "\nlacks: " << w;
  }
}

// Names of the compute stages (not placeholders) the op's compute rule builds.
std::vector<std::string> stage_names(const Expr& call_expr) {
  auto* c = as<CallNode>(call_expr);
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < c->args.size(); ++i) {
    const TensorType& t = c->args[i]->type.tensor();
    inputs.push_back(placeholder("in" + std::to_string(i), t.shape, t.dtype));
  }
  Tensor out = c->op->compute(inputs, c->attrs, c->type.tensor());
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
  Expr c = call("nn.conv2d", {x, f32("w", {8, 3, 3, 3})}, Attrs({{"padding", std::vector<int64_t>{1}}}));
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
  expect_error([&] { call("nn.conv2d", {x, f32("w", {30, 16, 3, 3})}, Attrs({{"groups", int64_t{4}}})); },
               {"30 output channels", "groups=4"});
  expect_error([&] { call("nn.conv2d", {f32("x", {1, 3, 8}), f32("w", {4, 3, 3, 3})}); },
               {"data must be 4-D"});
  expect_error([&] { call("nn.conv2d", {f32("x", {1, 3, 2, 2}), f32("w", {4, 3, 5, 5})}); },
               {"larger than the padded input"});
  expect_error([&] { call("nn.conv2d", {x, f32("w", {4, 64, 3, 3})},
                          Attrs({{"padding", std::vector<int64_t>{1, 1, 1}}})); },
               {"padding", "1, 2 (h, w) or 4"});
  expect_error([&] { call("nn.conv2d", {x, f32("w", {4, 64, 3, 3})},
                          Attrs({{"strides", std::vector<int64_t>{0, 1}}})); },
               {"strides", ">= 1"});
  Expr xi = var("xi", TensorType{{1, 3, 8, 8}, DType::Int64});
  expect_error([&] { call("nn.conv2d", {xi, f32("w", {4, 3, 3, 3})}); }, {"float"});
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
               {"batch sizes"});
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
  expect_error([&] { call("nn.relu", {i}, {}, "act"); },
               {"nn.relu 'act'", "int64", "float"});
  expect_error([&] { call("divide", {i, i}); }, {"integer division"});
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
                 Attrs({{"pool_size", V{3}}, {"strides", V{2}}, {"padding", V{1}},
                        {"ceil_mode", int64_t{1}}})),
            (V{1, 1, 4, 4}));
  EXPECT_EQ(pool("nn.max_pool2d", {1, 1, 7, 8},
                 Attrs({{"pool_size", V{3, 3}}, {"strides", V{2, 2}}, {"ceil_mode", int64_t{1}}})),
            (V{1, 1, 3, 4}));
  // The last ceil-mode window would start in the padding: dropped.
  EXPECT_EQ(pool("nn.avg_pool2d", {1, 1, 5, 5},
                 Attrs({{"pool_size", V{2}}, {"strides", V{2}}, {"padding", V{1}},
                        {"ceil_mode", int64_t{1}}})),
            (V{1, 1, 3, 3}));
  EXPECT_EQ(pool("nn.max_pool2d", {2, 3, 9, 9},
                 Attrs({{"pool_size", V{3}}, {"dilation", V{2}}})),
            (V{2, 3, 5, 5}));
  EXPECT_EQ(pool("nn.adaptive_avg_pool2d", {1, 2, 7, 10}, Attrs({{"output_size", V{3, 4}}})),
            (V{1, 2, 3, 4}));
  Expr mp = call("nn.max_pool2d", {f32("x", {1, 1, 6, 6})},
                 Attrs({{"pool_size", V{3}}, {"strides", V{2}}, {"padding", V{1}}}));
  EXPECT_EQ(stage_names(mp), (std::vector<std::string>{"max_pool2d_pad", "max_pool2d"}));
  Expr ap = call("nn.avg_pool2d", {f32("x", {1, 1, 6, 6})}, Attrs({{"pool_size", V{2}}, {"strides", V{2}}}));
  EXPECT_EQ(stage_names(ap), (std::vector<std::string>{"avg_pool2d_sum", "avg_pool2d"}));
  expect_error([] { call("nn.max_pool2d", {f32("x", {1, 1, 6, 6})}); }, {"pool_size"});
  expect_error([] { call("nn.max_pool2d", {f32("x", {1, 1, 6, 6})},
                         Attrs({{"pool_size", V{2}}, {"padding", V{2}}})); },
               {"smaller than the pool window"});
}

TEST(OpsTest, ReshapeFlattenTransposeConcatenate) {
  using V = std::vector<int64_t>;
  Expr x = f32("x", {2, 3, 4});
  Expr r = call("reshape", {x}, Attrs({{"newshape", V{4, -1}}}));
  EXPECT_EQ(shape_of(r), (V{4, 6}));
  EXPECT_EQ(attrs_of(r).get_ints("newshape", {}), (V{4, 6}));
  expect_error([&] { call("reshape", {x}, Attrs({{"newshape", V{5, 5}}}), "view1"); },
               {"reshape 'view1'", "24 elements", "25 elements"});
  expect_error([&] { call("reshape", {x}, Attrs({{"newshape", V{-1, -1}}})); }, {"more than one -1"});
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
  expect_error([&] { call("concatenate", {x, f32("y", {2, 5, 5})}, Attrs({{"axis", int64_t{1}}})); },
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

}  // namespace
}  // namespace ember::ir
