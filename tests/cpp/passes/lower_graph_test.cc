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
  auto flat = [&](const Expr& e) { return flat_pixel_type(g, e->type.tensor()).shape; };
  EXPECT_EQ(flat(g->params[0]), (std::vector<int64_t>{1, 2, 1, 49, 16}));
  EXPECT_EQ(flat(g->params[1]), (std::vector<int64_t>{2, 2, 1, 1, 16, 16}));
  EXPECT_EQ(flat(g->params[2]), (std::vector<int64_t>{1, 2, 1, 1, 16}));
  EXPECT_EQ(flat(g->params[3]), (std::vector<int64_t>{1, 2, 1, 49, 16}));
  EXPECT_EQ(flat(g->body), (std::vector<int64_t>{1, 2, 1, 49, 16}));
  EXPECT_EQ(flat_pixel_type(conv_group(13, 1, 1, 1, 0, false), TensorType{{1, 2, 13, 1, 16}}).shape,
            (std::vector<int64_t>{1, 2, 1, 13, 16}));
  // Not when its output pixels are not its input's in order (padding, a stride, a window),
  // when the pixels are one row already, or when another op than an elementwise one is in
  // the group.
  for (Function other : {conv_group(7, 7, 1, 1, 1, false), conv_group(8, 8, 1, 2, 0, false),
                         conv_group(9, 9, 3, 1, 0, false), conv_group(1, 9, 1, 1, 0, false),
                         conv_group(7, 7, 1, 1, 0, false, "nn.softmax")}) {
    SCOPED_TRACE(to_string(Expr(other)));
    const TensorType& x = other->params[0]->type.tensor();
    EXPECT_EQ(flat_pixel_type(other, x).shape, x.shape);
    EXPECT_EQ(flat_pixel_type(other, other->body->type.tensor()).shape,
              other->body->type.tensor().shape);
  }
}

}  // namespace
}  // namespace ember::passes
