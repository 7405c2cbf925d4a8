// The op registry and the helpers shared by type relations.
#include "ember/ir/op.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <variant>

#include "ember/support/error.h"
#include "ops/op_util.h"

namespace ember::ir {
namespace {

// Function-local static: ops register from static initialisers in other translation
// units, whose order relative to this file is unspecified.
std::map<std::string, std::unique_ptr<Op>>& registry() {
  static std::map<std::string, std::unique_ptr<Op>> ops;
  return ops;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string shape_string(const std::vector<int64_t>& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

// `v` as an attribute of kind `k`, with the conversions Attrs' getters have always made (an
// integer is a number, a number truncates to an integer, one integer is a list of one), or
// nullopt when it is not one.
std::optional<AttrValue> as_kind(const AttrValue& v, AttrKind k) {
  const int64_t* i = std::get_if<int64_t>(&v);
  const double* d = std::get_if<double>(&v);
  switch (k) {
    case AttrKind::Int:
      if (i) return v;
      if (d) return AttrValue(static_cast<int64_t>(*d));
      return std::nullopt;
    case AttrKind::Float:
      if (d) return v;
      if (i) return AttrValue(static_cast<double>(*i));
      return std::nullopt;
    case AttrKind::Str:
      if (std::holds_alternative<std::string>(v)) return v;
      return std::nullopt;
    case AttrKind::Ints:
      if (std::holds_alternative<std::vector<int64_t>>(v)) return v;
      if (i) return AttrValue(std::vector<int64_t>{*i});
      return std::nullopt;
  }
  return std::nullopt;
}

// Fills the declared defaults and checks the declared kinds, so that a relation and a
// compute rule read every declared attribute without a default of their own.
void apply_schema(const Op& op, Attrs& attrs, const TypeContext& ctx) {
  for (const AttrSpec& spec : op.attrs) {
    auto it = attrs.values().find(spec.name);
    if (it == attrs.values().end()) {
      if (spec.required)
        ctx.fail("needs the attribute " + spec.name +
                 (spec.doc.empty() ? "" : " (" + spec.doc + ")"));
      if (spec.dflt) attrs = attrs.with(spec.name, *spec.dflt);
      continue;
    }
    std::optional<AttrValue> v = as_kind(it->second, spec.kind);
    if (!v)
      ctx.fail("attribute '" + spec.name + "' must be " + attr_kind_name(spec.kind) + ", got " +
               to_string(Attrs({{spec.name, it->second}})));
    if (!(*v == it->second)) attrs = attrs.with(spec.name, *v);
  }
}

// The op whose rule is running on this thread; ReadingAttrs sets it around each rule.
thread_local const Op* t_reading_op = nullptr;

struct ReadingAttrs {
  const Op* saved;
  explicit ReadingAttrs(const Op* op) : saved(t_reading_op) { t_reading_op = op; }
  ~ReadingAttrs() { t_reading_op = saved; }
};

// `rule` run with `op` as the op reading attributes (so op_util.h's readers check its schema).
template <class R, class... Args>
std::function<R(Args...)> reading_attrs_of(const Op* op, std::function<R(Args...)> rule) {
  if (!rule) return rule;
  return [op, rule = std::move(rule)](Args... args) -> R {
    ReadingAttrs scope(op);
    return rule(std::forward<Args>(args)...);
  };
}

}  // namespace

namespace ops {

const Op* op_reading_attrs() { return t_reading_op; }

void check_declared(const std::string& key) {
  const Op* op = t_reading_op;
  if (!op) return;  // a helper called directly (a test of a kernel): no op to check against
  bool known = std::any_of(op->attrs.begin(), op->attrs.end(),
                           [&](const AttrSpec& a) { return a.name == key; });
  EMBER_CHECK(known, "op '", op->name, "' reads the attribute '", key,
              "', which it does not declare; add it to the op's attribute schema");
}

}  // namespace ops

std::string bare_op_name(const std::string& name) {
  return name.rfind("nn.", 0) == 0 ? name.substr(3) : name;
}

std::string op_family(const Op& op) {
  return op.family.empty() ? bare_op_name(op.name) : op.family;
}

std::optional<double> scalar_constant(const Expr& e, bool floats_only) {
  auto* c = as<ConstantNode>(e);
  if (!c || c->value.numel() != 1 || (floats_only && !is_float(c->value.dtype())))
    return std::nullopt;
  return c->value.element(0);
}

const CallNode* op_call(const Expr& e, const std::string& op) {
  auto* c = as<CallNode>(e);
  return c && c->op && c->op->name == op ? c : nullptr;
}

AttrSpec required_attr(std::string name, AttrKind kind, std::string doc) {
  AttrSpec spec{std::move(name), kind, std::nullopt, std::move(doc)};
  spec.required = true;
  return spec;
}

const char* attr_kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::Int:
      return "an integer";
    case AttrKind::Float:
      return "a number";
    case AttrKind::Str:
      return "a string";
    case AttrKind::Ints:
      return "a list of integers";
  }
  return "?";
}

const char* op_pattern_name(OpPattern p) {
  switch (p) {
    case OpPattern::ElemWise:
      return "ElemWise";
    case OpPattern::Broadcast:
      return "Broadcast";
    case OpPattern::Injective:
      return "Injective";
    case OpPattern::CommReduce:
      return "CommReduce";
    case OpPattern::OutEWiseFusable:
      return "OutEWiseFusable";
    case OpPattern::Opaque:
      return "Opaque";
  }
  return "?";
}

void TypeContext::fail(const std::string& msg) const {
  if (node_name.empty()) ember::fail(op_name, ": ", msg);
  ember::fail(op_name, " '", node_name, "': ", msg);
}

const Op* register_op(Op op) {
  auto& ops = registry();
  EMBER_CHECK(!op.name.empty() && !ops.count(op.name), "op '", op.name,
              "' is registered twice (or has no name)");
  EMBER_CHECK(op.type_rel && (op.compute || op.lower), "op '", op.name,
              "' lacks a type relation, or both a compute rule and a lowering");
  auto owned = std::make_unique<Op>(std::move(op));
  Op* ptr = owned.get();
  // Every relation runs behind the schema, and an attribute error from Attrs' typed getters
  // (which know no node) is re-raised naming the op and the node.
  ptr->type_rel = [rel = std::move(ptr->type_rel), ptr](const std::vector<Type>& args, Attrs& attrs,
                                                        const TypeContext& ctx) {
    apply_schema(*ptr, attrs, ctx);
    ReadingAttrs scope(ptr);
    try {
      return rel(args, attrs, ctx);
    } catch (const Error& e) {
      std::string msg = e.what();
      if (msg.rfind(ctx.op_name, 0) == 0) throw;
      ctx.fail(msg);
    }
  };
  // Each rule reads only declared attributes (ops::check_declared, through op_util.h).
  ptr->compute = reading_attrs_of(ptr, std::move(ptr->compute));
  ptr->lower = reading_attrs_of(ptr, std::move(ptr->lower));
  ptr->check_constants = reading_attrs_of(ptr, std::move(ptr->check_constants));
  ptr->two_anchor = reading_attrs_of(ptr, std::move(ptr->two_anchor));
  ops.emplace(ptr->name, std::move(owned));
  return ptr;
}

const Op* get_op(const std::string& name) {
  auto& ops = registry();
  auto it = ops.find(name);
  if (it != ops.end()) return it->second.get();
  // Suggest names within a small edit distance, comparing with and without the "nn."
  // namespace so that "relu" suggests "nn.relu".
  std::vector<std::string> similar;
  std::string bare = bare_op_name(name);
  size_t limit = std::max<size_t>(2, bare.size() / 3);
  for (const auto& [known, op] : ops) {
    size_t d = std::min(edit_distance(name, known), edit_distance(bare, bare_op_name(known)));
    if (d <= limit) similar.push_back(known);
  }
  if (!similar.empty())
    fail("unknown op '", name, "'; did you mean ", fmt::format("{}", fmt::join(similar, ", ")),
         "?");
  fail("unknown op '", name, "'; known ops are: ", fmt::format("{}", fmt::join(list_ops(), ", ")));
}

std::vector<std::string> list_ops() {
  std::vector<std::string> names;
  for (const auto& [name, op] : registry()) names.push_back(name);
  return names;
}

std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                      const TypeContext& ctx) {
  size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    // Align from the right, as NumPy does; missing leading dimensions act as 1.
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      ctx.fail("cannot broadcast shapes " + shape_string(a) + " and " + shape_string(b) +
               ": dimension " + std::to_string(i) + " of the result would be " +
               std::to_string(da) + " vs " + std::to_string(db) +
               " (sizes must be equal or 1); reshape one input");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t normalize_axis(int64_t axis, int64_t ndim, const TypeContext& ctx) {
  if (axis < -ndim || axis >= ndim) {
    if (ndim == 0) ctx.fail("axis " + std::to_string(axis) + " given for a rank-0 tensor");
    ctx.fail("axis " + std::to_string(axis) + " is out of range for a rank-" +
             std::to_string(ndim) + " tensor (valid axes are " + std::to_string(-ndim) + " to " +
             std::to_string(ndim - 1) + ")");
  }
  return axis < 0 ? axis + ndim : axis;
}

}  // namespace ember::ir
