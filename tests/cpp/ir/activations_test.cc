// DirectML's activations (src/ir/ops/activations.cc) and the normalisation anchors:
// type relations (shape kept, attributes normalised, user errors), pattern kinds, FuseOps
// grouping an activation with a layer/instance norm, and the log1p/expm1 expansions they
// use against the C library. Numerics of the ops against PyTorch are in
// tests/python/test_activations.py.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ember/codegen/codegen.h"
#include "ember/ir/graph.h"
#include "ember/ir/op.h"
#include "ember/ir/prim_math.h"
#include "ember/passes/fuse_ops.h"
#include "ember/support/error.h"

namespace ember::ir {

namespace {

Expr f32(const std::string& name, std::vector<int64_t> shape) {
  return var(name, TensorType{std::move(shape), DType::Float32});
}

const Attrs& attrs_of(const Expr& e) { return as<CallNode>(e)->attrs; }

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

const char* kActivations[] = {"nn.elu",
                              "nn.selu",
                              "nn.celu",
                              "nn.softplus",
                              "nn.parametric_softplus",
                              "nn.softsign",
                              "nn.thresholded_relu",
                              "nn.hardshrink",
                              "nn.softshrink",
                              "nn.scaled_tanh",
                              "nn.linear_act",
                              "nn.mish"};

TEST(Activations, ElemWiseAndShapeKept) {
  for (const char* name : kActivations) {
    EXPECT_EQ(get_op(name)->pattern, OpPattern::ElemWise) << name;
    EXPECT_EQ(get_op(name)->num_inputs, 1) << name;
    Expr y = call(name, {f32("x", {2, 3, 5})});
    EXPECT_EQ(y->type.tensor(), (TensorType{{2, 3, 5}, DType::Float32})) << name;
    Expr y64 = call(name, {var("x", TensorType{{4}, DType::Float64})});
    EXPECT_EQ(y64->type.tensor().dtype, DType::Float64) << name;
  }
  EXPECT_EQ(get_op("nn.layer_norm")->pattern, OpPattern::CommReduce);
  EXPECT_EQ(get_op("nn.instance_norm")->pattern, OpPattern::CommReduce);
}

TEST(Activations, AttributesGetTorchDefaults) {
  Expr x = f32("x", {4});
  // Copies: a reference to the attributes of a temporary call dangles (ASan found it).
  const Attrs elu = attrs_of(call("nn.elu", {x}));
  EXPECT_EQ(elu.get_float("alpha", 0), 1.0);
  const Attrs sp = attrs_of(call("nn.softplus", {x}, Attrs({{"beta", int64_t{2}}})));
  EXPECT_EQ(sp.values().at("beta"), AttrValue(2.0));  // ints become floats
  EXPECT_EQ(sp.get_float("threshold", 0), 20.0);
  EXPECT_EQ(attrs_of(call("nn.hardshrink", {x})).get_float("lambd", 0), 0.5);
  EXPECT_EQ(attrs_of(call("nn.softshrink", {x})).get_float("lambd", 0), 0.5);
  const Attrs thr = attrs_of(call("nn.thresholded_relu", {x}));
  EXPECT_EQ(thr.get_float("alpha", 0), 1.0);  // DirectML's default
  EXPECT_EQ(thr.get_float("value", 1), 0.0);
  const Attrs lin = attrs_of(call("nn.linear_act", {x}));
  EXPECT_EQ(lin.get_float("alpha", 0), 1.0);
  EXPECT_EQ(lin.get_float("beta", 1), 0.0);
  // Unknown attributes (a catalog rewrite's "fusion_pattern") are kept, not refused.
  Expr tagged = call("nn.mish", {x}, Attrs({{"fusion_pattern", std::string("Mish")}}));
  EXPECT_EQ(attrs_of(tagged).get_str("fusion_pattern", ""), "Mish");
}

TEST(Activations, UserErrors) {
  Expr x = f32("x", {4});
  expect_error([&] { call("nn.celu", {x}, Attrs({{"alpha", 0.0}}), "act1"); },
               {"nn.celu 'act1'", "alpha", "must not be 0"});
  expect_error([&] { call("nn.softplus", {x}, Attrs({{"beta", 0.0}})); }, {"beta", "not be 0"});
  expect_error([&] { call("nn.softshrink", {x}, Attrs({{"lambd", -0.1}})); }, {"lambd", ">= 0"});
  expect_error([&] { call("nn.elu", {x}, Attrs({{"alpha", std::nan("")}})); }, {"alpha", "NaN"});
  expect_error([&] { call("nn.scaled_tanh", {x}, Attrs({{"beta", INFINITY}})); },
               {"beta", "finite"});
  expect_error([&] { call("nn.elu", {x}, Attrs({{"alpha", std::string("big")}})); },
               {"nn.elu", "alpha", "must be a number"});
  expect_error([&] { call("nn.mish", {var("i", TensorType{{4}, DType::Int32})}, {}, "m"); },
               {"nn.mish 'm'", "int32", "float", "cast"});
  expect_error([&] { call("nn.selu", {x, x}); }, {"takes 1 input"});
  // The softplus threshold may be infinite (no linear region), but not NaN.
  EXPECT_NO_THROW(call("nn.softplus", {x}, Attrs({{"threshold", INFINITY}})));
  expect_error([&] { call("nn.softplus", {x}, Attrs({{"threshold", std::nan("")}})); },
               {"threshold", "NaN"});
}

TEST(Activations, InstanceNormTypeAndStages) {
  Expr x = f32("x", {2, 3, 4, 5});
  Expr y = call("nn.instance_norm", {x, f32("g", {3}), f32("b", {3})});
  EXPECT_EQ(y->type.tensor().shape, (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(attrs_of(y).get_float("epsilon", 0), 1e-5);
  auto* c = as<CallNode>(y);
  std::vector<Tensor> in;
  for (size_t i = 0; i < c->args.size(); ++i)
    in.push_back(
        placeholder("in" + std::to_string(i), c->args[i]->type.tensor().shape, DType::Float32));
  std::vector<std::string> names;
  for (const Tensor& t : topo_order({c->op->compute(in, c->attrs, c->type.tensor())}))
    if (!t->is_placeholder()) names.push_back(t->name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"instance_norm_shift", "instance_norm_sum",
                                      "instance_norm_var", "instance_norm_fix", "instance_norm"}));
  expect_error(
      [&] {
        call("nn.instance_norm", {f32("x", {3, 4}), f32("g", {4}), f32("b", {4})}, {}, "in1");
      },
      {"nn.instance_norm 'in1'", "spatial", "expand_dims"});
  expect_error([&] { call("nn.instance_norm", {x, f32("g", {5}), f32("b", {3})}); },
               {"gamma is float32[5]", "shape [3]", "one value per channel"});
  expect_error(
      [&] {
        call("nn.instance_norm", {x, f32("g", {3}), f32("b", {3})}, Attrs({{"epsilon", -1.0}}));
      },
      {"epsilon", ">= 0"});
}

// A normalisation followed by activations (and an add before it) is one FuseOps group.
TEST(Activations, NormalisationsAnchorActivationEpilogues) {
  for (const char* norm : {"nn.layer_norm", "nn.instance_norm"}) {
    bool inst = std::string(norm) == "nn.instance_norm";
    std::vector<int64_t> shape{2, 3, 4, 5};
    Expr x = f32("x", shape), r = f32("r", shape);
    std::vector<int64_t> pshape = inst ? std::vector<int64_t>{3} : std::vector<int64_t>{5};
    Expr g = f32("g", pshape), b = f32("b", pshape);
    Expr y = call(norm, {call("add", {x, r}), g, b}, {}, "norm");
    y = call("nn.mish", {call("nn.elu", {y}, {}, "act1")}, {}, "act2");
    Function f = passes::fuse_ops(function({x, r, g, b}, y));
    std::vector<const CallNode*> groups;
    for (auto& e : post_order(f->body))
      if (auto* c = as<CallNode>(e); c && c->fn) groups.push_back(c);
    ASSERT_EQ(groups.size(), 1u) << norm;
    auto patterns = passes::fusion_patterns(groups[0]->fn);
    ASSERT_FALSE(patterns.empty());
    // The add joined the group in front of the norm, the activations behind it.
    EXPECT_EQ(patterns[0], std::string(norm).substr(3) + "+bias/residual+activation epilogue")
        << norm;
  }
}

// out[i] = fn(x[i]) compiled with a vectorized inner loop.
template <class T>
std::vector<T> eval_unary(PrimExpr (*fn)(const PrimExpr&), std::vector<T> x) {
  DType dt = sizeof(T) == 4 ? DType::Float32 : DType::Float64;
  int64_t lanes = codegen::native_vector_lanes(dt);
  size_t n = x.size();
  int64_t rows = (static_cast<int64_t>(n) + lanes - 1) / lanes;
  x.resize(rows * lanes, T(0));
  Buffer bx = make_buffer("x", dt, {rows * lanes}), bo = make_buffer("out", dt, {rows * lanes});
  PrimVar io("io"), ii("ii");
  PrimExpr i = io * PrimExpr(lanes) + ii;
  PrimFunc f;
  f.name = "act_kernel";
  f.params = {bx, bo};
  f.num_inputs = 1;
  f.body = for_loop(io, 0, rows, ForKind::Serial,
                    for_loop(ii, 0, lanes, ForKind::Vectorized, store(bo, i, fn(load(bx, i)))));
  std::vector<T> out(x.size());
  auto m = codegen::compile_cpu({f});
  std::vector<void*> args{x.data(), out.data()};
  m->get_function(f.name)(args.data());
  out.resize(n);
  return out;
}

// Relative error in float32 ulps at the float64 reference; special values must match.
template <class T>
void expect_close(PrimExpr (*fn)(const PrimExpr&), double (*ref)(double), const std::vector<T>& xs,
                  double max_ulp) {
  std::vector<T> got = eval_unary<T>(fn, xs);
  double eps = std::numeric_limits<T>::epsilon();
  for (size_t i = 0; i < xs.size(); ++i) {
    double r = ref(static_cast<double>(xs[i]));
    T rt = static_cast<T>(r);
    if (std::isnan(r)) {
      EXPECT_TRUE(std::isnan(got[i])) << "x = " << xs[i];
    } else if (std::isinf(rt) || r == 0) {
      EXPECT_EQ(got[i], rt) << "x = " << xs[i];
      EXPECT_EQ(std::signbit(got[i]), std::signbit(r)) << "x = " << xs[i];
    } else {
      double err = std::fabs(got[i] - r) / (std::fabs(r) * eps);
      EXPECT_LE(err, max_ulp) << "x = " << xs[i] << " got " << got[i] << " want " << r;
    }
  }
}

template <class T>
std::vector<T> grid() {
  std::vector<T> v;
  const T inf = std::numeric_limits<T>::infinity();
  for (T s : {T(0),      T(-0.0),   T(1e-30),   T(-1e-30), T(1e-7),
              T(-1e-7),  T(0.3465), T(-0.3466), T(0.35),   T(-0.35),
              T(-0.999), T(-1),     T(-2),      T(88),     T(-88),
              T(700),    T(-700),   inf,        -inf,      std::numeric_limits<T>::quiet_NaN()})
    v.push_back(s);
  for (int i = 0; i <= 4000; ++i) v.push_back(static_cast<T>(-3.0 + 6.0 * i / 4000));
  for (int e = -40; e <= 30; ++e) v.push_back(static_cast<T>(std::ldexp(1.37, e)));
  for (int e = -40; e <= 30; ++e) v.push_back(static_cast<T>(-std::ldexp(0.37, e)));
  return v;
}

TEST(Activations, Log1pAndExpm1MatchCLibrary) {
  double (*ref_log1p)(double) = [](double x) { return std::log1p(x); };
  double (*ref_expm1)(double) = [](double x) { return std::expm1(x); };
  expect_close<float>(log1p, ref_log1p, grid<float>(), 4.0);
  expect_close<float>(expm1, ref_expm1, grid<float>(), 4.0);
  expect_close<double>(log1p, ref_log1p, grid<double>(), 8.0);
  expect_close<double>(expm1, ref_expm1, grid<double>(), 8.0);
}

}  // namespace
}  // namespace ember::ir
