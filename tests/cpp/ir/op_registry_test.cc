// The op registry as a whole: every registered op is complete (relation, compute rule or own
// lowering, fusion traits, a well-formed attribute schema), and the schema does what op.h
// promises (defaults filled once, kinds checked, errors that name the node).
#include <gtest/gtest.h>

#include <set>
#include <variant>

#include "../../../src/ir/ops/op_util.h"
#include "../expect_error.h"
#include "../op_examples.h"
#include "ember/ir/op.h"
#include "ember/passes/machine_model.h"

namespace ember::ir {
namespace {

// A test op that reads an attribute it does not declare ("bad") when it is given one: the
// guard must make that an internal error naming op and attribute.
[[maybe_unused]] const Op* kUndeclaredReader = register_op(ops::with_attrs(
    {"test_undeclared_reader", 1, OpPattern::ElemWise,
     [](const std::vector<Type>& args, Attrs& attrs, const TypeContext&) {
       if (attrs.has("bad")) ops::attr_int(attrs, "bad");
       return args[0];
     },
     [](const std::vector<Tensor>& in, const Attrs& attrs, const TensorType& out) {
       if (attrs.has("bad")) ops::attr_float(attrs, "bad");
       return compute("id", out.shape,
                      [&](const std::vector<PrimVar>& i) { return in[0](ops::as_exprs(i)); });
     }},
    {ops::int_attr("good", 0, "a declared attribute")}));

bool value_has_kind(const AttrValue& v, AttrKind k) {
  switch (k) {
    case AttrKind::Int:
      return std::holds_alternative<int64_t>(v);
    case AttrKind::Float:
      return std::holds_alternative<double>(v);
    case AttrKind::Str:
      return std::holds_alternative<std::string>(v);
    case AttrKind::Ints:
      return std::holds_alternative<std::vector<int64_t>>(v);
  }
  return false;
}

TEST(OpRegistry, EveryOpIsComplete) {
  std::vector<std::string> names = list_ops();
  ASSERT_GT(names.size(), 50u);
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const Op* op = get_op(name);
    ASSERT_NE(op, nullptr);
    EXPECT_EQ(op->name, name);
    EXPECT_TRUE(op->type_rel) << "no type relation";
    EXPECT_TRUE(op->compute || op->lower) << "neither a compute rule nor its own lowering";
    // Fusion traits: a known pattern kind; an op without a compute rule cannot be fused, so
    // it must be opaque; views are injective.
    EXPECT_STRNE(op_pattern_name(op->pattern), "?");
    if (!op->compute) EXPECT_EQ(op->pattern, OpPattern::Opaque);
    if (op->is_view) EXPECT_EQ(op->pattern, OpPattern::Injective);
    if (op->two_anchor)
      EXPECT_TRUE(op->pattern == OpPattern::OutEWiseFusable) << "two-anchor rule on a non-anchor";
    EXPECT_FALSE(op_family(*op).empty());
    EXPECT_EQ(op_family(*op).find('.'), std::string::npos);
    std::set<std::string> seen;
    for (const AttrSpec& a : op->attrs) {
      SCOPED_TRACE(a.name);
      EXPECT_FALSE(a.name.empty());
      EXPECT_TRUE(seen.insert(a.name).second) << "declared twice";
      if (a.required) EXPECT_FALSE(a.dflt) << "a required attribute has a default";
      if (a.dflt) EXPECT_TRUE(value_has_kind(*a.dflt, a.kind)) << "default of another kind";
    }
  }
}

TEST(OpRegistry, OwnLoweringsAndTraitsLiveOnTheOp) {
  EXPECT_TRUE(get_op("topk")->lower);
  EXPECT_FALSE(get_op("topk")->compute);
  EXPECT_TRUE(get_op("nn.grouped_matmul")->lower);
  EXPECT_FALSE(get_op("nn.grouped_matmul")->compute);
  EXPECT_TRUE(get_op("nn.attention")->lower);
  EXPECT_TRUE(get_op("nn.attention")->compute);  // the reference form
  EXPECT_TRUE(get_op("nn.conv2d")->two_anchor);
  EXPECT_EQ(op_family(*get_op("nn.conv2d_blocked")), "conv2d");
  EXPECT_EQ(op_family(*get_op("nn.dense_packed")), "dense");
  EXPECT_EQ(bare_op_name("nn.relu"), "relu");
  EXPECT_EQ(bare_op_name("add"), "add");
}

TEST(OpRegistry, SchemaFillsDefaultsOnce) {
  Expr x = var("x", TensorType{{1, 3, 8, 8}, DType::Float32});
  Expr w = var("w", TensorType{{4, 3, 3, 3}, DType::Float32});
  Expr conv = call("nn.conv2d", {x, w}, {}, "conv");
  auto* c = as<CallNode>(conv);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->attrs.get_ints("strides", {}), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(c->attrs.get_ints("padding", {}), (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(c->attrs.get_int("groups", 0), 1);
  Expr sm = call("nn.softmax", {x}, {}, "sm");
  auto* s = as<CallNode>(sm);
  EXPECT_EQ(s->attrs.get_int("axis", 0), 3);  // -1, normalised by the relation
}

TEST(OpRegistry, AttributeErrorsNameTheNode) {
  Expr x = var("x", TensorType{{2, 5}, DType::Float32});
  // A declared attribute of the wrong kind.
  EXPECT_ERROR_WITH(call("nn.softmax", {x}, Attrs({{"axis", std::string("last")}}), "probs"),
                    "nn.softmax 'probs'", "attribute 'axis' must be an integer");
  // A required attribute missing.
  EXPECT_ERROR_WITH(call("topk", {x}, {}, "best"), "topk 'best'", "needs the attribute k");
  // An op that declares nothing: Attrs' own getter error, re-raised with the node.
  EXPECT_ERROR_WITH(call("clip", {x}, Attrs({{"a_min", std::string("lo")}, {"a_max", 1.0}}), "c1"),
                    "clip 'c1'", "'a_min'");
}

template <class F>
void expect_internal_error(F f, std::initializer_list<const char*> parts) {
  try {
    f();
    ADD_FAILURE() << "expected ember::InternalError";
  } catch (const InternalError& e) {
    for (const char* part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(OpRegistry, ReadingAnUndeclaredAttributeIsAnInternalError) {
  Expr x = var("x", TensorType{{2, 5}, DType::Float32});
  Expr ok = call("test_undeclared_reader", {x}, Attrs({{"good", int64_t{1}}}));
  // In the type relation.
  expect_internal_error([&] { call("test_undeclared_reader", {x}, Attrs({{"bad", int64_t{1}}})); },
                        {"op 'test_undeclared_reader'", "attribute 'bad'", "does not declare"});
  // In the compute rule (called directly, as lowering does).
  auto* c = as<CallNode>(ok);
  std::vector<Tensor> in{placeholder("x", {2, 5}, DType::Float32)};
  expect_internal_error([&] { c->op->compute(in, c->attrs.with("bad", 2.0), c->type.tensor()); },
                        {"op 'test_undeclared_reader'", "attribute 'bad'"});
}

// Every registered op's relation, constant check, compute rule, own lowering (CPU and GPU)
// and two-anchor rule run on its sample call (op_examples.h) reading only declared
// attributes: an undeclared read throws InternalError, which fails the test.
TEST(OpRegistry, EveryOpReadsOnlyDeclaredAttributes) {
  auto table = test_util::examples();
  table.merge(test_util::cpu_layout_examples());
  std::vector<std::string> missing;
  for (const std::string& name : list_ops()) {
    SCOPED_TRACE(name);
    std::vector<Expr> params;
    std::string why;
    Expr body =
        table.count(name) ? table[name](params) : test_util::generic_example(name, params, &why);
    if (!body) {
      missing.push_back(name + " (" + why + ")");
      continue;
    }
    for (const Expr& e : post_order(body)) {  // the op's call and any around it
      auto* c = as<CallNode>(e);
      if (!c || !c->op) continue;
      if (c->op->compute)
        EXPECT_EQ(test_util::compute_on_placeholders(c).shape(), c->type.tensor().shape);
      if (c->op->lower && e == body) {
        Function group = function(params, body);
        const passes::MachineModel avx2 = passes::MachineModel::for_vector_bits(256);
        c->op->lower(group, "k", avx2, false);
        c->op->lower(group, "k", avx2, true);
      }
      if (c->op->two_anchor) c->op->two_anchor(*c, *c);
    }
  }
  EXPECT_TRUE(missing.empty()) << "ops without a sample call in tests/cpp/op_examples.h: "
                               << ::testing::PrintToString(missing);
}

}  // namespace
}  // namespace ember::ir
