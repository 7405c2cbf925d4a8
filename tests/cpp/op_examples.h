#pragma once
// A sample call of every registered op, for the tests that sweep the registry (every op
// compiles to PTX, runs on the emulated GPU, reads only the attributes it declares): a table
// for ops with attributes or several inputs; any other op is tried as a unary op on a float
// tensor, then as a binary one.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ember/ir/op.h"
#include "ember/ir/tensor_expr.h"
#include "ember/support/error.h"

namespace ember::test_util {

using ir::Attrs;
using ir::call;
using ir::Expr;
using ir::TensorType;
using ir::var;

inline Expr f32(const std::string& name, std::vector<int64_t> shape) {
  return var(name, TensorType{std::move(shape), DType::Float32});
}

// One example call per op (ops with attributes or several inputs); any other op is tried
// as a unary op on a float tensor.
inline std::map<std::string, std::function<Expr(std::vector<Expr>&)>> examples() {
  using V = std::vector<int64_t>;
  auto x4 = [](std::vector<Expr>& p) { return p.emplace_back(f32("x", {2, 4, 9, 7})); };
  return {
      {"nn.conv2d",
       [=](auto& p) {
         Expr x = x4(p), w = p.emplace_back(f32("w", {6, 4, 3, 3}));
         return call("nn.conv2d", {x, w}, Attrs({{"padding", V{1}}, {"strides", V{2}}}));
       }},
      {"nn.pack_bytes4",
       [](auto& p) {
         return call("nn.pack_bytes4",
                     {p.emplace_back(var("q", TensorType{{3, 18}, DType::UInt8}))});
       }},
      {"nn.conv2d_u8s8",
       [](auto& p) {
         Expr x = p.emplace_back(var("x4", TensorType{{1, 3, 9, 7}, DType::Int32}));
         Expr w = p.emplace_back(var("w4", TensorType{{5, 3, 3, 3}, DType::Int32}));
         return call("nn.conv2d_u8s8", {x, w},
                     Attrs({{"padding", std::vector<int64_t>{1}}, {"pad_word", int64_t{7}}}));
       }},
      {"nn.conv2d_u8s8_blocked",
       [](auto& p) {
         Expr x = p.emplace_back(var("x", TensorType{{1, 2, 9, 7, 8}, DType::UInt8}));
         Expr w = p.emplace_back(var("w4", TensorType{{3, 2, 3, 3, 2, 16}, DType::Int32}));
         return call("nn.conv2d_u8s8_blocked", {x, w},
                     Attrs({{"padding", std::vector<int64_t>{1}}, {"pad_word", int64_t{7}}}));
       }},
      {"nn.conv2d_bf16",
       [](auto& p) {
         Expr x = p.emplace_back(var("x2", TensorType{{1, 3, 9, 7}, DType::Int32}));
         Expr w = p.emplace_back(var("w2", TensorType{{5, 3, 3, 3}, DType::Int32}));
         return call("nn.conv2d_bf16", {x, w}, Attrs({{"padding", std::vector<int64_t>{1}}}));
       }},
      {"nn.conv2d_bf16_blocked",
       [](auto& p) {
         Expr x = p.emplace_back(var("x", TensorType{{1, 2, 9, 7, 8}, DType::BFloat16}));
         Expr w = p.emplace_back(var("w2", TensorType{{3, 2, 3, 3, 4, 16}, DType::Int32}));
         return call("nn.conv2d_bf16_blocked", {x, w},
                     Attrs({{"padding", std::vector<int64_t>{1}}}));
       }},
      {"nn.dense_u8s8",
       [](auto& p) {
         Expr x = p.emplace_back(var("x4", TensorType{{3, 10}, DType::Int32}));
         Expr w = p.emplace_back(var("w4", TensorType{{7, 10}, DType::Int32}));
         return call("nn.dense_u8s8", {x, w});
       }},
      {"nn.dense_int4",  // two groups of 16: x4 [2, K/4], sums [G], w [N, K/8], scales [G, N]
       [](auto& p) {
         Expr x = p.emplace_back(var("x4", TensorType{{2, 8}, DType::Int32}));
         Expr t = p.emplace_back(var("t", TensorType{{2}, DType::Int32}));
         Expr w = p.emplace_back(var("w8", TensorType{{7, 4}, DType::Int32}));
         Expr s = p.emplace_back(f32("s", {2, 7}));
         return call("nn.dense_int4", {x, t, w, s}, Attrs({{"group", int64_t{16}}}));
       }},
      {"nn.pack_bf16_pairs",
       [](auto& p) {
         return call("nn.pack_bf16_pairs",
                     {p.emplace_back(var("b", TensorType{{3, 17}, DType::BFloat16}))});
       }},
      {"nn.dense_bf16",
       [](auto& p) {
         Expr x = p.emplace_back(var("x2", TensorType{{3, 10}, DType::Int32}));
         Expr w = p.emplace_back(var("w2", TensorType{{7, 10}, DType::Int32}));
         return call("nn.dense_bf16", {x, w});
       }},
      {"nn.dense",
       [](auto& p) {
         Expr x = p.emplace_back(f32("x", {3, 40})), w = p.emplace_back(f32("w", {10, 40}));
         return call("nn.dense", {x, w});
       }},
      {"nn.matmul",
       [](auto& p) {
         Expr a = p.emplace_back(f32("a", {3, 5, 6})), b = p.emplace_back(f32("b", {6, 4}));
         return call("nn.matmul", {a, b});
       }},
      {"nn.batch_matmul",
       [](auto& p) {
         Expr a = p.emplace_back(f32("a", {3, 5, 6})), b = p.emplace_back(f32("b", {3, 6, 2}));
         return call("nn.batch_matmul", {a, b});
       }},
      {"nn.bias_add",
       [=](auto& p) {
         Expr x = x4(p);
         return call("nn.bias_add", {x, p.emplace_back(f32("b", {4}))});
       }},
      {"nn.batch_norm",
       [=](auto& p) {
         Expr x = x4(p);
         std::vector<Expr> args{x};
         for (const char* n : {"g", "b", "m", "v"}) args.push_back(p.emplace_back(f32(n, {4})));
         return call("nn.batch_norm", args);
       }},
      {"nn.max_pool2d",
       [=](auto& p) {
         return call("nn.max_pool2d", {x4(p)},
                     Attrs({{"pool_size", V{3}}, {"strides", V{2}}, {"padding", V{1}}}));
       }},
      {"nn.avg_pool2d",
       [=](auto& p) {
         return call("nn.avg_pool2d", {x4(p)}, Attrs({{"pool_size", V{2}}, {"padding", V{1}}}));
       }},
      {"nn.adaptive_avg_pool2d",
       [=](auto& p) {
         return call("nn.adaptive_avg_pool2d", {x4(p)}, Attrs({{"output_size", V{2}}}));
       }},
      {"nn.softmax",
       [](auto& p) { return call("nn.softmax", {p.emplace_back(f32("x", {3, 1000}))}); }},
      {"nn.log_softmax",
       [](auto& p) { return call("nn.log_softmax", {p.emplace_back(f32("x", {3, 37}))}); }},
      {"nn.layer_norm",
       [](auto& p) {
         Expr x = p.emplace_back(f32("x", {2, 5, 48}));
         return call("nn.layer_norm",
                     {x, p.emplace_back(f32("g", {48})), p.emplace_back(f32("b", {48}))});
       }},
      {"nn.pad",
       [=](auto& p) {
         return call("nn.pad", {x4(p)}, Attrs({{"pad_width", V{0, 0, 0, 0, 1, 1, 2, 2}}}));
       }},
      {"mean", [=](auto& p) { return call("mean", {x4(p)}, Attrs({{"axis", V{2, 3}}})); }},
      {"sum", [=](auto& p) { return call("sum", {x4(p)}, Attrs({{"axis", V{1}}})); }},
      {"max", [=](auto& p) { return call("max", {x4(p)}, Attrs({{"axis", V{3}}})); }},
      {"reshape",
       [=](auto& p) {
         // A view alone has no kernel: add one so the kernel reads the view.
         Expr r = call("reshape", {x4(p)}, Attrs({{"newshape", V{8, -1}}}));
         return call("nn.relu", {r});
       }},
      {"flatten", [=](auto& p) { return call("nn.relu", {call("flatten", {x4(p)})}); }},
      {"squeeze",
       [](auto& p) {
         return call("nn.relu", {call("squeeze", {p.emplace_back(f32("x", {3, 1, 4}))})});
       }},
      {"transpose",
       [=](auto& p) { return call("transpose", {x4(p)}, Attrs({{"axes", V{0, 2, 3, 1}}})); }},
      {"concatenate",
       [](auto& p) {
         Expr a = p.emplace_back(f32("a", {2, 3})), b = p.emplace_back(f32("b", {2, 5}));
         return call("concatenate", {a, b}, Attrs({{"axis", int64_t{1}}}));
       }},
      {"where",
       [](auto& p) {
         Expr c = p.emplace_back(var("c", TensorType{{4, 5}, DType::Bool}));
         return call("where", {c, p.emplace_back(f32("a", {4, 5})), p.emplace_back(f32("b", {5}))});
       }},
      {"cast",
       [](auto& p) {
         return call("cast", {p.emplace_back(f32("x", {4, 5}))},
                     Attrs({{"dtype", std::string("int32")}}));
       }},
      {"take",
       [](auto& p) {
         Expr x = p.emplace_back(f32("x", {6, 5}));
         Expr i = p.emplace_back(var("i", TensorType{{3}, DType::Int64}));
         return call("take", {x, i}, Attrs({{"axis", int64_t{0}}}));
       }},
      {"adv_index",
       [](auto& p) {
         Expr x = p.emplace_back(f32("x", {3, 4, 6}));
         Expr i = p.emplace_back(var("i", TensorType{{2, 1}, DType::Int64}));
         Expr j = p.emplace_back(var("j", TensorType{{5}, DType::Int32}));
         return call("adv_index", {x, i, j}, Attrs({{"axis", int64_t{1}}}));
       }},
      {"gather",
       [](auto& p) {
         Expr x = p.emplace_back(f32("x", {4, 6}));
         Expr i = p.emplace_back(var("i", TensorType{{4, 3}, DType::Int64}));
         return call("gather", {x, i}, Attrs({{"axis", int64_t{1}}}));
       }},
      {"scatter",
       [](auto& p) {
         Expr x = p.emplace_back(f32("x", {4, 6}));
         Expr i = p.emplace_back(var("i", TensorType{{3, 5}, DType::Int64}));
         Expr u = p.emplace_back(f32("u", {4, 5}));
         return call("scatter", {x, i, u},
                     Attrs({{"axis", int64_t{1}}, {"reduce", std::string("sum")}}));
       }},
      {"index_put",
       [](auto& p) {
         Expr x = p.emplace_back(f32("x", {3, 4, 6}));
         Expr v = p.emplace_back(f32("v", {5, 1}));
         Expr i = p.emplace_back(var("i", TensorType{{5}, DType::Int32}));
         Expr j = p.emplace_back(var("j", TensorType{{1}, DType::Int64}));
         return call("index_put", {x, v, i, j}, Attrs({{"axis", int64_t{0}}}));
       }},
      {"broadcast_to",
       [](auto& p) {
         return call("broadcast_to", {p.emplace_back(f32("x", {3, 1}))},
                     Attrs({{"shape", V{2, 3, 5}}}));
       }},
      {"expand_dims",
       [](auto& p) {
         return call("nn.relu", {call("expand_dims", {p.emplace_back(f32("x", {3, 4}))},
                                      Attrs({{"axis", int64_t{1}}}))});
       }},
      {"strided_slice",
       [=](auto& p) {
         return call(
             "strided_slice", {x4(p)},
             Attrs({{"begin", V{0, 1, 1, 0}}, {"end", V{2, 4, 9, 7}}, {"strides", V{1, 2, 3, 1}}}));
       }},
      {"topk",
       [=](auto& p) {
         return call("topk", {x4(p)}, Attrs({{"k", int64_t{3}}, {"axis", int64_t{2}}}));
       }},
      {"nn.attention",
       [](auto& p) {
         Expr q = p.emplace_back(f32("q", {2, 3, 5, 8})),
              k = p.emplace_back(f32("k", {2, 3, 7, 8}));
         Expr v = p.emplace_back(f32("v", {2, 3, 7, 8}));
         return call("nn.attention", {q, k, v}, Attrs({{"causal", int64_t{1}}}));
       }},
      {"nn.grouped_matmul",
       [](auto& p) {
         Expr x = p.emplace_back(f32("x", {9, 12})), w = p.emplace_back(f32("w", {3, 12, 21}));
         Expr offs = p.emplace_back(var("offs", TensorType{{3}, DType::Int32}));
         return call("nn.grouped_matmul", {x, w, offs});
       }},
      {"nn.instance_norm",
       [=](auto& p) {
         Expr x = x4(p), g = p.emplace_back(f32("g", {4})), b = p.emplace_back(f32("b", {4}));
         return call("nn.instance_norm", {x, g, b});
       }},
      {"cumsum", [=](auto& p) { return call("cumsum", {x4(p)}, Attrs({{"axis", int64_t{2}}})); }},
      {"clip",
       [](auto& p) {
         return call("clip", {p.emplace_back(f32("x", {4, 5}))},
                     Attrs({{"a_min", 0.0}, {"a_max", 6.0}}));
       }},
  };
}

// Unary, then binary elementwise ops on float32 (broadcast shapes), then on int64 (integer
// division, shifts, bit ops).
inline Expr generic_example(const std::string& op, std::vector<Expr>& p, std::string* why) {
  auto try_call = [&](std::vector<Expr> args) -> Expr {
    try {
      return call(op, args);
    } catch (const Error& e) {
      *why = e.what();
      return nullptr;
    }
  };
  std::vector<Expr> unary{f32("x", {3, 70})};
  if (Expr e = try_call(unary)) {
    p = unary;
    return e;
  }
  std::vector<Expr> binary{f32("a", {3, 70}), f32("b", {70})};
  if (Expr e = try_call(binary)) {
    p = binary;
    return e;
  }
  auto i64 = [](const std::string& name, std::vector<int64_t> shape) {
    return var(name, TensorType{std::move(shape), DType::Int64});
  };
  std::vector<Expr> int_unary{i64("x", {3, 70})};
  if (Expr e = try_call(int_unary)) {
    p = int_unary;
    return e;
  }
  std::vector<Expr> int_binary{i64("a", {3, 70}), i64("b", {70})};
  if (Expr e = try_call(int_binary)) {
    p = int_binary;
    return e;
  }
  return nullptr;
}

// Sample calls of the ops AlterOpLayout makes for the CPU only (blocked convolutions, packed
// weights): not part of examples(), which the GPU tests compile.
inline std::map<std::string, std::function<Expr(std::vector<Expr>&)>> cpu_layout_examples() {
  auto i = [](int64_t v) { return v; };
  auto blocked = [&](std::vector<Expr>& p) {
    return call("to_blocked", {p.emplace_back(f32("x", {1, 12, 6, 5}))}, Attrs({{"block", i(8)}}));
  };
  auto packed = [&](std::vector<Expr>& p) {
    return call("nn.pack_conv_weight", {p.emplace_back(f32("w", {10, 12, 3, 3}))},
                Attrs({{"in_block", i(8)}, {"out_block", i(4)}}));
  };
  auto dense_weight = [&](std::vector<Expr>& p) {
    return call("nn.pack_dense_weight", {p.emplace_back(f32("w", {10, 16}))},
                Attrs({{"block", i(4)}}));
  };
  auto lane_weight = [&](std::vector<Expr>& p) {
    return call("nn.pack_dense_lanes", {p.emplace_back(f32("wl", {10, 16}))},
                Attrs({{"lanes", i(8)}}));
  };
  return {
      {"to_blocked", blocked},
      {"from_blocked",
       [=](auto& p) { return call("from_blocked", {blocked(p)}, Attrs({{"channels", i(12)}})); }},
      {"nn.pack_conv_weight", packed},
      {"nn.conv2d_blocked",
       [=](auto& p) {
         return call("nn.conv2d_blocked", {blocked(p), packed(p)},
                     Attrs({{"padding", std::vector<int64_t>{1}}}));
       }},
      {"nn.pack_dense_weight", dense_weight},
      {"nn.pack_dense_lanes", lane_weight},
      {"nn.dense_lanes",
       [=](auto& p) {
         Expr x = p.emplace_back(f32("x", {1, 16}));
         return call("nn.dense_lanes", {x, lane_weight(p)});
       }},
      {"nn.dense_packed",
       [=](auto& p) {
         Expr x = p.emplace_back(f32("x", {3, 16}));
         return call("nn.dense_packed", {x, dense_weight(p)}, Attrs({{"units", i(10)}}));
       }},
      {"nn.dense_u8s8_packed",
       [=](auto& p) {
         Expr x = p.emplace_back(var("x4", TensorType{{3, 16}, DType::Int32}));
         Expr w = call("nn.pack_dense_weight",
                       {p.emplace_back(var("w4", TensorType{{10, 16}, DType::Int32}))},
                       Attrs({{"block", i(4)}}));
         return call("nn.dense_u8s8_packed", {x, w}, Attrs({{"units", i(10)}}));
       }},
      {"nn.dense_int4_packed",
       [=](auto& p) {
         Expr x = p.emplace_back(var("x4", TensorType{{2, 8}, DType::Int32}));
         Expr t = p.emplace_back(var("t", TensorType{{2}, DType::Int32}));
         Expr w = call("nn.pack_dense_weight",
                       {p.emplace_back(var("w8", TensorType{{10, 4}, DType::Int32}))},
                       Attrs({{"block", i(4)}}));
         Expr s = p.emplace_back(f32("s", {2, 10}));
         return call("nn.dense_int4_packed", {x, t, w, s},
                     Attrs({{"group", i(16)}, {"units", i(10)}}));
       }},
      {"nn.dense_bf16_packed",
       [=](auto& p) {
         Expr x = p.emplace_back(var("x2", TensorType{{3, 16}, DType::Int32}));
         Expr w = call("nn.pack_dense_weight",
                       {p.emplace_back(var("w2", TensorType{{10, 16}, DType::Int32}))},
                       Attrs({{"block", i(4)}}));
         return call("nn.dense_bf16_packed", {x, w}, Attrs({{"units", i(10)}}));
       }},
  };
}

// The compute rule of call `c` over placeholders "in0", "in1", ... for its inputs.
inline ir::Tensor compute_on_placeholders(const ir::CallNode* c) {
  std::vector<ir::Tensor> inputs;
  for (size_t i = 0; i < c->args.size(); ++i) {
    const TensorType& t = c->args[i]->type.tensor();
    inputs.push_back(ir::placeholder("in" + std::to_string(i), t.shape, t.dtype));
  }
  return c->op->compute(inputs, c->attrs, c->type.tensor());
}

}  // namespace ember::test_util
