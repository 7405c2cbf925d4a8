// Graph IR bindings. Nodes are immutable and shared: Python holds them by shared_ptr, and
// pybind11 downcasts every returned Expr to its node class (Var, Call, ...). Arguments are
// taken as Python objects and checked here, so a wrong type is an EmberError naming it.
#include <pybind11/stl.h>

#include <memory>
#include <variant>

#include "bindings.h"
#include "ember/ir/graph.h"
#include "ember/ir/op.h"
#include "ember/support/error.h"

namespace py = pybind11;
using namespace py::literals;

namespace ember::python {
namespace {

using namespace ember::ir;

// pybind11 holders cannot be shared_ptr<const T>; nodes are never mutated through these
// non-const pointers (no binding writes a field), so the casts only satisfy the holder type.
using PyExpr = std::shared_ptr<ExprNode>;
PyExpr to_py(const Expr& e) { return std::const_pointer_cast<ExprNode>(e); }
template <class T>
std::shared_ptr<T> to_py_as(const Expr& e) {
  EMBER_CHECK(as<T>(e) != nullptr, "constructor returned another node kind");
  return std::const_pointer_cast<T>(std::static_pointer_cast<const T>(e));
}
std::vector<PyExpr> to_py(const std::vector<Expr>& es) {
  std::vector<PyExpr> out;
  for (const Expr& e : es) out.push_back(to_py(e));
  return out;
}

Expr expr_arg(py::handle value, const std::string& what) {
  if (!py::isinstance<ExprNode>(value))
    fail(what, " must be an ember.ir expression (made by ir.var, ir.const or an op), got ",
         describe(value));
  return value.cast<PyExpr>();
}

bool is_sequence(py::handle value) {
  return py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value);
}

std::vector<Expr> expr_list_arg(py::handle value, const std::string& what) {
  if (!is_sequence(value))
    fail(what, " must be a list of ember.ir expressions, got ", describe(value));
  std::vector<Expr> out;
  for (py::handle item : value)
    out.push_back(expr_arg(item, what + "[" + std::to_string(out.size()) + "]"));
  return out;
}

std::vector<int64_t> ints_arg(py::handle value, const std::string& what) {
  if (!is_sequence(value))
    fail(what, " must be a list or tuple of integers, got ", describe(value));
  std::vector<int64_t> out;
  for (py::handle item : value) out.push_back(int_arg(item, what + " element"));
  return out;
}

// A size to Python: an int when static, else an ir.Dim.
py::object dim_to_py(const Dim& d) {
  return d.is_static() ? py::object(py::int_(d.offset)) : py::cast(d);
}

Dim dim_arg(py::handle value, const std::string& what) {
  if (py::isinstance<Dim>(value)) return value.cast<Dim>();
  return Dim(int_arg(value, what));
}

bool has_dim(py::handle value) {
  if (!is_sequence(value)) return false;
  for (py::handle item : value)
    if (py::isinstance<Dim>(item)) return true;
  return false;
}

std::vector<Dim> dims_arg(py::handle value, const std::string& what) {
  if (!is_sequence(value))
    fail(what, " must be a list or tuple of sizes (ints or ir.Dim), got ", describe(value));
  std::vector<Dim> out;
  for (py::handle item : value) out.push_back(dim_arg(item, what + " element"));
  return out;
}

// A type's sizes: ints, and ir.Dim for those known only at run time.
py::tuple shape_tuple(const TensorType& t) {
  py::tuple out(t.shape.size());
  for (size_t i = 0; i < t.shape.size(); ++i) out[i] = dim_to_py(t.dim(i));
  return out;
}

// Python values to op attributes: bool -> 0/1, int -> int64, float -> double, str, and a
// list or tuple of ints -> ints.
AttrValue attr_value(py::handle value, const std::string& what) {
  if (py::isinstance<py::bool_>(value)) return static_cast<int64_t>(value.cast<bool>());
  if (PyFloat_Check(value.ptr())) return value.cast<double>();
  if (PyIndex_Check(value.ptr())) return int_arg(value, what);
  if (py::isinstance<py::str>(value)) return value.cast<std::string>();
  if (is_sequence(value)) return ints_arg(value, what);
  fail(what, " must be an int, float, bool, str or a list of ints, got ", describe(value));
}

Attrs attrs_arg(py::handle value, const std::string& what) {
  if (value.is_none()) return {};
  if (!py::isinstance<py::dict>(value)) fail(what, " must be a dict, got ", describe(value));
  std::map<std::string, AttrValue> out;
  std::map<std::string, std::vector<Dim>> sizes;  // lists that hold run-time sizes
  for (auto item : value.cast<py::dict>()) {
    std::string key = str_arg(item.first, what + " key");
    if (has_dim(item.second))
      sizes[key] = dims_arg(item.second, what + " '" + key + "'");
    else
      out[key] = attr_value(item.second, what + " '" + key + "'");
  }
  Attrs attrs(std::move(out));
  for (auto& [key, dims] : sizes) attrs = attrs.with_dims(key, dims);
  return attrs;
}

py::dict attrs_dict(const Attrs& attrs) {
  py::dict out;
  for (const auto& [key, value] : attrs.values())
    out[py::str(key)] = std::visit([](const auto& v) -> py::object { return py::cast(v); }, value);
  return out;
}

const TensorType& tensor_type(const ExprNode& e) {
  if (e.type.is_tuple)
    fail(e.name.empty() ? "this expression" : "expression '" + e.name + "'", " has the tuple type ",
         to_string(e.type), "; take one field with ir.TupleGetItem(expr, index) first");
  return e.type.fields.at(0);
}

}  // namespace

// Registered ops: Op (its schema) and list_ops.
static void bind_ops(py::module_& m) {
  py::class_<Op>(m, "Op", "A registered operator (see list_ops).")
      .def_readonly("name", &Op::name)
      .def_readonly("num_inputs", &Op::num_inputs)
      .def_readonly("is_view", &Op::is_view)
      .def_property_readonly("pattern", [](const Op& op) { return op_pattern_name(op.pattern); })
      .def_property_readonly("family", [](const Op& op) { return op_family(op); })
      .def_property_readonly("has_compute", [](const Op& op) { return bool(op.compute); })
      .def_property_readonly("has_lower", [](const Op& op) { return bool(op.lower); })
      .def_property_readonly("has_two_anchor", [](const Op& op) { return bool(op.two_anchor); })
      .def_property_readonly(
          "attrs",
          [](const Op& op) {
            // The declared attributes as (name, kind, default or None, required, doc).
            py::list out;
            for (const AttrSpec& a : op.attrs) {
              py::object dflt = py::none();
              if (a.dflt) dflt = std::visit([](const auto& v) { return py::cast(v); }, *a.dflt);
              std::string kind = a.kind == AttrKind::Int     ? "int"
                                 : a.kind == AttrKind::Float ? "float"
                                 : a.kind == AttrKind::Str   ? "str"
                                                             : "ints";
              out.append(py::make_tuple(a.name, kind, dflt, a.required, a.doc));
            }
            return out;
          },
          "Declared attributes: (name, kind, default or None, required, doc) tuples; kind is "
          "\"int\", \"float\", \"str\" or \"ints\".")
      .def("__repr__", [](const Op& op) { return "Op(" + op.name + ")"; });
  m.def(
      "get_op", [](py::handle name) { return get_op(str_arg(name, "get_op: the op name")); },
      py::return_value_policy::reference);
  m.def("list_ops", &list_ops, "Names of every registered op.");
}

// Run-time sizes: ir.Dim (symbolic.h) with the arithmetic an importer computes sizes with;
// a comparison that the symbols' ranges do not decide is an error, not a guess.
static void bind_dims(py::module_& m) {
  // == is structural (a run-time size never equals a static one); an order the ranges
  // decide is answered, any other is an error.
  auto cmp = [](const Dim& a, py::handle other, const std::string& op) -> bool {
    const Dim b = dim_arg(other, "a size compared with " + to_string(a));
    if (op == "==") return a == b;
    if (op == "!=") return !(a == b);
    if (a == b) return op == "<=" || op == ">=";
    const int64_t alo = a.min(), ahi = a.max(), blo = b.min(), bhi = b.max();
    if (op == "<" && (ahi < blo || alo >= bhi)) return ahi < blo;
    if (op == "<=" && (ahi <= blo || alo > bhi)) return ahi <= blo;
    if (op == ">" && (alo > bhi || ahi <= blo)) return alo > bhi;
    if (op == ">=" && (alo >= bhi || ahi < blo)) return alo >= bhi;
    fail("whether ", to_string(a), " ", op, " ", to_string(b),
         " depends on sizes known only at run time (",
         to_string(merge_symbols(a.symbols, b.symbols, "")), ")");
  };
  py::class_<Dim>(m, "Dim", "A size known only at run time: coef * (product of symbols) + offset.")
      .def_readonly("coef", &Dim::coef)
      .def_readonly("offset", &Dim::offset)
      .def_property_readonly("symbols",
                             [](const Dim& d) {
                               std::vector<std::tuple<std::string, int64_t, int64_t>> out;
                               for (const Symbol& s : d.symbols)
                                 out.emplace_back(s->name, s->min, s->max);
                               return out;
                             })
      .def_property_readonly("max", &Dim::max)
      .def_property_readonly("min", &Dim::min)
      .def("__mul__",
           [](const Dim& a, py::handle b) { return dim_to_py(a * dim_arg(b, "a size")); })
      .def("__rmul__",
           [](const Dim& a, py::handle b) { return dim_to_py(dim_arg(b, "a size") * a); })
      .def("__add__",
           [](const Dim& a, py::handle b) { return dim_to_py(a + dim_arg(b, "a size")); })
      .def("__radd__",
           [](const Dim& a, py::handle b) { return dim_to_py(dim_arg(b, "a size") + a); })
      .def("__sub__",
           [](const Dim& a, py::handle b) { return dim_to_py(a - dim_arg(b, "a size")); })
      .def("__rsub__",
           [](const Dim& a, py::handle b) { return dim_to_py(dim_arg(b, "a size") - a); })
      .def("__floordiv__", [](const Dim& a, int64_t k) { return dim_to_py(floordiv(a, k)); })
      .def("__eq__", [cmp](const Dim& a, py::handle b) { return cmp(a, b, "=="); })
      .def("__ne__", [cmp](const Dim& a, py::handle b) { return cmp(a, b, "!="); })
      .def("__lt__", [cmp](const Dim& a, py::handle b) { return cmp(a, b, "<"); })
      .def("__le__", [cmp](const Dim& a, py::handle b) { return cmp(a, b, "<="); })
      .def("__gt__", [cmp](const Dim& a, py::handle b) { return cmp(a, b, ">"); })
      .def("__ge__", [cmp](const Dim& a, py::handle b) { return cmp(a, b, ">="); })
      .def("__hash__", [](const Dim& d) { return py::hash(py::str(to_string(d))); })
      .def("__index__",
           [](const Dim& d) -> int64_t {
             fail("the size ", to_string(d), " is known only at run time (", to_string(d.symbols),
                  "); this step needs a static size");
           })
      .def("__str__", [](const Dim& d) { return to_string(d); })
      .def("__repr__", [](const Dim& d) { return "Dim(" + to_string(d) + ")"; });
  m.def(
      "symbol",
      [](py::handle name, int64_t min, int64_t max) {
        return Dim::of(make_symbol(str_arg(name, "ir.symbol: name"), min, max));
      },
      "name"_a, "min"_a, "max"_a,
      "A size known only at run time, in [min, max]: use it in ir.var's shape.");
}

// TensorType and Type.
static void bind_types(py::module_& m) {
  py::class_<TensorType>(m, "TensorType")
      .def_property_readonly("shape", [](const TensorType& t) { return shape_tuple(t); })
      .def_property_readonly("max_shape", [](const TensorType& t) { return t.shape; })
      .def_property_readonly("dtype", [](const TensorType& t) { return dtype_name(t.dtype); })
      .def("__eq__", [](const TensorType& a, const TensorType& b) { return a == b; })
      .def("__str__", [](const TensorType& t) { return to_string(t); })
      .def("__repr__", [](const TensorType& t) { return "TensorType(" + to_string(t) + ")"; });
  py::class_<Type>(m, "Type")
      .def_readonly("fields", &Type::fields)
      .def_readonly("is_tuple", &Type::is_tuple)
      .def("__eq__", [](const Type& a, const Type& b) { return a == b; })
      .def("__str__", [](const Type& t) { return to_string(t); })
      .def("__repr__", [](const Type& t) { return "Type(" + to_string(t) + ")"; });
}

// The graph IR nodes.
static void bind_nodes(py::module_& m) {
  py::class_<ExprNode, PyExpr>(m, "Expr", "A graph IR node (immutable).")
      .def_property_readonly("type", [](const ExprNode& e) { return e.type; })
      .def_property_readonly("name", [](const ExprNode& e) { return e.name; })
      .def_property_readonly("shape", [](const ExprNode& e) { return shape_tuple(tensor_type(e)); })
      .def_property_readonly("dtype",
                             [](const ExprNode& e) { return dtype_name(tensor_type(e).dtype); })
      .def("same_as", [](const PyExpr& a, const PyExpr& b) { return a == b; })
      .def("__str__", [](const PyExpr& e) { return to_string(Expr(e)); })
      .def("__repr__", [](const PyExpr& e) { return to_string(Expr(e)); });

  py::class_<VarNode, ExprNode, std::shared_ptr<VarNode>>(m, "Var");
  py::class_<ConstantNode, ExprNode, std::shared_ptr<ConstantNode>>(m, "Constant")
      // A copy, so that writing through NumPy cannot change an immutable node.
      .def_property_readonly("value", [](const ConstantNode& c) { return c.value.clone(); });
  py::class_<CallNode, ExprNode, std::shared_ptr<CallNode>>(m, "Call")
      .def_property_readonly(
          "op", [](const CallNode& c) { return c.op; }, py::return_value_policy::reference)
      .def_property_readonly("args", [](const CallNode& c) { return to_py(c.args); })
      .def_property_readonly("attrs", [](const CallNode& c) { return attrs_dict(c.attrs); });
  py::class_<TupleNode, ExprNode, std::shared_ptr<TupleNode>>(m, "Tuple")
      .def(py::init([](py::handle fields, py::handle name) {
             return to_py_as<TupleNode>(
                 tuple(expr_list_arg(fields, "ir.Tuple: fields"), str_arg(name, "ir.Tuple: name")));
           }),
           "fields"_a, "name"_a = "")
      .def_property_readonly("fields", [](const TupleNode& t) { return to_py(t.fields); })
      .def("__len__", [](const TupleNode& t) { return t.fields.size(); });
  py::class_<TupleGetItemNode, ExprNode, std::shared_ptr<TupleGetItemNode>>(m, "TupleGetItem")
      .def(py::init([](py::handle tup, py::handle index, py::handle name) {
             return to_py_as<TupleGetItemNode>(tuple_get_item(
                 expr_arg(tup, "ir.TupleGetItem: tuple"), int_arg(index, "ir.TupleGetItem: index"),
                 str_arg(name, "ir.TupleGetItem: name")));
           }),
           "tuple"_a, "index"_a, "name"_a = "")
      .def_property_readonly("tuple", [](const TupleGetItemNode& t) { return to_py(t.tuple); })
      .def_readonly("index", &TupleGetItemNode::index);
  py::class_<FunctionNode, ExprNode, std::shared_ptr<FunctionNode>>(m, "Function")
      .def(py::init([](py::handle params, py::handle body, py::handle name) {
             Function f =
                 function(expr_list_arg(params, "ir.Function: params"),
                          expr_arg(body, "ir.Function: body"), str_arg(name, "ir.Function: name"));
             return std::const_pointer_cast<FunctionNode>(f);
           }),
           "params"_a, "body"_a, "name"_a = "main")
      .def_property_readonly("params", [](const FunctionNode& f) { return to_py(f.params); })
      .def_property_readonly("body", [](const FunctionNode& f) { return to_py(f.body); });
}

// Graph builders and helpers (var, const, call, ..., structural_equal).
static void bind_graph_functions(py::module_& m) {
  m.def(
      "var",
      [](py::handle name, py::handle shape, py::handle dtype) {
        std::string n = str_arg(name, "ir.var: name");
        TensorType type =
            TensorType::of(dims_arg(shape, "ir.var('" + n + "'): shape"),
                           dtype_from_name(str_arg(dtype, "ir.var('" + n + "'): dtype")));
        return to_py(var(n, std::move(type)));
      },
      "name"_a, "shape"_a, "dtype"_a = "float32");
  m.def(
      "const",
      [](py::handle value, py::handle name) {
        std::string n = str_arg(name, "ir.const: name");
        std::string what = n.empty() ? "ir.const: value" : "ir.const('" + n + "'): value";
        return to_py(constant(tensor_copy(value, what), n));
      },
      "value"_a, "name"_a = "");
  m.def(
      "call",
      [](py::handle op_name, py::handle args, py::handle attrs, py::handle name) {
        std::string op = str_arg(op_name, "call: the op name");
        return to_py(call(op, expr_list_arg(args, op + ": args"), attrs_arg(attrs, op + ": attrs"),
                          str_arg(name, op + ": name")));
      },
      "op_name"_a, "args"_a, "attrs"_a = py::none(), "name"_a = "");
  m.def("structural_equal", [](py::handle a, py::handle b) {
    return structural_equal(expr_arg(a, "structural_equal: a"), expr_arg(b, "structural_equal: b"));
  });
}

void bind_ir(py::module_& m) {
  bind_ops(m);
  bind_dims(m);
  bind_types(m);
  bind_nodes(m);
  bind_graph_functions(m);
}

}  // namespace ember::python
