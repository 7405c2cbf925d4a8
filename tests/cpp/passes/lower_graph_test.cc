// lower_graph's per-group decisions: which groups compute on their pixels as one row.
#include <gtest/gtest.h>

#include "ember/ir/op.h"
#include "ember/passes/lower.h"

namespace ember::passes {
namespace {

using namespace ir;

// A group conv(x, w) -> add bias -> [add residual] -> relu over blocked tensors of 16 channels.
Function conv_group(int64_t h, int64_t w, int64_t k, int64_t stride, int64_t pad, bool residual,
                    const char* epilogue = "nn.relu") {
  const int64_t oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
  Expr x = var("x", TensorType{{1, 2, h, w, 16}, DType::Float32});
  Expr wt = var("w", TensorType{{2, 2, k, k, 16, 16}, DType::Float32});
  Expr b = var("b", TensorType{{1, 2, 1, 1, 16}, DType::Float32});
  Expr r = var("r", TensorType{{1, 2, oh, ow, 16}, DType::Float32});
  Attrs attrs({{"strides", std::vector<int64_t>{stride, stride}},
               {"padding", std::vector<int64_t>{pad, pad, pad, pad}}});
  Expr y = call("add", {call("nn.conv2d_blocked", {x, wt}, attrs), b});
  if (residual) y = call("add", {y, r});
  y = call(epilogue, {y});
  std::vector<Expr> params = {x, wt, b};
  if (residual) params.push_back(r);
  return function(params, y, "g");
}

TEST(LowerGraph, PointwiseConvGroupsRunTheirPixelsAsOneRow) {
  // 1x1, stride 1, no padding, with a bias, a residual and a ReLU: every H x W tensor of
  // the group is one row of H*W pixels; the bias (broadcast over the pixels) and the
  // weights keep their shapes.
  Function g = conv_group(7, 7, 1, 1, 0, true);
  auto flat = [&](const Expr& e) {
    return flat_pixel_type(g, e, MachineModel::for_vector_bits(256)).shape;
  };
  EXPECT_EQ(flat(g->params[0]), (std::vector<int64_t>{1, 2, 1, 49, 16}));
  EXPECT_EQ(flat(g->params[1]), (std::vector<int64_t>{2, 2, 1, 1, 16, 16}));
  EXPECT_EQ(flat(g->params[2]), (std::vector<int64_t>{1, 2, 1, 1, 16}));
  EXPECT_EQ(flat(g->params[3]), (std::vector<int64_t>{1, 2, 1, 49, 16}));
  EXPECT_EQ(flat(g->body), (std::vector<int64_t>{1, 2, 1, 49, 16}));
  Function column = conv_group(13, 1, 1, 1, 0, false);
  EXPECT_EQ(flat_pixel_type(column, column->body, MachineModel::for_vector_bits(256)).shape,
            (std::vector<int64_t>{1, 2, 1, 13, 16}));
  // Not when the pixels are one row already, or when another op than an elementwise one is
  // in the group.
  for (Function other :
       {conv_group(1, 9, 1, 1, 0, false), conv_group(7, 7, 1, 1, 0, false, "nn.softmax")}) {
    SCOPED_TRACE(to_string(Expr(other)));
    const TensorType& x = other->params[0]->type.tensor();
    EXPECT_EQ(flat_pixel_type(other, other->params[0], MachineModel::for_vector_bits(256)).shape,
              x.shape);
    EXPECT_EQ(flat_pixel_type(other, other->body, MachineModel::for_vector_bits(256)).shape,
              other->body->type.tensor().shape);
  }
}

TEST(LowerGraph, WindowedConvGroupsRunTheirPixelsAsOneRowWhereTilesFitThemBetter) {
  // A 3x3 conv with 7x7 output pixels of 16 channels: on AVX2 (two registers per vector, 6
  // pixels per tile at most) rows of 7 take tiles of 4 + 3, 49 pixels tiles of 5; its
  // output and the residual are one row, its input keeps its shape (read at p / 7, p % 7).
  // On AVX-512 (one register per vector) a tile holds the 7 pixels of a row: no change.
  for (auto [stride, h] : {std::pair{1, 7}, std::pair{2, 14}}) {
    Function g = conv_group(h, h, 3, stride, 1, true);
    auto flat = [&](const Expr& e, int bits) {
      return flat_pixel_type(g, e, MachineModel::for_vector_bits(bits)).shape;
    };
    EXPECT_EQ(flat(g->params[0], 256), (std::vector<int64_t>{1, 2, h, h, 16}));
    EXPECT_EQ(flat(g->params[3], 256), (std::vector<int64_t>{1, 2, 1, 49, 16}));
    EXPECT_EQ(flat(g->body, 256), (std::vector<int64_t>{1, 2, 1, 49, 16}));
    EXPECT_EQ(flat(g->params[2], 256), (std::vector<int64_t>{1, 2, 1, 1, 16}));
    EXPECT_EQ(flat(g->body, 512), (std::vector<int64_t>{1, 2, 7, 7, 16}));
  }
  // Rows of 28 and 56 pixels divide into tiles of 4 already.
  for (int64_t h : {28, 56}) {
    Function g = conv_group(h, h, 3, 1, 1, false);
    EXPECT_EQ(flat_pixel_type(g, g->body, MachineModel::for_vector_bits(256)).shape,
              g->body->type.tensor().shape);
  }
  // Not when the conv's input is read by another op of the group too (it must keep its
  // shape for the conv and be one row for the other).
  Expr x = var("x", TensorType{{1, 1, 7, 7, 16}, DType::Float32});
  Expr w = var("w", TensorType{{1, 1, 3, 3, 16, 16}, DType::Float32});
  Attrs pad1({{"padding", std::vector<int64_t>{1, 1, 1, 1}}});
  Function both = function({x, w}, call("add", {call("nn.conv2d_blocked", {x, w}, pad1), x}), "g");
  EXPECT_EQ(flat_pixel_type(both, both->body, MachineModel::for_vector_bits(256)).shape,
            (std::vector<int64_t>{1, 1, 7, 7, 16}));
}

TEST(LowerGraph, KernelsWithTheSameLoopNestShareOneFunction) {
  // Two layers of dense + relu of the same sizes (other weights), and one of other sizes.
  Expr x = var("x", TensorType{{4, 32}, DType::Float32});
  auto layer = [](const Expr& in, int64_t out) {
    const int64_t k = in->type.tensor().shape.back();
    Expr w = constant(runtime::NDArray::empty({out, k}, DType::Float32), "w");
    return call("nn.relu", {call("nn.dense", {in, w})});
  };
  Expr y = layer(layer(layer(x, 32), 32), 16);
  LowerOptions options;
  options.machine = MachineModel::for_vector_bits(256);
  LoweredGraph g = lower_graph(function({x}, y), options);
  ASSERT_EQ(g.graph.kernels.size(), 6u);  // dense and relu of each layer (no FuseOps here)
  ASSERT_EQ(g.kernels.size(), 6u);
  EXPECT_EQ(g.funcs.size(), 4u);  // the second layer's kernels are the first's
  EXPECT_EQ(g.graph.kernels[2].func, g.graph.kernels[0].func);
  EXPECT_EQ(g.graph.kernels[3].func, g.graph.kernels[1].func);
  EXPECT_NE(g.graph.kernels[4].func, g.graph.kernels[0].func);
  for (size_t k = 0; k < g.kernels.size(); ++k)
    EXPECT_EQ(g.kernels[k].func, g.graph.kernels[k].func);
}

}  // namespace
}  // namespace ember::passes
