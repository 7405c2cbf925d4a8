// RecognizeAttention: attention written as ops becomes one nn.attention call; look-alikes
// that are not exactly attention are left alone; the built model computes the same numbers
// with the pass on and off.
#include "ember/passes/recognize_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ember/codegen/build.h"
#include "ember/ir/op.h"
#include "ember/runtime/graph_executor.h"
#include "ember/support/error.h"

namespace ember::passes {
namespace {

using namespace ir;
using runtime::NDArray;

Expr scalar(float value) {
  NDArray t = NDArray::empty({}, DType::Float32);
  *t.data_as<float>() = value;
  return constant(t);
}

Attrs axes(std::vector<int64_t> a) { return Attrs({{"axes", a}}); }
Attrs newshape(std::vector<int64_t> s) { return Attrs({{"newshape", s}}); }

struct Inputs {
  Expr q = var("q", TensorType{{2, 3, 12, 8}, DType::Float32});
  Expr k = var("k", TensorType{{2, 3, 20, 8}, DType::Float32});
  Expr v = var("v", TensorType{{2, 3, 20, 6}, DType::Float32});
};

// softmax(q @ k^T * 0.25) @ v on 4-D tensors, as written by hand.
Expr hand_written(const Inputs& in) {
  Expr kt = call("transpose", {in.k}, axes({0, 1, 3, 2}), "attn.kt");
  Expr s = call("nn.batch_matmul", {in.q, kt}, {}, "attn.qk");
  s = call("multiply", {s, scalar(0.25f)}, {}, "attn.scale");
  Expr p = call("nn.softmax", {s}, Attrs({{"axis", int64_t{-1}}}), "attn.softmax");
  return call("nn.batch_matmul", {p, in.v}, {}, "attn.pv");
}

// What the PyTorch frontend emits for SDPA with is_causal and a key padding mask (True =
// drop): batch flattened to 3-D around each product, divide, causal where, mask where.
Expr frontend_form(const Inputs& in, const Expr& drop) {
  auto flat = [](const Expr& x) {
    auto s = x->type.tensor().shape;
    return call("reshape", {x}, newshape({6, s[2], s[3]}), "sdpa");
  };
  Expr kt = call("transpose", {in.k}, axes({0, 1, 3, 2}), "sdpa");
  Expr s = call("nn.batch_matmul", {flat(in.q), flat(kt)}, {}, "sdpa");
  s = call("reshape", {s}, newshape({2, 3, 12, 20}), "sdpa");
  s = call("divide", {s, scalar(4.0f)}, {}, "sdpa");
  NDArray tril = NDArray::empty({12, 20}, DType::Bool);
  for (int i = 0; i < 12; ++i)
    for (int j = 0; j < 20; ++j) tril.data_as<uint8_t>()[i * 20 + j] = j <= i;
  s = call("where", {constant(tril), s, scalar(-INFINITY)}, {}, "sdpa");
  s = call("where", {drop, scalar(-INFINITY), s}, {}, "sdpa");
  Expr p = call("nn.softmax", {s}, Attrs({{"axis", int64_t{3}}}), "sdpa");
  Expr o = call("nn.batch_matmul", {flat(p), flat(in.v)}, {}, "sdpa");
  return call("reshape", {o}, newshape({2, 3, 12, 6}), "sdpa");
}

const CallNode* attention_call(const Expr& e) {
  auto* c = as<CallNode>(e);
  return c && c->op && c->op->name == "nn.attention" ? c : nullptr;
}

TEST(RecognizeAttention, HandWrittenChainBecomesOneCall) {
  Inputs in;
  Function f = recognize_attention(function({in.q, in.k, in.v}, hand_written(in)));
  auto* a = attention_call(f->body);
  ASSERT_TRUE(a) << to_string(f);
  ASSERT_EQ(a->args.size(), 3u);
  EXPECT_EQ(a->args[0], in.q);
  EXPECT_EQ(a->args[1], in.k);  // the transpose is absorbed
  EXPECT_EQ(a->args[2], in.v);
  EXPECT_DOUBLE_EQ(a->attrs.get_float("scale", 0), 0.25);
  EXPECT_EQ(a->attrs.get_int("causal", -1), 0);
  EXPECT_EQ(a->attrs.get_str("fusion_pattern", ""), "attention (online softmax)");
  for (const char* name : {"attn.pv", "attn.softmax", "attn.scale", "attn.qk", "attn.kt"})
    EXPECT_NE(a->name.find(name), std::string::npos) << a->name;
}

TEST(RecognizeAttention, FrontendFormWithCausalAndPaddingMask) {
  Inputs in;
  Expr drop = var("drop", TensorType{{2, 1, 1, 20}, DType::Bool});
  Function f = recognize_attention(function({in.q, in.k, in.v, drop}, frontend_form(in, drop)));
  auto* a = attention_call(f->body);
  ASSERT_TRUE(a) << to_string(f);
  EXPECT_EQ(a->type.tensor().shape, (std::vector<int64_t>{2, 3, 12, 6}));
  EXPECT_EQ(a->args[0], in.q);  // the flattening reshapes are read through
  EXPECT_EQ(a->args[1], in.k);
  EXPECT_EQ(a->args[2], in.v);
  EXPECT_EQ(a->attrs.get_int("causal", 0), 1);  // the tril constant
  EXPECT_DOUBLE_EQ(a->attrs.get_float("scale", 0), 0.25);
  ASSERT_EQ(a->args.size(), 4u);
  auto* keep = as<CallNode>(a->args[3]);  // a drop mask is negated into a keep mask
  ASSERT_TRUE(keep && keep->op->name == "logical_not") << to_string(f);
  EXPECT_EQ(keep->args[0], drop);
}

TEST(RecognizeAttention, AdditiveMaskAndScaleOnTheLeft) {
  Inputs in;
  Expr mask = var("mask", TensorType{{12, 20}, DType::Float32});
  Expr kt = call("transpose", {in.k}, axes({0, 1, 3, 2}));
  Expr s = call("multiply", {scalar(0.5f), call("nn.batch_matmul", {in.q, kt})});
  s = call("add", {mask, s});
  Expr o = call("nn.batch_matmul", {call("nn.softmax", {s}), in.v});
  Function f = recognize_attention(function({in.q, in.k, in.v, mask}, o));
  auto* a = attention_call(f->body);
  ASSERT_TRUE(a) << to_string(f);
  ASSERT_EQ(a->args.size(), 4u);
  EXPECT_EQ(a->args[3], mask);
  EXPECT_DOUBLE_EQ(a->attrs.get_float("scale", 0), 0.5);
}

TEST(RecognizeAttention, RunTimeBatchAndSequenceLengths) {
  // The frontend's form of BERT's attention over batch in [1, 16] and seq in [1, 512]:
  // heads flattened into the batch around each product, an additive padding mask.
  const Dim batch = Dim::of(make_symbol("batch", 1, 16)), seq = Dim::of(make_symbol("seq", 1, 512));
  auto tensor = [](const std::string& name, std::vector<Dim> dims) {
    return var(name, TensorType::of(std::move(dims), DType::Float32));
  };
  Expr q = tensor("q", {batch, 3, seq, 8}), k = tensor("k", {batch, 3, seq, 8});
  Expr v = tensor("v", {batch, 3, seq, 6}), mask = tensor("mask", {batch, 1, 1, seq});
  auto flat = [&](const Expr& x) {
    const std::vector<Dim> d = x->type.tensor().all_dims();
    return call("reshape", {x}, Attrs().with_dims("newshape", {batch * 3, d[2], d[3]}));
  };
  Expr kt = call("transpose", {k}, axes({0, 1, 3, 2}));
  Expr s = call("nn.batch_matmul", {flat(q), flat(kt)});
  s = call("reshape", {s}, Attrs().with_dims("newshape", {batch, 3, seq, seq}));
  s = call("add", {call("multiply", {s, scalar(0.25f)}), mask});
  Expr p = call("nn.softmax", {s}, Attrs({{"axis", int64_t{3}}}));
  Expr o = call("nn.batch_matmul", {flat(p), flat(v)});
  o = call("reshape", {o}, Attrs().with_dims("newshape", {batch, 3, seq, 6}));
  Function f = recognize_attention(function({q, k, v, mask}, o));
  auto* a = attention_call(f->body);
  ASSERT_TRUE(a) << to_string(f);
  EXPECT_EQ(to_string(a->type), "float32[batch, 3, seq, 6]");
  EXPECT_EQ(a->args[0], q);
  EXPECT_EQ(a->args[1], k);
  EXPECT_EQ(a->args[3], mask);
  infer_types(f);
}

TEST(RecognizeAttention, LookAlikesAreLeftAlone) {
  Inputs in;
  auto qk = [&] {
    return call("nn.batch_matmul", {in.q, call("transpose", {in.k}, axes({0, 1, 3, 2}))});
  };
  auto softmax = [](const Expr& s, int64_t axis = -1) {
    return call("nn.softmax", {s}, Attrs({{"axis", axis}}));
  };
  std::vector<std::pair<std::string, Expr>> cases;
  {  // the probabilities are also an output
    Expr p = softmax(call("multiply", {qk(), scalar(0.3f)}));
    cases.push_back({"probabilities used twice", tuple({call("nn.batch_matmul", {p, in.v}), p})});
  }
  {  // masked_fill with a finite value is not the -inf mask nn.attention applies
    Expr m = var("m", TensorType{{12, 20}, DType::Bool});
    Expr s = call("where", {m, call("multiply", {qk(), scalar(0.3f)}), scalar(-1e9f)});
    cases.push_back({"finite fill", call("nn.batch_matmul", {softmax(s), in.v})});
  }
  {  // a float mask added before the scale would be scaled too
    Expr m = var("m", TensorType{{12, 20}, DType::Float32});
    Expr s = call("multiply", {call("add", {qk(), m}), scalar(0.3f)});
    cases.push_back({"mask before scale", call("nn.batch_matmul", {softmax(s), in.v})});
  }
  {  // softmax over the query axis
    Expr p = softmax(qk(), 2);
    cases.push_back({"softmax over queries", call("nn.batch_matmul", {p, in.v})});
  }
  {  // a non-scalar multiplier
    Expr w = var("w", TensorType{{12, 20}, DType::Float32});
    Expr p = softmax(call("multiply", {qk(), w}));
    cases.push_back({"tensor scale", call("nn.batch_matmul", {p, in.v})});
  }
  for (auto& [what, body] : cases) {
    std::vector<Expr> params{in.q, in.k, in.v};
    for (auto& e : post_order(body))
      if (e->kind == NodeKind::Var && e != in.q && e != in.k && e != in.v) params.push_back(e);
    Function f = function(params, body);
    Function g = recognize_attention(f);
    EXPECT_TRUE(structural_equal(f, g)) << what << ":\n" << to_string(g);
  }
}

NDArray random_tensor(std::vector<int64_t> shape, unsigned seed, DType dtype = DType::Float32) {
  NDArray t = NDArray::empty(shape, dtype);
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dtype == DType::Bool)
      t.data_as<uint8_t>()[i] = (gen() % 5) == 0;  // drop 1 in 5
    else
      t.data_as<float>()[i] = dist(gen);
  }
  return t;
}

std::vector<float> run_model(const Function& f, const std::vector<NDArray>& inputs,
                             const PassContext& ctx, size_t* kernels,
                             std::vector<std::string>* patterns) {
  auto lib = build(f, "llvm", {}, ctx);
  *kernels = lib->kernels.size();
  for (auto& k : lib->kernels)
    patterns->insert(patterns->end(), k.patterns.begin(), k.patterns.end());
  runtime::GraphExecutor ex(lib->graph, lib->module);
  for (size_t i = 0; i < inputs.size(); ++i) ex.set_input(static_cast<int>(i), inputs[i]);
  ex.run();
  NDArray out = ex.get_output(0);
  return std::vector<float>(out.data_as<float>(), out.data_as<float>() + out.numel());
}

TEST(RecognizeAttention, BuiltModelMatchesTheUnfusedOps) {
  Inputs in;
  Expr drop = var("drop", TensorType{{2, 1, 1, 20}, DType::Bool});
  Function f = function({in.q, in.k, in.v, drop}, frontend_form(in, drop));
  std::vector<NDArray> inputs = {random_tensor({2, 3, 12, 8}, 1), random_tensor({2, 3, 20, 8}, 2),
                                 random_tensor({2, 3, 20, 6}, 3),
                                 random_tensor({2, 1, 1, 20}, 4, DType::Bool)};
  size_t fused_kernels = 0, unfused_kernels = 0;
  std::vector<std::string> fused_patterns, unfused_patterns;
  PassContext off;
  off.disabled_passes = {"RecognizeAttention"};
  auto fused = run_model(f, inputs, PassContext{}, &fused_kernels, &fused_patterns);
  auto unfused = run_model(f, inputs, off, &unfused_kernels, &unfused_patterns);
  ASSERT_EQ(fused.size(), unfused.size());
  for (size_t i = 0; i < fused.size(); ++i) {
    if (std::isnan(unfused[i])) {
      EXPECT_TRUE(std::isnan(fused[i])) << i;
      continue;
    }
    ASSERT_NEAR(fused[i], unfused[i], 1e-5 + 1e-4 * std::fabs(unfused[i])) << "element " << i;
  }
  // Attention plus the logical_not of the padding mask.
  EXPECT_EQ(fused_kernels, 2u);
  EXPECT_GT(unfused_kernels, 3u);
  EXPECT_NE(std::find(fused_patterns.begin(), fused_patterns.end(), "attention (online softmax)"),
            fused_patterns.end());
}

}  // namespace
}  // namespace ember::passes
