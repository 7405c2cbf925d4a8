// Int8Products: before/after on the graph a PT2E linear layer imports as, with and without a
// machine that has int8 dot products, and its near misses.
#include "ember/passes/int8_products.h"

#include <gtest/gtest.h>

#include <cstring>

#include "ember/ir/op.h"

namespace ember::passes {
namespace {

using namespace ir;

Expr filled(std::vector<int64_t> shape, DType t, double v) {
  runtime::NDArray a = runtime::NDArray::empty(shape, t);
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (t == DType::Float32) a.data_as<float>()[i] = static_cast<float>(v);
    if (t == DType::Int8) a.data_as<int8_t>()[i] = static_cast<int8_t>(v);
    if (t == DType::Int64) a.data_as<int64_t>()[i] = static_cast<int64_t>(v);
  }
  return constant(a);
}

Attrs to(const char* dtype) { return Attrs().with("dtype", std::string(dtype)); }

// dense((cast(q) - zx) * 0.5, (cast(w) - cast(zw)) * sw) as the frontend writes it, of the
// input `in` (default: q).
Function pt2e_linear(Expr q, Expr w, double zx, double zw, Expr in = nullptr) {
  Expr x =
      call("multiply",
           {call("subtract", {call("cast", {q}, to("float32")), filled({}, DType::Float32, zx)}),
            filled({}, DType::Float32, 0.5)});
  Expr zero = call("reshape", {call("cast", {filled({6}, DType::Int64, zw)}, to("float32"))},
                   Attrs().with("newshape", std::vector<int64_t>{6, 1}));
  Expr wd = call("multiply", {call("subtract", {call("cast", {w}, to("float32")), zero}),
                              filled({6, 1}, DType::Float32, 0.25)});
  return function({in ? in : q}, call("nn.dense", {x, wd}, {}, "fc"));
}

const MachineModel k512 = MachineModel::for_vector_bits(512);

int count_calls(const Function& f, const std::string& op) {
  int n = 0;
  for (auto& e : post_order(f->body))
    if (auto* c = as<CallNode>(e)) n += c->op && c->op->name == op;
  return n;
}

TEST(Int8Products, Pt2eLinearBecomesTheInt8ProductOnVnniMachines) {
  Expr q = var("q", TensorType{{3, 8}, DType::UInt8});
  Expr w = filled({6, 8}, DType::Int8, 3);
  const bool vnni = true, plain = false;
  Function f = pt2e_linear(q, w, 128, 0);
  Function got = int8_products(f, vnni, vnni, k512);
  EXPECT_EQ(count_calls(got, "nn.dense"), 0) << to_string(Expr(got));
  EXPECT_EQ(count_calls(got, "nn.dense_u8s8"), 1);
  EXPECT_EQ(count_calls(got, "nn.pack_bytes4"), 2);
  EXPECT_EQ(count_calls(got, "sum"), 1);  // the weights' row sums, for the zero point
  EXPECT_EQ(got->body->type, f->body->type);
  // Without int8 dot products (AVX2, AVX-512 before VNNI), or a weight zero point that is not
  // 0, or float activations: unchanged.
  EXPECT_TRUE(structural_equal(int8_products(f, plain, plain, k512), f));
  Function shifted = pt2e_linear(q, w, 128, 1);
  EXPECT_TRUE(structural_equal(int8_products(shifted, vnni, vnni, k512), shifted));
  // A zero point of 0 needs no row sums.
  EXPECT_EQ(count_calls(int8_products(pt2e_linear(q, w, 0, 0), vnni, vnni, k512), "sum"), 0);
  Expr fq = var("q", TensorType{{3, 8}, DType::Int32});
  Function ints = pt2e_linear(fq, w, 0, 0);
  EXPECT_TRUE(structural_equal(int8_products(ints, vnni, vnni, k512), ints));
}

// A conv of a dequantized uint8 image by dequantized int8 weights becomes the int8 conv over
// words of four channels, padded with the zero point, where its rows hold a vector (16
// int32 lanes at 512 bits) or AlterOpLayout blocks it (channels in int32 blocks of whole
// words: 32 -> 32); a 7-wide image of 8 -> 4 channels or a grouped conv keeps the float conv.
// conv((cast(q) - 3) * 0.5, cast(w) * 0.25) as the frontend writes a PT2E conv: q uint8
// [1, channels, 4, width], w int8 [out, channels / groups, kernel, kernel], padded to keep
// the image's size.
Function pt2e_conv(int64_t width, int64_t groups, int64_t channels = 8, int64_t out = 4,
                   int64_t kernel = 3) {
  Expr q = var("q", TensorType{{1, channels, 4, width}, DType::UInt8});
  Expr x =
      call("multiply",
           {call("subtract", {call("cast", {q}, to("float32")), filled({}, DType::Float32, 3)}),
            filled({}, DType::Float32, 0.5)});
  Expr w = call("multiply",
                {call("cast", {filled({out, channels / groups, kernel, kernel}, DType::Int8, 2)},
                      to("float32")),
                 filled({out, 1, 1, 1}, DType::Float32, 0.25)});
  Attrs attrs({{"padding", std::vector<int64_t>{kernel / 2}}, {"groups", groups}});
  return function({q}, call("nn.conv2d", {x, w}, attrs, "conv"));
}

const CallNode* find_call(const Function& f, const std::string& op) {
  for (auto& e : post_order(f->body))
    if (auto* c = as<CallNode>(e); c && c->op && c->op->name == op) return c;
  return nullptr;
}

// Activations that a quantize clamps below 128 (PT2E's reduce_range: quant_max 127), through
// a reshape, make the product activation_bits 7 (its steps dot_u7s8); a machine with only
// 7-bit int8 dot products (AVX2 on Zen 3) rewrites those and no other: a quant_max of 255, a
// clip whose a_max is 128, a zero point of 128 (the byte padding reads), or a clip from -1
// (whose cast to uint8 wraps -1 to 255) keep the dense.
TEST(Int8Products, SevenBitActivationsMakeSevenBitProductsWhichMachinesWithoutVnniTake) {
  auto linear = [](double a_max, double zero, double a_min = 0) {
    Expr x = var("x", TensorType{{3, 8}, DType::Float32});
    Expr clipped = call("clip", {call("round", {x})}, Attrs({{"a_min", a_min}, {"a_max", a_max}}));
    Expr q = call("reshape", {call("cast", {clipped}, to("uint8"))},
                  Attrs().with("newshape", std::vector<int64_t>{3, 8}));
    return pt2e_linear(q, filled({6, 8}, DType::Int8, 3), zero, 0, x);
  };
  const bool vnni = true, plain = false, seven = true;
  Function f = linear(127, 64);
  for (bool all : {vnni, plain}) {
    Function got = int8_products(f, all, seven, k512);
    const CallNode* dense = find_call(got, "nn.dense_u8s8");
    ASSERT_NE(dense, nullptr) << to_string(Expr(got));
    EXPECT_EQ(dense->attrs.get_int("activation_bits", 8), 7);
    EXPECT_EQ(got->body->type, f->body->type);
  }
  for (Function near : {linear(255, 64), linear(128, 64), linear(127, 128), linear(127, 64, -1)}) {
    EXPECT_TRUE(structural_equal(int8_products(near, plain, seven, k512), near));
    const CallNode* dense = find_call(int8_products(near, vnni, seven, k512), "nn.dense_u8s8");
    ASSERT_NE(dense, nullptr);
    EXPECT_EQ(dense->attrs.get_int("activation_bits", 8), 8);
  }
  EXPECT_TRUE(structural_equal(int8_products(f, plain, false, k512), f));
}

TEST(Int8Products, Pt2eConvBecomesTheInt8ConvWhereItsRowsHoldAVectorOrItRunsBlocked) {
  auto conv = [](int64_t width, int64_t groups, int64_t channels = 8, int64_t out = 4) {
    return pt2e_conv(width, groups, channels, out);
  };
  Function wide = conv(20, 1);
  Function got = int8_products(wide, true, true, k512);
  EXPECT_EQ(count_calls(got, "nn.conv2d_u8s8"), 1) << to_string(Expr(got));
  EXPECT_EQ(count_calls(got, "nn.conv2d"), 0);
  EXPECT_EQ(got->body->type, wide->body->type);
  for (auto& e : post_order(got->body))
    if (auto* c = as<CallNode>(e); c && c->op && c->op->name == "nn.conv2d_u8s8")
      EXPECT_EQ(c->attrs.get_int("pad_word", 0), 0x03030303);
  for (Function f : {conv(7, 1), conv(20, 2)})
    EXPECT_TRUE(structural_equal(int8_products(f, true, true, k512), f));
  EXPECT_EQ(count_calls(int8_products(conv(8, 1), true, true, MachineModel::for_vector_bits(256)),
                        "nn.conv2d_u8s8"),
            1);
  EXPECT_EQ(count_calls(int8_products(conv(7, 1, 32, 32), true, true, k512), "nn.conv2d_u8s8"), 1);
}

// A weight-only batch-1 dense (float activations by a constant int8 weight, as
// RecognizePatterns leaves torchao's Int8WeightOnlyConfig) becomes the int8 product of the
// row's two bytes: one nn.dense_u8s8 over two rows of words, the float sum of the two rows
// times the row's scale. On VNNI machines 16-bit activations (256 z_hi + z_lo, the high
// row's correction 128 times each output's weight sum); on machines with 7-bit products
// only, 14 bits in 7-bit bytes (activation_bits 7; 128 z_hi + z_lo, the correction 64 times
// the weight sum: the offset 8192 over 128). More rows, a float weight or a machine without
// either keep the dense.
TEST(Int8Products, WeightOnlyGemvTakesTheActivationsToTwoBytes) {
  auto dense = [](int64_t rows, DType w) {
    Expr x = var("x", TensorType{{rows, 8}, DType::Float32});
    return function({x}, call("nn.dense", {x, filled({6, 8}, w, 3)}, {}, "fc"));
  };
  Function gemv = dense(1, DType::Int8);
  for (const bool vnni : {true, false}) {
    Function got = int8_products(gemv, vnni, true, k512);
    EXPECT_EQ(count_calls(got, "nn.dense"), 0) << to_string(Expr(got));
    EXPECT_EQ(count_calls(got, "nn.pack_bytes4"), 2);
    EXPECT_EQ(count_calls(got, "max"), 1);  // the row's scale
    EXPECT_EQ(got->body->type, gemv->body->type);
    const CallNode* z = find_call(got, "nn.dense_u8s8");
    ASSERT_NE(z, nullptr);
    EXPECT_EQ(z->type.tensor().shape, (std::vector<int64_t>{1, 2, 6}));  // [lo, hi] rows
    EXPECT_EQ(z->attrs.get_int("activation_bits", 8), vnni ? 8 : 7);
    bool corrected = false;
    for (auto& e : post_order(got->body))
      if (auto* k = as<ConstantNode>(e); k && k->type.tensor().dtype == DType::Int32 &&
                                         k->type.tensor().shape == std::vector<int64_t>{2, 6})
        corrected = k->value.data_as<int32_t>()[0] == 0 &&
                    k->value.data_as<int32_t>()[6] == (vnni ? 128 : 64) * 24;
    EXPECT_TRUE(corrected) << vnni;
  }
  for (Function f : {dense(3, DType::Int8), dense(1, DType::Float32)})
    EXPECT_TRUE(structural_equal(int8_products(f, true, true, k512), f));
  EXPECT_TRUE(structural_equal(int8_products(gemv, false, false, k512), gemv));
}

// torchao's 4-bit weights in groups, as they import: a batch-1 dense becomes nn.dense_int4
// over words of eight nibbles (q + 8) and the scales [G, N]; weights outside [-8, 7], groups
// that are not a multiple of 8 and more rows keep the dense.
TEST(Int8Products, Int4GroupedGemvBecomesTheNibbleDense) {
  auto grouped = [](int64_t rows, int64_t group, double value) {
    const int64_t n = 4, k = 32, g = k / group;
    Expr x = var("x", TensorType{{rows, k}, DType::Float32});
    auto shaped = [](Expr e, std::vector<int64_t> shape) {
      return call("reshape", {e}, Attrs().with("newshape", shape));
    };
    Expr q =
        call("cast", {shaped(filled({n, k}, DType::Int8, value), {n, g, group})}, to("float32"));
    Expr z = call("cast", {shaped(filled({n, g}, DType::Int8, 0), {n, g, 1})}, to("float32"));
    Expr w = call("multiply", {call("subtract", {q, z}),
                               shaped(filled({n, g}, DType::Float32, 0.5), {n, g, 1})});
    return function({x}, call("nn.dense", {x, shaped(w, {n, k})}, {}, "fc"));
  };
  Function f = grouped(1, 16, -3);
  Function got = int8_products(f, true, true, k512);
  EXPECT_EQ(count_calls(got, "nn.dense"), 0) << to_string(Expr(got));
  EXPECT_EQ(count_calls(got, "nn.dense_int4"), 1);
  EXPECT_EQ(got->body->type, f->body->type);
  for (auto& e : post_order(got->body)) {
    auto* c = as<CallNode>(e);
    if (!c || !c->op || c->op->name != "nn.dense_int4") continue;
    EXPECT_EQ(c->attrs.get_int("group", 0), 16);
    auto* words = as<ConstantNode>(c->args[2]);
    ASSERT_NE(words, nullptr);
    EXPECT_EQ(words->type.tensor().shape, (std::vector<int64_t>{4, 4}));
    EXPECT_EQ(static_cast<uint32_t>(words->value.data_as<int32_t>()[0]), 0x55555555u);  // -3 + 8
    EXPECT_EQ(c->args[3]->type.tensor().shape, (std::vector<int64_t>{2, 4}));           // [G, N]
  }
  for (Function near : {grouped(1, 16, 9), grouped(1, 4, -3), grouped(2, 16, -3)})
    EXPECT_TRUE(structural_equal(int8_products(near, true, true, k512), near));
  EXPECT_TRUE(structural_equal(int8_products(f, false, false, k512), f));
}

// A depthwise conv (groups = channels, W [C, 1, KH, KW]) becomes nn.conv2d_u8s8's depthwise
// form over the bytes themselves (no words), padded with the zero point, its exact float32
// sums corrected by the zero point times each channel's weight sum in float32, at any image
// width (AlterOpLayout blocks it: 32 channels are an int32 block). A window of more taps
// than float32 sums exactly (23 x 23 > 514) and a grouped conv that is not depthwise keep
// the float conv.
TEST(Int8Products, Pt2eDepthwiseConvBecomesTheDepthwiseInt8Conv) {
  Function f = pt2e_conv(7, 32, 32, 32);
  Function got = int8_products(f, true, true, k512);
  const CallNode* conv = find_call(got, "nn.conv2d_u8s8");
  ASSERT_NE(conv, nullptr) << to_string(Expr(got));
  EXPECT_EQ(count_calls(got, "nn.conv2d"), 0);
  EXPECT_EQ(count_calls(got, "nn.pack_bytes4"), 0);
  EXPECT_EQ(conv->args[0]->type.tensor().dtype, DType::UInt8);
  EXPECT_EQ(conv->args[1]->type.tensor().shape, (std::vector<int64_t>{32, 1, 3, 3}));
  EXPECT_EQ(conv->type.tensor().dtype, DType::Float32);
  EXPECT_EQ(conv->attrs.get_int("groups", 1), 32);
  EXPECT_EQ(conv->attrs.get_int("pad_word", 0), 0x03030303);
  const CallNode* sums = find_call(got, "sum");
  ASSERT_NE(sums, nullptr);
  EXPECT_EQ(sums->type.tensor().dtype, DType::Float32);
  EXPECT_EQ(got->body->type, f->body->type);
  for (Function same : {pt2e_conv(30, 32, 32, 32, 23), pt2e_conv(7, 16, 32, 32)})
    EXPECT_TRUE(structural_equal(int8_products(same, true, true, k512), same));
  EXPECT_TRUE(structural_equal(int8_products(f, false, false, k512), f));
}

}  // namespace
}  // namespace ember::passes
