// AlterOpLayout: before/expected structural tests, and the machine model its block and the
// schedules' register tiles come from.
#include "ember/passes/alter_op_layout.h"

#include <gtest/gtest.h>

#include "ember/ir/op.h"
#include "ember/runtime/ndarray.h"

namespace ember::passes {
namespace {

using namespace ir;

Expr weight(int64_t n, int64_t k) {
  return constant(runtime::NDArray::empty({n, k}, DType::Float32), "fc.weight");
}

int count_calls(const Function& f, const std::string& op) {
  int n = 0;
  for (auto& e : post_order(f->body))
    if (auto* c = as<CallNode>(e)) n += c->op && c->op->name == op;
  return n;
}

TEST(AlterOpLayout, ConstantDenseWeightIsPackedInVectorPanels) {
  Expr x = var("x", TensorType{{3, 16}, DType::Float32}), w = weight(24, 16);
  Function f = function({x}, call("nn.relu", {call("nn.dense", {x, w}, {}, "fc")}));
  Function got = alter_op_layout(f, MachineModel::for_vector_bits(256));
  Expr packed = call("nn.pack_dense_weight", {w}, Attrs({{"block", int64_t{8}}}), "fc.weight");
  Function want = function({x}, call("nn.relu", {call("nn.dense_packed", {x, packed},
                                                      Attrs({{"units", int64_t{24}}}), "fc")}));
  EXPECT_TRUE(structural_equal(got, want)) << to_string(Expr(got));
  EXPECT_EQ(got->body->type.tensor().shape, (std::vector<int64_t>{3, 24}));
}

// An int8 product's constant weight words [N, K/4] pack in the same panels, of int32 lanes
// (16 at 512 bits); an input weight is left alone.
TEST(AlterOpLayout, Int8DenseWeightWordsArePackedInVectorPanels) {
  Expr x = var("x", TensorType{{3, 16}, DType::Int32});
  Expr w = constant(runtime::NDArray::empty({48, 16}, DType::Int32), "fc.weight");
  Function f = function({x}, call("nn.dense_u8s8", {x, w}, {}, "fc"));
  Function got = alter_op_layout(f, MachineModel::for_vector_bits(512));
  Expr packed = call("nn.pack_dense_weight", {w}, Attrs({{"block", int64_t{16}}}), "fc.weight");
  Function want = function(
      {x}, call("nn.dense_u8s8_packed", {x, packed}, Attrs({{"units", int64_t{48}}}), "fc"));
  EXPECT_TRUE(structural_equal(got, want)) << to_string(Expr(got));
  Expr wv = var("w", TensorType{{48, 16}, DType::Int32});
  Function input = function({x, wv}, call("nn.dense_u8s8", {x, wv}, {}, "fc"));
  EXPECT_TRUE(structural_equal(alter_op_layout(input, MachineModel::for_vector_bits(512)), input));
}

// Two int8 convs (Int8Products' form: conv2d_u8s8 of packed bytes by constant weight words)
// with a quantizing epilogue between them: both run blocked in 32-channel int32 blocks (512
// bits) on the bytes themselves, the epilogue stays blocked, and the only conversions are
// the input's to_blocked and the output's from_blocked. A conv whose output channels take
// no block (5) keeps the NCHW form.
TEST(AlterOpLayout, Int8ConvsRunBlockedWithTheirEpilogueBetweenThem) {
  auto words = [](int64_t o, int64_t c) {
    return constant(runtime::NDArray::empty({o, c / 4, 3, 3}, DType::Int32), "w");
  };
  auto conv = [](const Expr& bytes, const Expr& w) {
    Expr packed = call("nn.pack_bytes4", {bytes}, Attrs().with("axis", int64_t{1}));
    return call("nn.conv2d_u8s8", {packed, w},
                Attrs({{"padding", std::vector<int64_t>{1}}, {"pad_word", int64_t{0}}}));
  };
  Expr q = var("q", TensorType{{1, 32, 7, 7}, DType::UInt8});
  Expr y = conv(q, words(64, 32));
  Expr requantized =
      call("cast",
           {call("clip", {call("cast", {y}, Attrs().with("dtype", std::string("float32")))},
                 Attrs({{"a_min", 0.0}, {"a_max", 255.0}}))},
           Attrs().with("dtype", std::string("uint8")));
  Function f = function({q}, conv(requantized, words(32, 64)));
  Function got = alter_op_layout(f, MachineModel::for_vector_bits(512));
  EXPECT_EQ(count_calls(got, "nn.conv2d_u8s8_blocked"), 2) << to_string(Expr(got));
  EXPECT_EQ(count_calls(got, "nn.conv2d_u8s8"), 0);
  EXPECT_EQ(count_calls(got, "nn.pack_bytes4"), 0);
  EXPECT_EQ(count_calls(got, "to_blocked"), 1);
  EXPECT_EQ(count_calls(got, "from_blocked"), 1);
  EXPECT_EQ(got->body->type, f->body->type);
  Function narrow = function({q}, conv(q, words(5, 32)));
  EXPECT_TRUE(
      structural_equal(alter_op_layout(narrow, MachineModel::for_vector_bits(512)), narrow));
}

// An int8 conv of 24 output channels (padded to 32 in blocks of 16 at 512 bits), its
// quantizing epilogue (scale, round, clip, cast to uint8) and the int8 conv that reads it:
// rounding and casts to and from integers keep the pad channels finite, so the epilogue
// stays blocked (the only conversions: the input's and the output's). Before, round and
// cast on the padded value took it back to NCHW and the next conv blocked it again
// (MobileNetV2's 24-channel stage).
TEST(AlterOpLayout, PaddedInt8ConvsKeepTheirQuantizingEpilogueBlocked) {
  auto conv = [](const Expr& bytes, int64_t o) {
    const int64_t c = bytes->type.tensor().shape[1];
    Expr w = constant(runtime::NDArray::empty({o, (c + 3) / 4, 1, 1}, DType::Int32), "w");
    Expr packed = call("nn.pack_bytes4", {bytes}, Attrs().with("axis", int64_t{1}));
    return call("nn.conv2d_u8s8", {packed, w}, Attrs());
  };
  auto to = [](const Expr& x, const char* dtype) {
    return call("cast", {x}, Attrs().with("dtype", std::string(dtype)));
  };
  Expr q = var("q", TensorType{{1, 32, 14, 14}, DType::UInt8});
  Expr scaled = call("multiply", {to(conv(q, 24), "float32"),
                                  constant(runtime::NDArray::empty({}, DType::Float32), "s")});
  Expr clipped = call("clip", {call("round", {scaled})}, Attrs({{"a_min", 0.0}, {"a_max", 255.0}}));
  Function f = function({q}, conv(to(clipped, "uint8"), 32));
  Function got = alter_op_layout(f, MachineModel::for_vector_bits(512));
  EXPECT_EQ(count_calls(got, "nn.conv2d_u8s8_blocked"), 2) << to_string(Expr(got));
  EXPECT_EQ(count_calls(got, "to_blocked"), 1);
  EXPECT_EQ(count_calls(got, "from_blocked"), 1);
  EXPECT_EQ(got->body->type, f->body->type);
}

// A float depthwise conv (MobileNetV2's, between dequantize and quantize) whose output feeds
// an int8 conv that runs blocked runs blocked too, in the same block: no conversion between.
TEST(AlterOpLayout, FloatDepthwiseConvBeforeABlockedInt8ConvRunsBlocked) {
  Expr x = var("x", TensorType{{1, 32, 14, 14}, DType::Float32});
  Expr dw = constant(runtime::NDArray::empty({32, 1, 3, 3}, DType::Float32), "dw");
  Expr y = call("nn.conv2d", {x, dw},
                Attrs({{"padding", std::vector<int64_t>{1}}, {"groups", int64_t{32}}}));
  Expr q = call("cast", {y}, Attrs().with("dtype", std::string("uint8")));
  Expr packed = call("nn.pack_bytes4", {q}, Attrs().with("axis", int64_t{1}));
  Expr w = constant(runtime::NDArray::empty({64, 8, 1, 1}, DType::Int32), "w");
  Function f = function({x}, call("nn.conv2d_u8s8", {packed, w}, Attrs()));
  Function got = alter_op_layout(f, MachineModel::for_vector_bits(512));
  EXPECT_EQ(count_calls(got, "nn.conv2d_blocked"), 1) << to_string(Expr(got));
  EXPECT_EQ(count_calls(got, "nn.conv2d_u8s8_blocked"), 1);
  EXPECT_EQ(count_calls(got, "to_blocked"), 1);    // x's
  EXPECT_EQ(count_calls(got, "from_blocked"), 1);  // the output's
}

// A bfloat16 conv as BF16Products writes it: nn.conv2d_bf16 of X's channel pairs by
// constant weight words.
Expr bf16_conv(const Expr& x, int64_t out, int64_t kernel = 3) {
  const int64_t channels = x->type.tensor().shape[1];
  Expr w = constant(
      runtime::NDArray::empty({out, (channels + 1) / 2, kernel, kernel}, DType::Int32), "w");
  Expr pairs = call("nn.pack_bf16_pairs", {x}, Attrs().with("axis", int64_t{1}));
  return call("nn.conv2d_bf16", {pairs, w},
              Attrs().with("padding", std::vector<int64_t>{kernel / 2}));
}

// x rounded to bfloat16 and widened again, as LegalizeBF16 leaves each op of a bfloat16 model.
Expr rounded(const Expr& x) {
  return call("cast", {call("cast", {x}, Attrs().with("dtype", std::string("bfloat16")))},
              Attrs().with("dtype", std::string("float32")));
}

// An RGB stem and two bfloat16 convs with their bias, relu and roundings between them: all
// three run blocked on bfloat16 values read a pair at a time (the stem's 3 channels as one
// block of two words), the epilogues stay blocked, through channels padded 24 -> 32 at 512
// bits too, and the only conversions are the input's to_blocked and the output's
// from_blocked: no packing kernel between the convs.
TEST(AlterOpLayout, Bf16ConvsRunBlockedWithTheirRoundingBetweenThem) {
  for (int64_t mid : {64, 24}) {
    Expr x = var("x", TensorType{{1, 3, 14, 14}, DType::BFloat16});
    auto epilogue = [&](const Expr& y, int64_t channels) {
      Expr b = constant(runtime::NDArray::empty({channels, 1, 1}, DType::Float32), "b");
      Expr r = call("nn.relu", {rounded(call("add", {rounded(y), b}))});
      return call("cast", {r}, Attrs().with("dtype", std::string("bfloat16")));
    };
    Expr y = epilogue(bf16_conv(x, 32), 32);
    y = epilogue(bf16_conv(y, mid), mid);
    Function f = function({x}, bf16_conv(y, 32, 1));
    Function got = alter_op_layout(f, MachineModel::for_vector_bits(512));
    EXPECT_EQ(count_calls(got, "nn.conv2d_bf16_blocked"), 3) << to_string(Expr(got));
    EXPECT_EQ(count_calls(got, "nn.conv2d_bf16"), 0);
    EXPECT_EQ(count_calls(got, "nn.pack_bf16_pairs"), 0);
    // x's and the two biases' (constants: folded at build time)
    EXPECT_EQ(count_calls(got, "to_blocked"), 3) << to_string(Expr(got));
    EXPECT_EQ(count_calls(got, "from_blocked"), 1);
    EXPECT_EQ(got->body->type, f->body->type);
  }
}

// A float depthwise conv between two bfloat16 convs (MobileNetV2 cast to bfloat16: its
// depthwise convs keep the float32 path) runs blocked in their block: no conversion between.
TEST(AlterOpLayout, FloatDepthwiseConvBetweenBf16ConvsRunsBlocked) {
  Expr x = var("x", TensorType{{1, 16, 14, 14}, DType::BFloat16});
  Expr dw = constant(runtime::NDArray::empty({32, 1, 3, 3}, DType::Float32), "dw");
  Expr y = call("cast", {bf16_conv(x, 32, 1)}, Attrs().with("dtype", std::string("bfloat16")));
  y = call("nn.conv2d", {call("cast", {y}, Attrs().with("dtype", std::string("float32"))), dw},
           Attrs({{"padding", std::vector<int64_t>{1}}, {"groups", int64_t{32}}}));
  y = call("cast", {y}, Attrs().with("dtype", std::string("bfloat16")));
  Function f = function({x}, bf16_conv(y, 16, 1));
  Function got = alter_op_layout(f, MachineModel::for_vector_bits(512));
  EXPECT_EQ(count_calls(got, "nn.conv2d_blocked"), 1) << to_string(Expr(got));
  EXPECT_EQ(count_calls(got, "nn.conv2d_bf16_blocked"), 2);
  EXPECT_EQ(count_calls(got, "to_blocked"), 1);    // x's
  EXPECT_EQ(count_calls(got, "from_blocked"), 1);  // the output's
}

// Int8Products' inverted residual: an int8 1x1 conv, the depthwise form of nn.conv2d_u8s8
// over its requantized bytes, an int8 1x1 conv over the depthwise conv's. All three run
// blocked in the same 32-channel int32 block (512 bits), the depthwise weight packed as a
// float depthwise conv's, widened to float32; the only conversions are the input's
// to_blocked and the output's from_blocked. Before: the depthwise conv ran in float32.
TEST(AlterOpLayout, Int8DepthwiseConvRunsBlockedBetweenInt8Convs) {
  auto requantized = [](const Expr& y) {
    Expr f = y->type.tensor().dtype == DType::Float32
                 ? y
                 : call("cast", {y}, Attrs().with("dtype", std::string("float32")));
    return call("cast", {call("clip", {f}, Attrs({{"a_min", 0.0}, {"a_max", 255.0}}))},
                Attrs().with("dtype", std::string("uint8")));
  };
  auto pointwise = [](const Expr& bytes, int64_t o) {
    const int64_t c = bytes->type.tensor().shape[1];
    Expr w = constant(runtime::NDArray::empty({o, c / 4, 1, 1}, DType::Int32), "w");
    Expr packed = call("nn.pack_bytes4", {bytes}, Attrs().with("axis", int64_t{1}));
    return call("nn.conv2d_u8s8", {packed, w}, Attrs());
  };
  Expr q = var("q", TensorType{{1, 32, 14, 14}, DType::UInt8});
  Expr dw = constant(runtime::NDArray::empty({64, 1, 3, 3}, DType::Int8), "dw");
  Expr expanded = requantized(pointwise(q, 64));
  Expr y = call("nn.conv2d_u8s8", {expanded, dw},
                Attrs({{"padding", std::vector<int64_t>{1}}, {"groups", int64_t{64}}}));
  Function f = function({q}, pointwise(requantized(y), 32));
  Function got = alter_op_layout(f, MachineModel::for_vector_bits(512));
  EXPECT_EQ(count_calls(got, "nn.conv2d_u8s8_blocked"), 3) << to_string(Expr(got));
  EXPECT_EQ(count_calls(got, "nn.conv2d_u8s8"), 0);
  EXPECT_EQ(count_calls(got, "nn.conv2d_blocked"), 0);
  EXPECT_EQ(count_calls(got, "to_blocked"), 1);
  EXPECT_EQ(count_calls(got, "from_blocked"), 1);
  for (auto& e : post_order(got->body))
    if (auto* c = as<CallNode>(e); c && c->op && c->op->name == "nn.pack_conv_weight" &&
                                   c->attrs.get_int("in_block", 0) == 1) {
      EXPECT_EQ(c->type.tensor().shape, (std::vector<int64_t>{2, 1, 3, 3, 1, 32}));
      EXPECT_EQ(c->type.tensor().dtype, DType::Float32);
    }
  EXPECT_EQ(got->body->type, f->body->type);
}

TEST(AlterOpLayout, BlockIsTheWidestVectorThatDividesTheUnits) {
  Expr x = var("x", TensorType{{2, 16}, DType::Float32});
  auto block_for = [&](int64_t n, int bits) {
    Function g = alter_op_layout(function({x}, call("nn.dense", {x, weight(n, 16)})),
                                 MachineModel::for_vector_bits(bits));
    auto* c = as<CallNode>(g->body);
    return as<CallNode>(c->args[1])->attrs.get_int("block", 0);
  };
  EXPECT_EQ(block_for(1000, 512), 8);  // 1000 = 125 x 8: half of AVX-512's 16 lanes
  EXPECT_EQ(block_for(1024, 512), 16);
  EXPECT_EQ(block_for(12, 256), 4);
  // Nothing divides 10: one panel of 10, which the register tile loads as one vector.
  EXPECT_EQ(block_for(10, 256), 10);
  EXPECT_EQ(block_for(10, 512), 10);
  EXPECT_EQ(block_for(40, 256), 8);  // 40 = 5 x 8
  EXPECT_EQ(block_for(90, 256), 8);  // too long for one vector: padded panels of 8
}

// One row of activations (a GEMV) over outputs that no vector divides keeps [N, K] rows,
// each output a dot product along K; a matmul by [K, N] becomes such a dense of its
// transpose. At 256 bits, where one row alone falls behind the L2, a row short enough for
// one tile of the schedule's (up to two vectors) is packed in lanes instead. Outputs that
// whole vectors divide, and two rows, still take panels.
TEST(AlterOpLayout, AGemvOverOutputsNoVectorDividesKeepsItsRows) {
  auto altered = [](std::vector<int64_t> x_shape, int64_t n, int bits, bool matmul = false) {
    Expr x = var("x", TensorType{x_shape, DType::Float32});
    Expr w =
        matmul ? constant(runtime::NDArray::empty({16, n}, DType::Float32), "w") : weight(n, 16);
    return alter_op_layout(function({x}, call(matmul ? "nn.matmul" : "nn.dense", {x, w})),
                           MachineModel::for_vector_bits(bits));
  };
  for (int bits : {256, 512}) {
    for (int64_t n : {3, 10, 100}) {
      const bool lanes = bits == 256 && n <= 16;
      const std::string anchor = lanes ? "nn.dense_lanes" : "nn.dense";
      Function f = altered({1, 16}, n, bits);
      EXPECT_EQ(count_calls(f, "nn.dense_packed"), 0) << n << " " << bits;
      EXPECT_EQ(count_calls(f, anchor), 1) << n << " " << bits;
      EXPECT_EQ(count_calls(f, "nn.pack_dense_lanes"), lanes ? 1 : 0) << n << " " << bits;
      Function m = altered({1, 1, 16}, n, bits, true);
      EXPECT_EQ(count_calls(m, anchor), 1) << n << " " << bits;
      EXPECT_EQ(count_calls(m, "transpose"), 1) << n << " " << bits;
      EXPECT_EQ(m->body->type.tensor().shape, (std::vector<int64_t>{1, 1, n}));
      EXPECT_EQ(count_calls(altered({2, 16}, n, bits), "nn.dense_packed"), 1) << n << " " << bits;
    }
    EXPECT_EQ(count_calls(altered({1, 16}, 32, bits), "nn.dense_packed"), 1) << bits;
  }
  // 1000 outputs: panels of 8 (whole AVX2 vectors), rows on AVX-512.
  EXPECT_EQ(count_calls(altered({1, 16}, 1000, 256), "nn.dense_packed"), 1);
  EXPECT_EQ(count_calls(altered({1, 16}, 1000, 512), "nn.dense_packed"), 0);
  // Lanes that do not divide K (12 features): [N, K] rows.
  Expr x = var("x", TensorType{{1, 12}, DType::Float32});
  Function odd = alter_op_layout(function({x}, call("nn.dense", {x, weight(10, 12)})),
                                 MachineModel::for_vector_bits(256));
  EXPECT_EQ(count_calls(odd, "nn.dense_lanes"), 0);
}

TEST(AlterOpLayout, WeightsThatAreInputsAreLeftAlone) {
  Expr x = var("x", TensorType{{3, 16}, DType::Float32});
  Expr w = var("w", TensorType{{24, 16}, DType::Float32});
  Function f = function({x, w}, call("nn.dense", {x, w}));
  EXPECT_TRUE(structural_equal(alter_op_layout(f, MachineModel::for_vector_bits(256)), f));
}

Expr conv_weight(int64_t co, int64_t ci) {
  return constant(runtime::NDArray::empty({co, ci, 3, 3}, DType::Float32), "w");
}

TEST(AlterOpLayout, ConvChainRunsBlockedWithOneConversionInAndOut) {
  // conv -> add(bias [C,1,1]) -> relu -> conv: blocked from the first conv to the second,
  // the bias packed as [1, C/c, 1, 1, c]; to_blocked at the input, from_blocked at the end.
  Expr x = var("x", TensorType{{1, 16, 9, 9}, DType::Float32});
  Attrs pad({{"padding", std::vector<int64_t>{1, 1, 1, 1}}, {"groups", int64_t{1}}});
  Expr w1 = conv_weight(16, 16), w2 = conv_weight(8, 16);
  Expr bias = constant(runtime::NDArray::empty({16, 1, 1}, DType::Float32), "b");
  Expr y = call("nn.relu", {call("add", {call("nn.conv2d", {x, w1}, pad, "c1"), bias})});
  Function f = function({x}, call("nn.conv2d", {y, w2}, pad, "c2"));
  Function got = alter_op_layout(f, MachineModel::for_vector_bits(256));

  auto blocked = [](Expr e, int64_t c) { return call("to_blocked", {e}, Attrs({{"block", c}})); };
  // 16 channels: blocks of two AVX2 vectors; 8 output channels of c2: one.
  auto pack = [](Expr w, int64_t in, int64_t out) {
    return call("nn.pack_conv_weight", {w}, Attrs({{"in_block", in}, {"out_block", out}}));
  };
  Expr b = blocked(
      call("reshape", {bias}, Attrs({{"newshape", std::vector<int64_t>{1, 16, 1, 1}}})), 16);
  Expr c1 = call("nn.conv2d_blocked", {blocked(x, 16), pack(w1, 16, 16)}, pad);
  Expr r = call("nn.relu", {call("add", {c1, b})});
  Function want =
      function({x}, call("from_blocked", {call("nn.conv2d_blocked", {r, pack(w2, 16, 8)}, pad)}));
  EXPECT_TRUE(structural_equal(got, want)) << to_string(Expr(got));
  EXPECT_EQ(got->body->type.tensor().shape, (std::vector<int64_t>{1, 8, 9, 9}));
}

TEST(AlterOpLayout, GroupedConvsWhoseGroupsAreWholeBlocksRunBlocked) {
  // conv -> relu -> conv with 2 groups of 16 channels: AVX2 blocks of 16 divide each group,
  // so the grouped conv runs blocked, its weight [32, 16, 3, 3] packed as any conv's.
  Attrs pad({{"padding", std::vector<int64_t>{1, 1, 1, 1}}, {"groups", int64_t{1}}});
  Attrs grouped = pad.with("groups", int64_t{2});
  Expr x = var("x", TensorType{{1, 32, 9, 9}, DType::Float32});
  Expr w1 = conv_weight(32, 32), w2 = conv_weight(32, 16);
  Expr y = call("nn.relu", {call("nn.conv2d", {x, w1}, pad, "c1")});
  Function f = function({x}, call("nn.conv2d", {y, w2}, grouped, "c2"));
  Function got = alter_op_layout(f, MachineModel::for_vector_bits(256));
  auto pack = [](Expr w) {
    return call("nn.pack_conv_weight", {w},
                Attrs({{"in_block", int64_t{16}}, {"out_block", int64_t{16}}}));
  };
  Expr c1 = call("nn.conv2d_blocked",
                 {call("to_blocked", {x}, Attrs({{"block", int64_t{16}}})), pack(w1)}, pad);
  Expr c2 = call("nn.conv2d_blocked", {call("nn.relu", {c1}), pack(w2)}, grouped);
  EXPECT_TRUE(structural_equal(got, function({x}, call("from_blocked", {c2}))))
      << to_string(Expr(got));

  // 2 groups of 24 channels: the block of 48 channels (16, two AVX2 vectors) does not divide
  // a group, so the grouped conv takes the group's block, 24 (three vectors), its input
  // converted from the first conv's blocks of 16.
  Expr x48 = var("x", TensorType{{1, 48, 9, 9}, DType::Float32});
  Expr y48 = call("nn.relu", {call("nn.conv2d", {x48, conv_weight(48, 48)}, pad, "c1")});
  Function f48 = function({x48}, call("nn.conv2d", {y48, conv_weight(48, 24)}, grouped, "c2"));
  Function got48 = alter_op_layout(f48, MachineModel::for_vector_bits(256));
  EXPECT_EQ(count_calls(got48, "nn.conv2d_blocked"), 2) << to_string(Expr(got48));
  bool block24 = false;
  for (auto& e : post_order(got48->body))
    if (auto* c = as<CallNode>(e); c && c->op && c->op->name == "to_blocked")
      block24 = block24 || c->attrs.get_int("block", 0) == 24;
  EXPECT_TRUE(block24) << to_string(Expr(got48));

  // 2 groups of 20 channels: no block of whole vectors divides 20, so NCHW.
  Expr x40 = var("x", TensorType{{1, 40, 9, 9}, DType::Float32});
  Expr y40 = call("nn.relu", {call("nn.conv2d", {x40, conv_weight(40, 40)}, pad, "c1")});
  Function f40 = function({x40}, call("nn.conv2d", {y40, conv_weight(40, 20)}, grouped, "c2"));
  Function got40 = alter_op_layout(f40, MachineModel::for_vector_bits(256));
  EXPECT_EQ(count_calls(got40, "nn.conv2d"), 1) << to_string(Expr(got40));
}

TEST(AlterOpLayout, PaddedChannelsStayBlockedOnlyThroughOpsThatKeepThemFinite) {
  // 38 channels on AVX2: blocks of 8, padded to 40. The bias is padded with zeros and the
  // sigmoid runs on the pad channels (0.5 there: the next conv's weights are zero for
  // them). A divide by a per-channel constant would put 0/0 there, so it reads the plain
  // layout and the second conv converts again.
  Expr x = var("x", TensorType{{1, 38, 9, 9}, DType::Float32});
  Attrs pad({{"padding", std::vector<int64_t>{1, 1, 1, 1}}, {"groups", int64_t{1}}});
  Expr w1 = conv_weight(38, 38), w2 = conv_weight(38, 38), w3 = conv_weight(16, 38);
  Expr bias = constant(runtime::NDArray::empty({38, 1, 1}, DType::Float32), "b");
  Expr y = call("sigmoid", {call("add", {call("nn.conv2d", {x, w1}, pad, "c1"), bias})});
  y = call("divide", {call("nn.conv2d", {y, w2}, pad, "c2"), bias});
  Function f = function({x}, call("nn.conv2d", {y, w3}, pad, "c3"));
  Function got = alter_op_layout(f, MachineModel::for_vector_bits(256));

  auto blocked = [](Expr e) { return call("to_blocked", {e}, Attrs({{"block", int64_t{8}}})); };
  auto pack = [](Expr w, int64_t out) {
    return call("nn.pack_conv_weight", {w}, Attrs({{"in_block", int64_t{8}}, {"out_block", out}}));
  };
  Expr b =
      blocked(call("reshape", {bias}, Attrs({{"newshape", std::vector<int64_t>{1, 38, 1, 1}}})));
  Expr c1 = call("nn.conv2d_blocked", {blocked(x), pack(w1, 8)}, pad);
  Expr c2 = call("nn.conv2d_blocked", {call("sigmoid", {call("add", {c1, b})}), pack(w2, 8)}, pad);
  Expr plain = call("from_blocked", {c2}, Attrs({{"channels", int64_t{38}}}));
  Expr c3 = call("nn.conv2d_blocked", {blocked(call("divide", {plain, bias})), pack(w3, 16)}, pad);
  Function want = function({x}, call("from_blocked", {c3}));
  EXPECT_TRUE(structural_equal(got, want)) << to_string(Expr(got));
  EXPECT_EQ(got->body->type.tensor().shape, (std::vector<int64_t>{1, 16, 9, 9}));
}

TEST(AlterOpLayout, ChannelsThatPadATenthOrMoreKeepNchw) {
  // Issue 12: 33 channels padded to 40 (AVX2) or 48 (AVX-512) would make each conv between
  // them run 1.47x or 2.1x the multiply-adds; the convs keep NCHW.
  Expr x = var("x", TensorType{{1, 33, 9, 9}, DType::Float32});
  Attrs pad({{"padding", std::vector<int64_t>{1, 1, 1, 1}}, {"groups", int64_t{1}}});
  Expr y = call("sigmoid", {call("nn.conv2d", {x, conv_weight(33, 33)}, pad, "c1")});
  Function f = function({x}, call("nn.conv2d", {y, conv_weight(33, 33)}, pad, "c2"));
  for (int bits : {256, 512})
    EXPECT_TRUE(structural_equal(alter_op_layout(f, MachineModel::for_vector_bits(bits)), f))
        << bits;
}

TEST(AlterOpLayout, ConvsWhoseRowsFillNchwVectorsBetterThanPaddedBlocksKeepNchw) {
  // 16 -> 24 -> 24 channels: on AVX-512, 24 channels pad to 32 (3/4 of the lanes useful,
  // 9/16 for the second conv) while rows of 16 pixels fill NCHW's vectors: the island keeps
  // NCHW. On AVX2, 24 channels are one block of three vectors (no padding): blocked. Rows of
  // 18 pixels fill 18 of 32 lanes in NCHW: blocked on both.
  auto chain = [](int64_t width) {
    Expr x = var("x", TensorType{{1, 16, width, width}, DType::Float32});
    Attrs pad({{"padding", std::vector<int64_t>{1, 1, 1, 1}}, {"groups", int64_t{1}}});
    Expr y = call("nn.relu", {call("nn.conv2d", {x, conv_weight(24, 16)}, pad, "c1")});
    return function({x}, call("nn.conv2d", {y, conv_weight(24, 24)}, pad, "c2"));
  };
  Function f16 = chain(16), f18 = chain(18);
  EXPECT_TRUE(structural_equal(alter_op_layout(f16, MachineModel::for_vector_bits(512)), f16));
  EXPECT_EQ(
      count_calls(alter_op_layout(f16, MachineModel::for_vector_bits(256)), "nn.conv2d_blocked"),
      2);
  for (int bits : {256, 512})
    EXPECT_EQ(
        count_calls(alter_op_layout(f18, MachineModel::for_vector_bits(bits)), "nn.conv2d_blocked"),
        2)
        << bits;
}

TEST(AlterOpLayout, LoneConvsKeepNchw) {
  // 54 multiply-adds per element converted (in and out): converting would not pay.
  Expr x = var("x", TensorType{{1, 16, 9, 9}, DType::Float32});
  Function lone = function({x}, call("nn.relu", {call("nn.conv2d", {x, conv_weight(16, 16)})}));
  EXPECT_TRUE(structural_equal(alter_op_layout(lone, MachineModel::for_vector_bits(256)), lone));
}

TEST(AlterOpLayout, LoneConvWithMuchWorkPerElementRunsBlocked) {
  // 64 -> 64 channels, 3x3 at 9x9 -> 7x7: 217 multiply-adds per element converted.
  Expr x = var("x", TensorType{{1, 64, 9, 9}, DType::Float32});
  Attrs attrs({{"groups", int64_t{1}}});
  Expr w = conv_weight(64, 64);
  Function f = function({x}, call("nn.relu", {call("nn.conv2d", {x, w}, attrs)}));
  Function got = alter_op_layout(f, MachineModel::for_vector_bits(256));
  Expr packed = call("nn.pack_conv_weight", {w},
                     Attrs({{"in_block", int64_t{16}}, {"out_block", int64_t{16}}}));
  Expr c = call("nn.conv2d_blocked",
                {call("to_blocked", {x}, Attrs({{"block", int64_t{16}}})), packed}, attrs);
  Function want = function({x}, call("from_blocked", {call("nn.relu", {c})}));
  EXPECT_TRUE(structural_equal(got, want)) << to_string(Expr(got));
}

TEST(AlterOpLayout, StemReadsPixelsAndItsPoolingStaysBlocked) {
  // conv(3 -> 16) -> max_pool2d -> conv(16 -> 16): the stem's input is one block of its 3
  // channels (read pixel by pixel), and the pooling between the convs keeps the blocks.
  Expr rgb = var("x", TensorType{{1, 3, 9, 9}, DType::Float32});
  Attrs pool({{"pool_size", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  Expr p = call("nn.max_pool2d", {call("nn.conv2d", {rgb, conv_weight(16, 3)})}, pool, "p");
  Function stem = function({rgb}, call("nn.conv2d", {p, conv_weight(16, 16)}));
  Function got = alter_op_layout(stem, MachineModel::for_vector_bits(256));
  std::string text = to_string(Expr(got));
  EXPECT_NE(text.find("to_blocked(%x, block=3)"), std::string::npos) << text;
  EXPECT_NE(text.find("in_block=3, out_block=16"), std::string::npos) << text;
  EXPECT_NE(text.find(": float32[1, 1, 3, 3, 16] /* p */"), std::string::npos) << text;
  EXPECT_EQ(count_calls(got, "from_blocked"), 1) << text;
  EXPECT_EQ(got->body->type.tensor().shape, (std::vector<int64_t>{1, 16, 1, 1}));
}

TEST(AlterOpLayout, SqueezeAndExcitationStaysBlocked) {
  // conv -> silu = a; s = sigmoid(conv1x1(relu(conv1x1(adaptive_avg_pool2d(a, 1))))); a * s
  // -> conv (EfficientNet's, RegNetY's block). Before: the global pooling read NCHW and the
  // scale [1, C, 1, 1] was no operand a blocked multiply took, so the activation went out of
  // the blocks and back (two passes over it). After: one to_blocked in, one from_blocked out.
  Expr x = var("x", TensorType{{1, 16, 9, 9}, DType::Float32});
  Attrs pad({{"padding", std::vector<int64_t>{1, 1, 1, 1}}, {"groups", int64_t{1}}});
  auto pointwise = [](Expr in, int64_t co, int64_t ci, const std::string& name) {
    return call("nn.conv2d",
                {in, constant(runtime::NDArray::empty({co, ci, 1, 1}, DType::Float32), "w")},
                Attrs(), name);
  };
  Expr a = call("nn.silu", {call("nn.conv2d", {x, conv_weight(16, 16)}, pad, "c1")}, {}, "act");
  Expr squeeze = call("nn.adaptive_avg_pool2d", {a},
                      Attrs({{"output_size", std::vector<int64_t>{1, 1}}}), "squeeze");
  Expr scale =
      call("sigmoid",
           {pointwise(call("nn.relu", {pointwise(squeeze, 8, 16, "reduce")}), 16, 8, "expand")});
  Expr y = call("multiply", {a, scale}, {}, "excite");
  Function f = function({x}, pointwise(y, 16, 16, "project"));
  Function got = alter_op_layout(f, MachineModel::for_vector_bits(256));
  std::string text = to_string(Expr(got));
  EXPECT_EQ(count_calls(got, "to_blocked"), 1) << text;
  EXPECT_EQ(count_calls(got, "from_blocked"), 1) << text;
  EXPECT_NE(text.find(": float32[1, 1, 1, 1, 16] /* squeeze */"), std::string::npos) << text;
  EXPECT_NE(text.find(": float32[1, 1, 9, 9, 16] /* excite */"), std::string::npos) << text;
  // A scale that is a plain value (here an input) is blocked itself: one small to_blocked.
  Expr plain_scale = var("s", TensorType{{1, 16, 1, 1}, DType::Float32});
  Function g = function({x, plain_scale},
                        pointwise(call("multiply", {a, plain_scale}, {}, "excite"), 16, 16, "p"));
  std::string g_text = to_string(Expr(alter_op_layout(g, MachineModel::for_vector_bits(256))));
  EXPECT_NE(g_text.find("to_blocked(%s, block=16)"), std::string::npos) << g_text;
}

TEST(MachineModel, ChannelBlocksAreTwoOrThreeVectorsWhereTheyDivide) {
  MachineModel avx2 = MachineModel::for_vector_bits(256),
               avx512 = MachineModel::for_vector_bits(512);
  EXPECT_EQ(channel_block_for(avx2, 64, DType::Float32), 16);
  EXPECT_EQ(channel_block_for(avx2, 48, DType::Float32), 16);  // two vectors before three
  EXPECT_EQ(channel_block_for(avx512, 96, DType::Float32), 32);
  // Three vectors where two do not divide: a tile of one vector per pixel spills on AVX2.
  EXPECT_EQ(channel_block_for(avx2, 24, DType::Float32), 24);
  EXPECT_EQ(channel_block_for(avx2, 72, DType::Float32), 24);
  EXPECT_EQ(channel_block_for(avx512, 144, DType::Float32), 48);
  EXPECT_EQ(channel_block_for(avx2, 40, DType::Float32), 8);
  // Half a vector runs half the FMA peak: 24 on AVX-512 pads to 32 (0.75^2 of the peak
  // still beats 0.5; measured on Zen 5: 8-channel blocks ran a 1x1 conv at 98 GFLOP/s, 16 at
  // 215), and 12 on AVX2 to 16. 8 on AVX-512 (0.5^2 padded) keeps half vectors.
  EXPECT_EQ(channel_block_for(avx512, 24, DType::Float32), 16);
  EXPECT_EQ(channel_block_for(avx2, 12, DType::Float32), 8);
  EXPECT_EQ(channel_block_for(avx512, 8, DType::Float32), 8);
  EXPECT_EQ(channel_block_for(avx2, 4, DType::Float32), 4);
}

TEST(MachineModel, ChannelsNoBlockDividesArePaddedWhereThatPays) {
  MachineModel avx2 = MachineModel::for_vector_bits(256),
               avx512 = MachineModel::for_vector_bits(512);
  EXPECT_EQ(channel_block_for(avx2, 38, DType::Float32), 8);       // 40
  EXPECT_EQ(channel_block_for(avx2, 100, DType::Float32), 8);      // 104, not SSE's 4
  EXPECT_EQ(channel_block_for(avx512, 1000, DType::Float32), 16);  // 1008, not 8 lanes
  EXPECT_EQ(channel_block_for(avx2, 31, DType::Float32), 16);      // 32: two vectors pad no more
  EXPECT_EQ(channel_block_for(avx512, 31, DType::Float32), 32);
  // Issue 12: 33 -> 40 made a conv between two such tensors run 1.47x the multiply-adds
  // (measured 1.57x the plain layout at 56x56); a tenth or more pad lanes keep the plain layout.
  EXPECT_EQ(channel_block_for(avx2, 33, DType::Float32), 0);
  EXPECT_EQ(channel_block_for(avx512, 33, DType::Float32), 0);   // not 48
  EXPECT_EQ(channel_block_for(avx512, 100, DType::Float32), 0);  // not 112
  EXPECT_EQ(channel_block_for(avx2, 5, DType::Float32), 0);      // not 8
  EXPECT_EQ(channel_block_for(avx512, 5, DType::Float32), 0);
  EXPECT_EQ(channel_block_for(avx2, 3, DType::Float32), 0);
  // Padding where half a vector would divide: 20 on AVX2 pads to 24 rather than taking 4.
  EXPECT_EQ(channel_block_for(avx2, 20, DType::Float32), 8);
  for (int bits : {256, 512}) {
    MachineModel m = MachineModel::for_vector_bits(bits);
    for (int64_t c = 1; c <= 1024; ++c) {
      int64_t b = channel_block_for(m, c, DType::Float32);
      if (b == 0) continue;
      const double useful = static_cast<double>(c) / static_cast<double>((c + b - 1) / b * b);
      // Where half a vector divides the channels, padding need only beat its half peak.
      const int64_t half = m.lanes(DType::Float32) / 2;
      if (c % half == 0)
        EXPECT_GT(useful * useful, 0.5) << bits << " bits, " << c << " channels in blocks of " << b;
      else
        EXPECT_GE(useful, kMinUsefulLanes)
            << bits << " bits, " << c << " channels in blocks of " << b;
    }
  }
}

TEST(MachineModel, AGemmPanelOverTheL2NarrowsTheTile) {
  // BERT's 3072 -> 768 dense under a layer norm: 4 x 6 AVX-512 vectors make a 1.2 MB column
  // panel that each row tile read from the L3 (221 GFLOP/s on Zen 5); two vectors keep it in
  // the L2 (265). K = 768 keeps the wider tile, and AVX2's tiles fit either way.
  MachineModel avx2 = MachineModel::for_vector_bits(256),
               avx512 = MachineModel::for_vector_bits(512);
  const DType f = DType::Float32;
  RegisterTile wide = choose_register_tile(avx512, 64, 768, f, true, false, 768);
  RegisterTile narrow = choose_register_tile(avx512, 64, 768, f, true, false, 3072);
  EXPECT_GT(wide.vectors, 2);
  EXPECT_LE(narrow.vectors, 2);
  EXPECT_LE(3072 * narrow.vectors * 64, avx512.l2_bytes);
  EXPECT_GE(narrow.rows * narrow.vectors, 8);  // still covers the FMA latency
  RegisterTile a = choose_register_tile(avx2, 64, 768, f, true, false, 3072);
  RegisterTile b = choose_register_tile(avx2, 64, 768, f);
  EXPECT_EQ(a.rows, b.rows);
  EXPECT_EQ(a.vectors, b.vectors);
}

// 56 pixels a row at 512 bits: 8-lane vectors divide them but fill half of each register.
// Where the vectors may start at any column (a conv's input row in NCHW), full vectors in
// tiles whose last one shifts back compute 64 lanes for 56 (the awkward model's 33- and
// 100-channel convs: 43-48% -> 70-81% of the FMA peak on Zen 5); a packed panel of 8 keeps
// 8-lane vectors (a shifted 16-lane vector would straddle two panels). At 256 bits 8 lanes
// divide 56 and nothing changes.
TEST(MachineModel, NarrowVectorsGiveWayToShiftedFullOnes) {
  const DType f = DType::Float32;
  MachineModel avx512 = MachineModel::for_vector_bits(512),
               avx2 = MachineModel::for_vector_bits(256);
  RegisterTile shifted = choose_register_tile(avx512, 33, 56, f, true, false, 0, true);
  EXPECT_EQ(shifted.lanes, 16);
  EXPECT_LT(shifted.cols(), 56);
  EXPECT_EQ(choose_register_tile(avx512, 33, 56, f, true, false, 0, false).lanes, 8);
  EXPECT_EQ(choose_register_tile(avx2, 33, 56, f, true, false, 0, true).lanes, 8);
  // Columns a full vector divides are unchanged.
  RegisterTile even = choose_register_tile(avx512, 64, 768, f, true, false, 0, true);
  EXPECT_EQ(even.lanes, 16);
  EXPECT_EQ(768 % even.cols(), 0);
}

TEST(MachineModel, RegisterTilesFitTheRegistersAndWasteLittle) {
  for (int bits : {256, 512}) {
    MachineModel m = MachineModel::for_vector_bits(bits);
    for (int64_t rows : {1, 3, 4, 17, 64, 128, 256})
      for (int64_t cols : {1, 7, 14, 24, 28, 56, 768, 1000, 3072}) {
        RegisterTile t = choose_register_tile(m, rows, cols, DType::Float32);
        SCOPED_TRACE(std::to_string(bits) + " bits, " + std::to_string(rows) + " x " +
                     std::to_string(cols));
        // Rows that the tile does not divide are covered by a shifted last tile: at most
        // a third of the computed rows are recomputed.
        EXPECT_LE(t.rows, rows);
        int64_t tiles = (rows + t.rows - 1) / t.rows;
        EXPECT_LE(3 * (tiles * t.rows - rows), tiles * t.rows);
        int64_t full = m.lanes(DType::Float32);
        int64_t regs = (t.lanes + full - 1) / full;
        EXPECT_LE((t.rows * t.vectors + t.vectors) * regs + 1, m.vector_registers);
        EXPECT_LE(t.rows * t.vectors * regs + 4, m.vector_registers);
        if (cols % t.lanes == 0) EXPECT_EQ(cols % t.cols(), 0);
      }
  }
  // BERT's dense on AVX2: 4 rows x 3 vectors of 8 = 12 accumulators.
  RegisterTile bert =
      choose_register_tile(MachineModel::for_vector_bits(256), 128, 768, DType::Float32);
  EXPECT_EQ(bert.rows * bert.vectors, 12);
  EXPECT_EQ(bert.lanes, 8);
  // A blocked conv row of 28 pixels x 16 channels on AVX2: two vectors per pixel and a row
  // tile of at least 4 pixels (the 7 that divide 28 leave no registers for two vectors).
  RegisterTile conv =
      choose_register_tile(MachineModel::for_vector_bits(256), 28, 16, DType::Float32);
  EXPECT_EQ(conv.vectors, 2);
  EXPECT_GE(conv.rows, 4);
  // A 14-pixel row is one vector of 14 lanes (two registers), never a masked tail.
  EXPECT_EQ(choose_register_tile(MachineModel::for_vector_bits(256), 256, 14, DType::Float32).lanes,
            14);
  EXPECT_EQ(choose_row_block(MachineModel::for_vector_bits(256), 128, 768 * 4), 64);
  // 197 rows (ViT's tokens) have no divisor but 1: three even blocks, the last shifted back.
  EXPECT_EQ(choose_row_block(MachineModel::for_vector_bits(256), 197, 768 * 4), 66);
}

TEST(MachineModel, RowsWithTheirOwnVectorsGetJustTheAccumulatorsTheLatencyNeeds) {
  // A depthwise conv in NCHW on AVX2, 128 x 128 pixels: every output row loads its own input
  // vectors, so the tile is load-bound at any size; it holds just the accumulators that
  // cover the FMA latency (more spilled: LLVM keeps the window's weights in registers), in
  // at least two rows, with the rest of its width as vectors along the row.
  MachineModel m = MachineModel::for_vector_bits(256);
  RegisterTile t = choose_register_tile(m, 128, 128, DType::Float32, false);
  EXPECT_EQ(t.rows, 2);
  EXPECT_EQ(t.rows * t.vectors, m.fma_ports * m.fma_latency);
  // Shared vectors (a GEMM's) take rows before vectors: fewer loads per FMA.
  RegisterTile shared = choose_register_tile(m, 128, 128, DType::Float32);
  EXPECT_GT(shared.rows, t.rows);
}

TEST(MachineModel, VectorsFromTheL3TakeTilesWithMoreRows) {
  // A 14x14 1x1 conv with 1 MB of weights on AVX2, its 196 pixels one row: 4 pixels x 2
  // vectors divide the row, but each step's 64 bytes of weights from the L3 then take longer
  // than its 8 FMAs; 6 pixels (12 accumulators) wait for them. At 512 bits likewise.
  for (int bits : {256, 512}) {
    MachineModel m = MachineModel::for_vector_bits(bits);
    RegisterTile near = choose_register_tile(m, 196, 16, DType::Float32);
    RegisterTile far = choose_register_tile(m, 196, 16, DType::Float32, true, true);
    SCOPED_TRACE(std::to_string(bits) + " bits");
    EXPECT_EQ(far.cols(), near.cols());
    const double bytes = static_cast<double>(far.cols() * 4);
    EXPECT_GE(static_cast<double>(far.rows * far.cols()) / (m.fma_ports * m.lanes(DType::Float32)),
              bytes / m.l3_bytes_per_cycle);
    EXPECT_GE(far.rows, near.rows);
  }
  EXPECT_EQ(choose_register_tile(MachineModel::for_vector_bits(256), 196, 16, DType::Float32).rows,
            4);
}

TEST(MachineModel, PaddedWindowsComputeFewRowsTwice) {
  // A tile of 16 output rows computes 16 + window - 1 padded rows: up to a 7x7 window (22
  // rows, 1.375x) within max_pad_recompute, at either width; an 8-wide window (a blocked
  // conv's 8 input channels at 256 bits) is over it. The bound follows the model's field.
  for (int bits : {256, 512}) {
    MachineModel m = MachineModel::for_vector_bits(bits);
    SCOPED_TRACE(std::to_string(bits) + " bits");
    EXPECT_EQ(max_padded_window(m, 16), 7);
    EXPECT_LE(16 + max_padded_window(m, 16) - 1, m.max_pad_recompute * 16);
    EXPECT_GT(16 + max_padded_window(m, 16), m.max_pad_recompute * 16);
    EXPECT_EQ(max_padded_window(m, 4), 2);  // 4-row tiles: a 2-wide window, 1.25x
    m.max_pad_recompute = 1.5;
    EXPECT_EQ(max_padded_window(m, 16), 9);
    m.max_pad_recompute = 1;
    EXPECT_EQ(max_padded_window(m, 16), 1);
  }
}

TEST(MachineModel, WideRegisterTilesStillFillTheAccumulators) {
  // Attention's tiles of VB vectors x R rows: AVX2's 16 registers allow 12 accumulators, and
  // 2 x 6 fills them where 3 x 3 and 4 x 2 leave 3 and 4 empty; AVX-512's 32 allow 28, and
  // 4 x 6, 3 x 9 and 2 x 12 fill them (24, 27, 24), a one-vector tile of 12 rows does not.
  MachineModel avx2 = MachineModel::for_vector_bits(256),
               avx512 = MachineModel::for_vector_bits(512);
  EXPECT_EQ(max_accumulators(avx2), 12);
  EXPECT_EQ(max_accumulators(avx512), 28);
  EXPECT_TRUE(fills_accumulators(avx2, 2 * 6));
  EXPECT_FALSE(fills_accumulators(avx2, 3 * 3));
  EXPECT_FALSE(fills_accumulators(avx2, 4 * 2));
  EXPECT_TRUE(fills_accumulators(avx512, 4 * 6));
  EXPECT_TRUE(fills_accumulators(avx512, 3 * 9));
  EXPECT_TRUE(fills_accumulators(avx512, 2 * 12));
  EXPECT_FALSE(fills_accumulators(avx512, 1 * 12));
}

}  // namespace
}  // namespace ember::passes
