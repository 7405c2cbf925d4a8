// Type relations over run-time dimensions: every op's integer relation, run at a few
// bindings of the symbols and fitted (symbolic.h), so no op needs a symbolic form of its own.
#include <fmt/format.h>

#include "ember/ir/op.h"
#include "ember/support/error.h"

namespace ember::ir {
namespace {

std::vector<Symbol> symbols_in(const std::vector<Type>& args, const Attrs& attrs,
                               const std::string& where) {
  std::vector<Symbol> out;
  for (const Type& t : args)
    for (const TensorType& f : t.fields) out = merge_symbols(out, symbols_of(f.dims, where), where);
  for (auto& [key, dims] : attrs.symbolic())
    out = merge_symbols(out, symbols_of(dims, where), where);
  return out;
}

Type type_at(const Type& t, const Binding& b) {
  Type out = t;
  for (TensorType& f : out.fields) f = f.at(b);
  return out;
}

std::string values_at(const std::vector<Binding>& probes, const std::vector<int64_t>& values) {
  std::vector<std::string> parts;
  for (size_t p = 0; p < probes.size(); ++p)
    parts.push_back(fmt::format("{} at {}", values[p], to_string(probes[p])));
  return fmt::format("{}", fmt::join(parts, "; "));
}

constexpr const char* kForm =
    "; a run-time dimension must be coef * (a product of symbols) + offset. Give the input "
    "a static size for the symbols involved, or rewrite the model so the sizes keep that form";

// The result types at the probes, fitted dimension by dimension.
Type fit_type(const std::vector<Symbol>& syms, const std::vector<Binding>& probes,
              const std::vector<Type>& outs, const TypeContext& ctx) {
  const Type& top = outs[0];
  for (const Type& o : outs)
    if (o.is_tuple != top.is_tuple || o.fields.size() != top.fields.size())
      ctx.fail("its result changes form with the run-time sizes (" + to_string(top) + " at " +
               to_string(probes[0]) + ", " + to_string(o) + " elsewhere in the range)");
  Type result = top;
  for (size_t f = 0; f < top.fields.size(); ++f) {
    std::vector<Dim> dims;
    for (size_t i = 0; i < top.fields[f].shape.size(); ++i) {
      std::vector<int64_t> values;
      for (const Type& o : outs) {
        if (o.fields[f].ndim() != top.fields[f].ndim() || o.fields[f].dtype != top.fields[f].dtype)
          ctx.fail("its result changes rank or type with the run-time sizes");
        values.push_back(o.fields[f].shape[i]);
      }
      Dim d;
      if (!fit_dim(syms, probes, values, &d))
        ctx.fail(
            fmt::format("its result dimension {} is not a run-time dimension Ember can "
                        "carry ({}){}",
                        i, values_at(probes, values), kForm));
      dims.push_back(d);
    }
    result.fields[f] = TensorType::of(dims, top.fields[f].dtype);
  }
  return result;
}

// The normalised attributes at the maximum, with the size lists that vary over the probes
// fitted as run-time dimensions.
Attrs fit_attrs(const std::vector<Symbol>& syms, const std::vector<Binding>& probes,
                const std::vector<Attrs>& attrs, const TypeContext& ctx) {
  Attrs out = attrs[0];
  for (auto& [key, value] : attrs[0].values()) {
    bool varies = false;
    for (const Attrs& a : attrs)
      varies = varies || !(a.values().count(key) && a.values().at(key) == value);
    if (!varies) continue;
    const auto* list = std::get_if<std::vector<int64_t>>(&value);
    if (!list)
      ctx.fail("its attribute " + key +
               " depends on the run-time sizes; Ember takes run-time sizes in lists of sizes "
               "only");
    std::vector<Dim> dims;
    for (size_t i = 0; i < list->size(); ++i) {
      std::vector<int64_t> values;
      for (const Attrs& a : attrs) {
        std::vector<int64_t> v = a.get_ints(key, {});
        if (v.size() != list->size())
          ctx.fail("its attribute " + key + " changes length with the run-time sizes");
        values.push_back(v[i]);
      }
      Dim d;
      if (!fit_dim(syms, probes, values, &d))
        ctx.fail(fmt::format("its attribute {}[{}] is not a run-time size Ember can carry ({}){}",
                             key, i, values_at(probes, values), kForm));
      dims.push_back(d);
    }
    out = out.with_dims(key, dims);
  }
  return out;
}

}  // namespace

Type run_relation(const Op& op, const std::vector<Type>& args, Attrs& attrs,
                  const TypeContext& ctx) {
  const std::string where =
      ctx.node_name.empty() ? ctx.op_name : ctx.op_name + " '" + ctx.node_name + "'";
  const std::vector<Symbol> syms = symbols_in(args, attrs, where);
  if (syms.empty()) return op.type_rel(args, attrs, ctx);
  const std::vector<Binding> probes = probe_bindings(syms);
  std::vector<Type> outs;
  std::vector<Attrs> normalised;
  for (size_t p = 0; p < probes.size(); ++p) {
    std::vector<Type> at;
    for (const Type& t : args) at.push_back(type_at(t, probes[p]));
    Attrs a = attrs.at(probes[p]);
    if (p == 0) {
      outs.push_back(op.type_rel(at, a, ctx));  // the maximum: its errors are the op's own
    } else {
      try {
        outs.push_back(op.type_rel(at, a, ctx));
      } catch (const Error& e) {
        ctx.fail(
            fmt::format("it accepts the largest sizes of the range ({}) but not all of "
                        "it: at {}, {}. Narrow the range or make the dimension static",
                        to_string(syms), to_string(probes[p]), e.what()));
      }
    }
    normalised.push_back(std::move(a));
  }
  Type out = fit_type(syms, probes, outs, ctx);
  attrs = fit_attrs(syms, probes, normalised, ctx);
  return out;
}

}  // namespace ember::ir
