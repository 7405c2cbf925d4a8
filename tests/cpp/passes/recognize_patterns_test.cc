// RecognizePatterns: before/expected structural tests of each recognised pattern, with
// near misses left alone.
#include "ember/passes/recognize_patterns.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "ember/ir/op.h"

namespace ember::passes {
namespace {

using namespace ir;

Expr scalar(double v) {
  runtime::NDArray t = runtime::NDArray::empty({}, DType::Float32);
  *t.data_as<float>() = static_cast<float>(v);
  return constant(t);
}

Expr x32() { return var("x", TensorType{{4, 16}, DType::Float32}); }

Attrs marked(const std::string& p, Attrs a) { return a.with("fusion_pattern", p); }

Attrs axis(std::vector<int64_t> a, int64_t keep = 0) {
  return Attrs({{"axis", a}, {"keepdims", keep}});
}

void expect_equal(const Function& got, const Function& want) {
  EXPECT_TRUE(structural_equal(got, want)) << "got:\n"
                                           << to_string(Expr(got)) << "want:\n"
                                           << to_string(Expr(want));
}

TEST(RecognizePatterns, GeluErfInTwoArrangements) {
  Expr x = x32();
  Expr t = call("erf", {call("divide", {x, scalar(std::sqrt(2.0))}, {}, "div")}, {}, "erf");
  Expr a = call(
      "multiply",
      {call("multiply", {x, scalar(0.5)}, {}, "mul"), call("add", {t, scalar(1.0)}, {}, "add")}, {},
      "mul_1");
  Function got = recognize_patterns(function({x}, a));
  expect_equal(got, function({x}, call("nn.gelu", {x},
                                       marked("GELU(erf) recognition",
                                              Attrs({{"approximate", std::string("none")}})))));
  EXPECT_EQ(got->body->name, "mul + div + erf + add + mul_1");
  Expr t2 = call("erf", {call("multiply", {scalar(0.70710678), x})});
  Expr b = call("multiply", {scalar(0.5), call("multiply", {call("add", {scalar(1.0), t2}), x})});
  expect_equal(recognize_patterns(function({x}, b)),
               function({x}, call("nn.gelu", {x},
                                  marked("GELU(erf) recognition",
                                         Attrs({{"approximate", std::string("none")}})))));
  // 0.6 instead of 0.5: not GELU.
  Expr c = call("multiply", {call("multiply", {x, scalar(0.6)}), call("add", {t, scalar(1.0)})});
  expect_equal(recognize_patterns(function({x}, c)), function({x}, c));
}

TEST(RecognizePatterns, GeluTanhWithPowerOrProduct) {
  Expr x = x32();
  for (bool use_pow : {true, false}) {
    Expr cube =
        use_pow ? call("power", {x, scalar(3.0)}) : call("multiply", {call("multiply", {x, x}), x});
    Expr inner = call("multiply", {scalar(std::sqrt(2.0 / M_PI)),
                                   call("add", {x, call("multiply", {scalar(0.044715), cube})})});
    Expr g = call("multiply", {call("multiply", {scalar(0.5), x}),
                               call("add", {scalar(1.0), call("tanh", {inner})})});
    expect_equal(recognize_patterns(function({x}, g)),
                 function({x}, call("nn.gelu", {x},
                                    marked("GELU(tanh) recognition",
                                           Attrs({{"approximate", std::string("tanh")}})))));
  }
}

TEST(RecognizePatterns, NormsAndLogSums) {
  Expr x = x32();
  Attrs a = axis({1}, 1);
  auto one = [&](Expr body) { return recognize_patterns(function({x}, body)); };
  expect_equal(one(call("sum", {call("abs", {x})}, a)),
               function({x}, call("l1_norm", {x}, marked("L1Norm recognition", a))));
  expect_equal(one(call("sum", {call("multiply", {x, x})}, a)),
               function({x}, call("sum_squares", {x}, marked("SumSquares recognition", a))));
  expect_equal(one(call("sqrt", {call("sum", {call("power", {x, scalar(2.0)})}, a)})),
               function({x}, call("l2_norm", {x}, marked("L2Norm recognition", a))));
  expect_equal(one(call("log", {call("sum", {x}, a)})),
               function({x}, call("log_sum", {x}, marked("LogSum recognition", a))));
  expect_equal(one(call("log", {call("sum", {call("exp", {x})}, a)})),
               function({x}, call("log_sum_exp", {x}, marked("LogSumExp recognition", a))));
  Expr y = var("y", TensorType{{4, 16}, DType::Float32});
  Function not_square = function({x, y}, call("sum", {call("multiply", {x, y})}, a));
  expect_equal(recognize_patterns(not_square), not_square);
}

TEST(RecognizePatterns, StableLogSumExpAsTorchWritesIt) {
  Expr x = x32();
  Expr m = call("max", {x}, axis({1}, 1));
  double inf = std::numeric_limits<double>::infinity();
  Expr g = call("where", {call("equal", {call("abs", {m}), scalar(inf)}), scalar(0.0), m});
  Expr l = call("log", {call("sum", {call("exp", {call("subtract", {x, g})})}, axis({1}))});
  Expr out = call("add", {l, call("reshape", {g}, Attrs({{"newshape", std::vector<int64_t>{4}}}))});
  expect_equal(recognize_patterns(function({x}, out)),
               function({x}, call("log_sum_exp", {x}, marked("LogSumExp recognition", axis({1})))));
}

TEST(RecognizePatterns, LogOfSoftmaxIsLogSoftmax) {
  Expr x = x32();
  Function f = function({x}, call("log", {call("nn.softmax", {x}, Attrs({{"axis", int64_t{1}}}))}));
  expect_equal(recognize_patterns(f),
               function({x}, call("nn.log_softmax", {x},
                                  marked("softmax -> log", Attrs({{"axis", int64_t{1}}})))));
}

// A dense or matmul by a float32 cast of an 8-bit constant takes the 8-bit weight itself
// (the matmul's [K, N] weight transposed back); a wider weight, an input weight or a cast to
// another type than the data's stays as it is.
TEST(RecognizePatterns, EightBitWeightOfADense) {
  Expr x = x32();
  auto weight = [](DType t, std::vector<int64_t> shape) {
    runtime::NDArray a = runtime::NDArray::empty(shape, t);
    std::memset(a.data(), 3, a.nbytes());
    return constant(a);
  };
  const Attrs marks = marked("8-bit weight -> dense", Attrs());
  const Attrs t10 = Attrs().with("axes", std::vector<int64_t>{1, 0});
  Expr w = weight(DType::Int8, {8, 16});
  Expr widened = call("cast", {w}, Attrs().with("dtype", std::string("float32")));
  expect_equal(recognize_patterns(function({x}, call("nn.dense", {x, widened}))),
               function({x}, call("nn.dense", {x, w}, marks)));
  Expr transposed =
      call("cast", {call("transpose", {w}, t10)}, Attrs().with("dtype", std::string("float32")));
  expect_equal(recognize_patterns(function({x}, call("nn.matmul", {x, transposed}))),
               function({x}, call("nn.dense", {x, w}, marks)));
  Expr kn = weight(DType::UInt8, {16, 8});  // [K, N]: transposed to the dense's [N, K]
  Expr kn_widened = call("cast", {kn}, Attrs().with("dtype", std::string("float32")));
  expect_equal(recognize_patterns(function({x}, call("nn.matmul", {x, kn_widened}))),
               function({x}, call("nn.dense", {x, call("transpose", {kn}, t10)}, marks)));
  Expr wide = call("nn.dense", {x, call("cast", {weight(DType::Int32, {8, 16})},
                                        Attrs().with("dtype", std::string("float32")))});
  expect_equal(recognize_patterns(function({x}, wide)), function({x}, wide));
  Expr input = var("w", TensorType{{8, 16}, DType::Int8});
  Expr from_input =
      call("nn.dense", {x, call("cast", {input}, Attrs().with("dtype", std::string("float32")))});
  expect_equal(recognize_patterns(function({x, input}, from_input)),
               function({x, input}, from_input));
}

}  // namespace
}  // namespace ember::passes
