// BF16Products: before/after on the graph LegalizeBF16 leaves for a bfloat16 conv, with and
// without a machine that has bfloat16 dot products, and the convs it leaves alone.
#include "ember/passes/bf16_products.h"

#include <gtest/gtest.h>

#include "ember/ir/op.h"

namespace ember::passes {
namespace {

using namespace ir;

Expr widened(const Expr& e) {
  return call("cast", {e}, Attrs().with("dtype", std::string("float32")));
}

// conv2d(cast(X), cast(W)) of a bfloat16 image [1, C, 4, width] and constant weights.
Function bf16_conv(int64_t channels, int64_t out, int64_t width, int64_t groups = 1) {
  Expr x = var("x", TensorType{{1, channels, 4, width}, DType::BFloat16});
  Expr w = constant(runtime::NDArray::empty({out, channels / groups, 3, 3}, DType::BFloat16), "w");
  Attrs attrs({{"padding", std::vector<int64_t>{1}}, {"groups", groups}});
  return function({x}, call("nn.conv2d", {widened(x), widened(w)}, attrs, "conv"));
}

const MachineModel k512 = MachineModel::for_vector_bits(512);

// The conv becomes nn.conv2d_bf16 of both operands packed in pairs along the channels (an
// RGB stem's 3 as two words, the last with a zero) where AlterOpLayout blocks it (channels
// in 32-bit blocks: 32 -> 64, 3 -> 32) or its rows hold a float32 vector (20 wide: 8 -> 4);
// grouped and depthwise convs, a 7-wide 8 -> 4 conv that gets no block, and machines without
// bfloat16 dot products keep the float32 conv of the widened values.
TEST(BF16Products, Bf16ConvBecomesTheWordConvWhereItRunsBlockedOrItsRowsHoldAVector) {
  for (Function f : {bf16_conv(32, 64, 7), bf16_conv(3, 32, 7), bf16_conv(8, 4, 20)}) {
    Function got = bf16_products(f, true, k512);
    auto* c = as<CallNode>(got->body);
    ASSERT_TRUE(c && c->op && c->op->name == "nn.conv2d_bf16") << to_string(Expr(got));
    EXPECT_EQ(got->body->type, f->body->type);
    for (const Expr& arg : c->args) {
      auto* pack = as<CallNode>(arg);
      ASSERT_TRUE(pack && pack->op->name == "nn.pack_bf16_pairs");
      EXPECT_EQ(pack->attrs.get_int("axis", -1), 1);
      EXPECT_EQ(arg->type.tensor().shape[1], (f->params[0]->type.tensor().shape[1] + 1) / 2);
    }
  }
  for (Function f : {bf16_conv(32, 64, 7, 2), bf16_conv(32, 32, 7, 32), bf16_conv(8, 4, 7)})
    EXPECT_TRUE(structural_equal(bf16_products(f, true, k512), f)) << to_string(Expr(f));
  Function f = bf16_conv(32, 64, 7);
  EXPECT_TRUE(structural_equal(bf16_products(f, false, k512), f));
}

}  // namespace
}  // namespace ember::passes
