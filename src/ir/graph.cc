#include "ember/ir/graph.h"

#include <fmt/format.h>

#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "ember/ir/op.h"
#include "ember/support/checked_math.h"
#include "ember/support/error.h"

namespace ember::ir {

// ------------------------------------------------------------------------------------ types

const TensorType& Type::tensor() const {
  if (is_tuple || fields.size() != 1)
    fail("expected a tensor but got the tuple ", to_string(*this),
         "; select one field with TupleGetItem");
  return fields[0];
}

TensorType TensorType::of(std::vector<Dim> dims, DType dtype) {
  TensorType t;
  t.dtype = dtype;
  bool any = false;
  for (const Dim& d : dims) {
    t.shape.push_back(d.max());
    any = any || !d.is_static();
  }
  if (any) t.dims = std::move(dims);
  return t;
}

TensorType TensorType::at(const Binding& b) const {
  TensorType t{shape, dtype, {}};
  for (size_t i = 0; i < dims.size(); ++i) t.shape[i] = dims[i].at(b);
  return t;
}

std::string to_string(const TensorType& t) {
  if (!t.symbolic()) return fmt::format("{}[{}]", dtype_name(t.dtype), fmt::join(t.shape, ", "));
  std::vector<std::string> dims;
  for (const Dim& d : t.dims) dims.push_back(to_string(d));
  return fmt::format("{}[{}]", dtype_name(t.dtype), fmt::join(dims, ", "));
}

std::string to_string(const Type& t) {
  if (!t.is_tuple) return t.fields.empty() ? "?" : to_string(t.fields[0]);
  std::vector<std::string> fields;
  for (auto& f : t.fields) fields.push_back(to_string(f));
  return fmt::format("({})", fmt::join(fields, ", "));
}

// ------------------------------------------------------------------------------------ attrs

namespace {
template <class T>
const T* attr_as(const std::map<std::string, AttrValue>& m, const std::string& key) {
  auto it = m.find(key);
  if (it == m.end()) return nullptr;
  return std::get_if<T>(&it->second);
}
}  // namespace

int64_t Attrs::get_int(const std::string& key, int64_t dflt) const {
  if (auto* v = attr_as<int64_t>(values_, key)) return *v;
  if (auto* d = attr_as<double>(values_, key)) return static_cast<int64_t>(*d);
  if (has(key)) fail("attribute '", key, "' must be an integer");
  return dflt;
}

double Attrs::get_float(const std::string& key, double dflt) const {
  if (auto* v = attr_as<double>(values_, key)) return *v;
  if (auto* i = attr_as<int64_t>(values_, key)) return static_cast<double>(*i);
  if (has(key)) fail("attribute '", key, "' must be a number");
  return dflt;
}

std::string Attrs::get_str(const std::string& key, const std::string& dflt) const {
  if (auto* v = attr_as<std::string>(values_, key)) return *v;
  if (has(key)) fail("attribute '", key, "' must be a string");
  return dflt;
}

std::vector<int64_t> Attrs::get_ints(const std::string& key, std::vector<int64_t> dflt) const {
  if (auto* v = attr_as<std::vector<int64_t>>(values_, key)) return *v;
  if (auto* i = attr_as<int64_t>(values_, key)) return {*i};
  if (has(key)) fail("attribute '", key, "' must be a list of integers");
  return dflt;
}

Attrs Attrs::with(const std::string& key, AttrValue v) const {
  Attrs a = *this;
  a.values_[key] = std::move(v);
  a.symbolic_.erase(key);
  return a;
}

Attrs Attrs::with_dims(const std::string& key, const std::vector<Dim>& dims) const {
  std::vector<int64_t> top;
  bool any = false;
  for (const Dim& d : dims) {
    top.push_back(d.max());
    any = any || !d.is_static();
  }
  Attrs a = with(key, top);
  if (any) a.symbolic_[key] = dims;
  return a;
}

std::vector<Dim> Attrs::dims(const std::string& key) const {
  auto it = symbolic_.find(key);
  if (it != symbolic_.end()) return it->second;
  std::vector<int64_t> v = get_ints(key, {});
  return std::vector<Dim>(v.begin(), v.end());
}

Attrs Attrs::at(const Binding& b) const {
  Attrs a = *this;
  a.symbolic_.clear();
  for (auto& [key, dims] : symbolic_) {
    std::vector<int64_t> v;
    for (const Dim& d : dims) v.push_back(d.at(b));
    a.values_[key] = v;
  }
  return a;
}

std::string to_string(const Attrs& a) {
  std::vector<std::string> items;
  for (auto& [k, v] : a.values()) {
    std::ostringstream os;  // a double prints as iostreams print it (6 significant digits)
    os << k << "=";
    if (auto* i = std::get_if<int64_t>(&v))
      os << *i;
    else if (auto* d = std::get_if<double>(&v))
      os << *d;
    else if (auto* s = std::get_if<std::string>(&v))
      os << '"' << *s << '"';
    else if (a.symbolic().count(k)) {
      std::vector<std::string> dims;
      for (const Dim& d : a.symbolic().at(k)) dims.push_back(to_string(d));
      os << fmt::format("[{}]", fmt::join(dims, ", "));
    } else if (auto* l = std::get_if<std::vector<int64_t>>(&v))
      os << fmt::format("[{}]", fmt::join(*l, ", "));
    items.push_back(os.str());
  }
  return fmt::format("{}", fmt::join(items, ", "));
}

// ------------------------------------------------------------------------------------ nodes

std::string join_names(const std::vector<std::string>& names) {
  std::vector<std::string> parts;
  std::set<std::string> seen;
  for (const std::string& name : names) {
    for (size_t start = 0; start < name.size();) {
      size_t end = name.find(" + ", start);
      std::string part = name.substr(start, end == std::string::npos ? end : end - start);
      if (!part.empty() && seen.insert(part).second) parts.push_back(part);
      start = end == std::string::npos ? name.size() : end + 3;
    }
  }
  return fmt::format("{}", fmt::join(parts, " + "));
}

ConstantNode::ConstantNode(runtime::NDArray v, std::string n)
    : ExprNode(kKind, TensorType{v.shape(), v.dtype()}, std::move(n)), value(std::move(v)) {}

Expr var(const std::string& name, TensorType type) {
  if (name.empty()) fail("an input needs a name");
  for (int64_t d : type.shape)
    if (d < 0) fail("input '", name, "' has a negative dimension in ", to_string(type));
  if (type.symbolic()) {
    symbols_of(type.dims, "input '" + name + "'");
    bool ok = type.dims.size() == type.shape.size();
    for (size_t i = 0; ok && i < type.dims.size(); ++i)
      ok = type.dims[i].max() == type.shape[i] && type.dims[i].min() >= 0;
    if (!ok)
      fail("input '", name, "': its run-time dimensions ", to_string(type),
           " do not match its sizes; make its type with TensorType::of");
  }
  checked_nbytes(type.shape, dtype_bytes(type.dtype), "input '" + name + "'");
  return std::make_shared<VarNode>(name, std::move(type));
}

Expr constant(runtime::NDArray value, const std::string& name) {
  return std::make_shared<ConstantNode>(std::move(value), name);
}

namespace {
std::string describe(const std::string& op, const std::string& name) {
  return name.empty() ? op : op + " '" + name + "'";
}
}  // namespace

Expr call(const Op* op, std::vector<Expr> args, Attrs attrs, const std::string& name) {
  EMBER_CHECK(op != nullptr, "call without an op");
  if (op->num_inputs >= 0 && static_cast<int>(args.size()) != op->num_inputs)
    fail(describe(op->name, name), " takes ", op->num_inputs, " inputs but was given ",
         args.size());
  std::vector<Type> types;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i]) fail(describe(op->name, name), ": input ", i, " is missing (None)");
    types.push_back(args[i]->type);
  }
  TypeContext ctx{op->name, name};
  Type out = run_relation(*op, types, attrs, ctx);
  // Every result must be a size memory can have: no negative dimension, and an element and
  // byte count that fit in 64 bits (an op's arithmetic on huge attributes may overflow).
  for (const TensorType& t : out.fields) {
    for (int64_t d : t.shape)
      if (d < 0)
        ctx.fail("the result " + to_string(t) +
                 " has a negative dimension; the input sizes or attributes (padding, "
                 "strides, ...) are out of range");
    int64_t bytes;
    if (mul_overflows(checked_numel(t.shape, describe(op->name, name)), dtype_bytes(t.dtype),
                      &bytes))
      ctx.fail("the result " + to_string(t) + " is larger than 2^63 bytes; check the sizes");
  }
  if (op->check_constants) op->check_constants(args, attrs, ctx);
  return std::make_shared<CallNode>(op, std::move(args), std::move(attrs), std::move(out), name);
}

Expr call(const std::string& op_name, std::vector<Expr> args, Attrs attrs,
          const std::string& name) {
  return call(get_op(op_name), std::move(args), std::move(attrs), name);
}

Expr call_function(Function fn, std::vector<Expr> args, const std::string& name) {
  EMBER_CHECK(fn != nullptr, "call of a null function");
  EMBER_CHECK(fn->params.size() == args.size(), "function call with ", args.size(),
              " arguments for ", fn->params.size(), " parameters");
  for (size_t i = 0; i < args.size(); ++i)
    EMBER_CHECK(args[i] && args[i]->type == fn->params[i]->type, "argument ", i, " of a call of ",
                fn->name, " has the wrong type");
  Type t = fn->type;
  return std::make_shared<CallNode>(std::move(fn), std::move(args), std::move(t), name);
}

Expr tuple(std::vector<Expr> fields, const std::string& name) {
  std::vector<TensorType> types;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (!fields[i]) fail("tuple field ", i, " is missing (None)");
    if (fields[i]->type.is_tuple)
      fail("tuple field ", i, " is itself a tuple; tuples do not nest in Ember");
    types.push_back(fields[i]->type.tensor());
  }
  return std::make_shared<TupleNode>(std::move(fields), Type::tuple(std::move(types)), name);
}

Expr tuple_get_item(Expr tup, int64_t index, const std::string& name) {
  if (!tup) fail("TupleGetItem of a missing (None) tuple");
  if (!tup->type.is_tuple)
    fail("TupleGetItem ", index, " of a non-tuple of type ", to_string(tup->type));
  int64_t n = static_cast<int64_t>(tup->type.fields.size());
  if (index < 0 || index >= n)
    fail("TupleGetItem index ", index, " is out of range for a tuple of ", n, " fields");
  Type t = tup->type.fields[index];
  return std::make_shared<TupleGetItemNode>(std::move(tup), index, std::move(t), name);
}

std::vector<Expr> post_order(const Expr& root) {
  std::vector<Expr> order;
  std::set<const ExprNode*> seen;
  // Iterative DFS: models can be thousands of nodes deep.
  std::vector<std::pair<Expr, size_t>> stack{{root, 0}};
  auto children = [](const Expr& e) -> std::vector<Expr> {
    if (e->kind == NodeKind::Function) return {static_cast<const FunctionNode*>(e.get())->body};
    return inputs_of(e);
  };
  if (!root) return order;
  seen.insert(root.get());
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    auto kids = children(node);
    if (next < kids.size()) {
      Expr child = kids[next++];
      if (seen.insert(child.get()).second) stack.emplace_back(child, 0);
      continue;
    }
    order.push_back(node);
    stack.pop_back();
  }
  return order;
}

std::vector<Expr> inputs_of(const Expr& e) {
  switch (e->kind) {
    case NodeKind::Call:
      return static_cast<const CallNode*>(e.get())->args;
    case NodeKind::Tuple:
      return static_cast<const TupleNode*>(e.get())->fields;
    case NodeKind::TupleGetItem:
      return {static_cast<const TupleGetItemNode*>(e.get())->tuple};
    default:
      return {};
  }
}

std::map<const ExprNode*, int> use_counts(const Function& f) {
  std::map<const ExprNode*, int> uses{{f->body.get(), 1}};
  for (auto& e : post_order(f->body))
    for (auto& x : inputs_of(e)) ++uses[x.get()];
  return uses;
}

std::map<const ExprNode*, std::vector<Expr>> consumers(const Function& f) {
  std::map<const ExprNode*, std::vector<Expr>> out;
  for (auto& e : post_order(f->body))
    for (auto& x : inputs_of(e)) out[x.get()].push_back(e);
  return out;
}

Expr rewrite(const Expr& root, const RewriteFn& fn) {
  std::map<const ExprNode*, Expr> done;
  for (auto& e : post_order(root)) {
    std::vector<Expr> old_in = inputs_of(e), new_in;
    bool changed = false;
    for (auto& x : old_in) {
      new_in.push_back(done.at(x.get()));
      changed |= new_in.back() != x;
    }
    Expr r = fn(e, new_in);
    if (!r && changed) {
      switch (e->kind) {
        case NodeKind::Call: {
          auto* c = static_cast<const CallNode*>(e.get());
          r = c->fn ? call_function(c->fn, new_in, c->name)
                    : call(c->op, new_in, c->attrs, c->name);
          break;
        }
        case NodeKind::Tuple:
          r = tuple(new_in, e->name);
          break;
        case NodeKind::TupleGetItem:
          r = tuple_get_item(new_in[0], static_cast<const TupleGetItemNode*>(e.get())->index,
                             e->name);
          break;
        default:
          break;
      }
    }
    done[e.get()] = r ? r : e;
  }
  return done.at(root.get());
}

Expr with_inputs(const Expr& node, const std::vector<Expr>& new_inputs) {
  auto* c = as<CallNode>(node);
  EMBER_CHECK(c && c->args.size() == new_inputs.size(), "with_inputs of a non-call or a call of ",
              "another arity");
  for (size_t k = 0; k < new_inputs.size(); ++k)
    if (new_inputs[k] != c->args[k]) return call(c->op, new_inputs, c->attrs, c->name);
  return node;
}

Function rewrite(const Function& f, const RewriteFn& fn) {
  Expr body = rewrite(f->body, fn);
  if (body == f->body) return f;
  std::vector<Expr> params;
  std::set<const ExprNode*> used;
  for (auto& e : post_order(body)) used.insert(e.get());
  // Inputs that the rewrite replaced (bound to constants) drop out of the signature.
  for (auto& p : f->params)
    if (used.count(p.get()) || fn(p, {}) == nullptr) params.push_back(p);
  return function(params, body, f->name);
}

std::vector<Symbol> function_symbols(const Function& f) {
  std::vector<Symbol> out;
  for (auto& p : f->params)
    out = merge_symbols(out, symbols_of(p->type.tensor().dims, f->name), f->name);
  for (auto& e : post_order(f->body))
    for (const TensorType& t : e->type.fields)
      out = merge_symbols(out, symbols_of(t.dims, f->name), f->name);
  return out;
}

namespace {

// `f` rebuilt with its parameters' types mapped by `type` and its calls' attributes by
// `attrs` (the relations then type every other node), nested functions too.
Function map_sizes(const Function& f, const std::function<TensorType(const TensorType&)>& type,
                   const std::function<Attrs(const Attrs&)>& attrs) {
  std::map<const ExprNode*, Expr> vars;
  std::vector<Expr> params;
  for (auto& p : f->params) {
    params.push_back(var(p->name, type(p->type.tensor())));
    vars[p.get()] = params.back();
  }
  Expr body = rewrite(f->body, [&](const Expr& e, const std::vector<Expr>& in) -> Expr {
    if (e->kind == NodeKind::Var) return vars.count(e.get()) ? vars.at(e.get()) : nullptr;
    auto* c = as<CallNode>(e);
    if (!c) return nullptr;
    if (c->fn) return call_function(map_sizes(c->fn, type, attrs), in, c->name);
    return call(c->op, in, attrs(c->attrs), c->name);
  });
  return function(params, body, f->name);
}

}  // namespace

Function bind_symbols(const Function& f, const Binding& b) {
  return map_sizes(
      f, [&](const TensorType& t) { return t.at(b); }, [&](const Attrs& a) { return a.at(b); });
}

Function narrow_symbols(const Function& f, const Binding& maxima) {
  std::map<std::string, Symbol> narrowed;
  for (const Symbol& s : function_symbols(f))
    if (auto it = maxima.find(s->name); it != maxima.end() && it->second < s->max)
      narrowed[s->name] = make_symbol(s->name, s->min, std::max(s->min, it->second));
  if (narrowed.empty()) return f;
  auto dims = [&](std::vector<Dim> ds) {
    for (Dim& d : ds)
      for (Symbol& s : d.symbols)
        if (narrowed.count(s->name)) s = narrowed.at(s->name);
    return ds;
  };
  auto type = [&](const TensorType& t) {
    return t.symbolic() ? TensorType::of(dims(t.dims), t.dtype) : t;
  };
  auto attrs = [&](const Attrs& a) {
    Attrs out = a;
    for (auto& [key, ds] : a.symbolic()) out = out.with_dims(key, dims(ds));
    return out;
  };
  return map_sizes(f, type, attrs);
}

Function function(std::vector<Expr> params, Expr body, const std::string& name) {
  if (!body) fail("function '", name, "' has no body");
  std::set<const ExprNode*> param_set;
  std::set<std::string> names;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i] || params[i]->kind != NodeKind::Var)
      fail("function '", name, "': parameter ", i, " is not an input variable (ir.var)");
    param_set.insert(params[i].get());
    if (!names.insert(params[i]->name).second)
      fail("function '", name, "': two inputs are both named '", params[i]->name,
           "'; give each input a unique name");
  }
  for (auto& e : post_order(body)) {
    if (e->kind == NodeKind::Var && !param_set.count(e.get()))
      fail("function '", name, "' uses input '", e->name,
           "' that is not in its parameter list; add it to the parameters");
  }
  return std::make_shared<FunctionNode>(std::move(params), std::move(body), name);
}

void infer_types(const Function& f) {
  for (auto& e : post_order(f->body)) {
    Type expected;
    switch (e->kind) {
      case NodeKind::Call: {
        auto* c = static_cast<const CallNode*>(e.get());
        if (c->fn) {
          infer_types(c->fn);
          expected = c->fn->type;
          break;
        }
        std::vector<Type> types;
        for (auto& a : c->args) types.push_back(a->type);
        Attrs attrs = c->attrs;
        TypeContext ctx{c->op->name, c->name};
        expected = run_relation(*c->op, types, attrs, ctx);
        break;
      }
      case NodeKind::Tuple: {
        std::vector<TensorType> types;
        for (auto& x : static_cast<const TupleNode*>(e.get())->fields)
          types.push_back(x->type.tensor());
        expected = Type::tuple(types);
        break;
      }
      case NodeKind::TupleGetItem: {
        auto* g = static_cast<const TupleGetItemNode*>(e.get());
        expected = g->tuple->type.fields.at(g->index);
        break;
      }
      default:
        continue;
    }
    EMBER_CHECK(expected == e->type, "node ", e->name, " has type ", to_string(e->type),
                " but its inputs give ", to_string(expected));
  }
}

// ----------------------------------------------------------------------- structural equality

namespace {

bool tensor_equal(const runtime::NDArray& a, const runtime::NDArray& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         (a.data() == b.data() || std::memcmp(a.data(), b.data(), a.nbytes()) == 0);
}

// Compares two graphs node pair by node pair with an explicit stack, not recursion: graphs
// can be tens of thousands of nodes deep (a recursive walk overflowed the stack). Each pair
// is compared once: a DAG shares nodes (a residual block reads its input twice), and
// following every path through it again would be exponential in the number of diamonds.
// The graphs are equal when every reachable pair matches on its own (same kind, type, op,
// attributes, constant value; Vars by the parameter position they were mapped from).
class EqualChecker {
 public:
  bool equal(const Expr& a, const Expr& b) {
    push(a, b);
    while (!todo_.empty()) {
      auto [x, y] = todo_.back();
      todo_.pop_back();
      if (!match(x, y)) return false;
    }
    return true;
  }

 private:
  std::map<const ExprNode*, const ExprNode*> vars_;  // a's params -> b's params
  std::set<std::pair<const ExprNode*, const ExprNode*>> seen_;
  std::vector<std::pair<const ExprNode*, const ExprNode*>> todo_;

  void push(const Expr& a, const Expr& b) {
    if (seen_.insert({a.get(), b.get()}).second) todo_.emplace_back(a.get(), b.get());
  }
  bool push_all(const std::vector<Expr>& a, const std::vector<Expr>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) push(a[i], b[i]);
    return true;
  }

  // Compares a and b themselves and queues their inputs: a Function's parameters are mapped
  // before its body is queued, so its Vars compare by position.
  bool match(const ExprNode* a, const ExprNode* b) {
    if (a == b) return true;
    if (!a || !b || a->kind != b->kind || !(a->type == b->type)) return false;
    switch (a->kind) {
      case NodeKind::Var: {
        auto it = vars_.find(a);
        return it != vars_.end() && it->second == b;
      }
      case NodeKind::Constant:
        return tensor_equal(static_cast<const ConstantNode*>(a)->value,
                            static_cast<const ConstantNode*>(b)->value);
      case NodeKind::Call: {
        auto *x = static_cast<const CallNode*>(a), *y = static_cast<const CallNode*>(b);
        if (!x->fn != !y->fn) return false;
        if (x->fn) push(x->fn, y->fn);
        return (x->fn || (x->op == y->op && x->attrs == y->attrs)) && push_all(x->args, y->args);
      }
      case NodeKind::Tuple:
        return push_all(static_cast<const TupleNode*>(a)->fields,
                        static_cast<const TupleNode*>(b)->fields);
      case NodeKind::TupleGetItem: {
        auto *x = static_cast<const TupleGetItemNode*>(a),
             *y = static_cast<const TupleGetItemNode*>(b);
        if (x->index != y->index) return false;
        push(x->tuple, y->tuple);
        return true;
      }
      case NodeKind::Function: {
        auto *x = static_cast<const FunctionNode*>(a), *y = static_cast<const FunctionNode*>(b);
        if (x->params.size() != y->params.size()) return false;
        for (size_t i = 0; i < x->params.size(); ++i) {
          if (!(x->params[i]->type == y->params[i]->type)) return false;
          vars_[x->params[i].get()] = y->params[i].get();
        }
        push(x->body, y->body);
        return true;
      }
    }
    return false;
  }
};

}  // namespace

bool structural_equal(const Expr& a, const Expr& b) { return EqualChecker().equal(a, b); }

// ---------------------------------------------------------------------------------- printer

std::string to_string(const Expr& root) {
  std::ostringstream os;
  std::map<const ExprNode*, std::string> ids;
  int counter = 0, consts = 0;
  auto ref = [&](const Expr& e) { return ids.at(e.get()); };
  auto refs = [&](const std::vector<Expr>& es) {
    std::vector<std::string> out;
    for (auto& e : es) out.push_back(ref(e));
    return fmt::format("{}", fmt::join(out, ", "));
  };
  auto comment = [](const Expr& e) { return e->name.empty() ? "" : " /* " + e->name + " */"; };
  const FunctionNode* fn = root && root->kind == NodeKind::Function
                               ? static_cast<const FunctionNode*>(root.get())
                               : nullptr;
  if (fn) {
    std::vector<std::string> params;
    for (auto& p : fn->params) {
      ids[p.get()] = "%" + p->name;
      params.push_back(fmt::format("%{}: {}", p->name, to_string(p->type)));
    }
    os << fmt::format("fn ({}) -> {} {{\n", fmt::join(params, ", "), to_string(fn->type));
  }
  Expr body = fn ? fn->body : root;
  for (auto& e : post_order(body)) {
    switch (e->kind) {
      case NodeKind::Var:
        ids[e.get()] = "%" + e->name;
        continue;
      case NodeKind::Constant: {
        std::string id = "meta[" + std::to_string(consts++) + "]";
        ids[e.get()] = e->name.empty() ? id : id + "(" + e->name + ")";
        continue;
      }
      default:
        break;
    }
    std::string id = "%" + std::to_string(counter++);
    os << "  " << id << " = ";
    if (e->kind == NodeKind::Call && static_cast<const CallNode*>(e.get())->fn) {
      auto* c = static_cast<const CallNode*>(e.get());
      // A fused group: its primitive function, indented, then the call.
      std::string inner = to_string(c->fn), indented;
      for (char ch : inner) {
        indented += ch;
        if (ch == '\n') indented += "    ";
      }
      while (!indented.empty() && indented.back() == ' ') indented.pop_back();
      if (!indented.empty() && indented.back() == '\n') indented.pop_back();
      os << "primitive " << indented << "(" << refs(c->args) << ")";
    } else if (e->kind == NodeKind::Call) {
      auto* c = static_cast<const CallNode*>(e.get());
      os << c->op->name << "(" << refs(c->args);
      std::string attrs = to_string(c->attrs);
      if (!attrs.empty()) os << (c->args.empty() ? "" : ", ") << attrs;
      os << ")";
    } else if (e->kind == NodeKind::Tuple) {
      auto* t = static_cast<const TupleNode*>(e.get());
      os << "(" << refs(t->fields) << ")";
    } else if (e->kind == NodeKind::TupleGetItem) {
      auto* g = static_cast<const TupleGetItemNode*>(e.get());
      os << ref(g->tuple) << "." << g->index;
    }
    os << " : " << to_string(e->type) << comment(e) << "\n";
    ids[e.get()] = id;
  }
  if (fn) os << "  " << ref(fn->body) << "\n}\n";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Expr& e) { return os << to_string(e); }

}  // namespace ember::ir
