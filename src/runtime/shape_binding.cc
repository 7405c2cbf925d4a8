// Run-time shapes in the executor (shape_binding.h). The graph is checked once, so that a
// run's arithmetic needs no checks: every dimension with symbols has coef >= 1 and fits in
// 64 bits at the symbols' maxima, hence at every binding in range.
#include "shape_binding.h"

#include <algorithm>
#include <set>

#include "ember/support/checked_math.h"
#include "ember/support/error.h"

namespace ember::runtime {

namespace {

// The graph came from the compiler or a model file: a defect in it is the model's.
template <class... Args>
[[noreturn]] void bad_graph(Args&&... args) {
  fail("the model's graph is inconsistent: ", std::forward<Args>(args)..., "; rebuild the model");
}

// d's value at `values`, without checks: the graph's check bounds it (see the top).
int64_t eval(const ExecGraph::Dim& d, const std::vector<int64_t>& values) {
  if (d.symbols.empty()) return d.offset;
  int64_t product = d.coef;
  for (int s : d.symbols) product *= values[s];
  return product + d.offset;
}

// The same with every step checked, for the graph's check.
int64_t eval_checked(const ExecGraph::Dim& d, const std::vector<int64_t>& values,
                     const std::string& what) {
  if (d.symbols.empty()) return d.offset;
  int64_t product = d.coef;
  for (int s : d.symbols) product = checked_mul(product, values[s], what);
  return checked_add(product, d.offset, what);
}

std::vector<int64_t> symbol_values(const ExecGraph& g, bool max) {
  std::vector<int64_t> out;
  for (const ExecGraph::Symbol& s : g.symbols) out.push_back(max ? s.max : s.min);
  return out;
}

}  // namespace

ShapeBinding::ShapeBinding(const ExecGraph& g) : g_(g) {
  check_symbols();
  for (const ExecGraph::Value& v : g_.values)
    varies_.push_back(std::any_of(v.dims.begin(), v.dims.end(),
                                  [](const ExecGraph::Dim& d) { return !d.symbols.empty(); }));
  for (size_t v = 0; v < g_.values.size(); ++v) check_dims(static_cast<int>(v));
  check_params_and_views();
  check_kernels();
  find_binders();
}

void ShapeBinding::check_symbols() const {
  std::set<std::string> names;
  for (const ExecGraph::Symbol& s : g_.symbols) {
    if (s.name.empty()) bad_graph("a symbol has no name");
    if (!names.insert(s.name).second) bad_graph("two symbols are named '", s.name, "'");
    if (s.min < 0 || s.min > s.max)
      bad_graph("symbol '", s.name, "' has the range [", s.min, ", ", s.max,
                "]; a symbol's minimum must be at least 0 and at most its maximum");
  }
}

// The dimensions of value v: valid symbols, coef >= 1 where there are symbols, the shape
// at the symbols' maxima (the buffer's size), never negative at their minima.
void ShapeBinding::check_dims(int v) const {
  const ExecGraph::Value& val = g_.values[v];
  if (val.dims.empty()) return;
  const std::string what = "value " + std::to_string(v);
  if (val.dims.size() != val.shape.size())
    bad_graph(what, " has ", val.dims.size(), " run-time dimensions for its shape ",
              shape_str(val.shape));
  const int n = static_cast<int>(g_.symbols.size());
  const std::vector<int64_t> max = symbol_values(g_, true), min = symbol_values(g_, false);
  for (size_t d = 0; d < val.dims.size(); ++d) {
    const ExecGraph::Dim& dim = val.dims[d];
    const std::string at = what + " dimension " + std::to_string(d);
    for (int s : dim.symbols)
      if (s < 0 || s >= n) bad_graph(at, " names symbol ", s, ", but the graph has ", n);
    if (!dim.symbols.empty() && dim.coef < 1)
      bad_graph(at, " (", dim_str(dim), ") has the coefficient ", dim.coef,
                "; a run-time dimension's must be at least 1");
    const int64_t largest = eval_checked(dim, max, at);
    if (largest != val.shape[d])
      bad_graph(at, " is ", dim_str(dim), " = ", largest, " with every symbol at its maximum, ",
                "but its shape ", shape_str(val.shape), " has ", val.shape[d], " there");
    const int64_t smallest = eval_checked(dim, min, at);
    if (smallest < 0)
      bad_graph(at, " is ", dim_str(dim), " = ", smallest,
                " with every symbol at its minimum; a dimension cannot be negative");
  }
}

// Parameters are data of the model, static. A view is its source's bytes, so the two hold
// as many elements at every binding; checked at the minima (the memory plan checks the
// maxima), which catches a view whose run-time dimensions were left out.
void ShapeBinding::check_params_and_views() const {
  for (const ExecGraph::Param& p : g_.params)
    if (varies_[p.value])
      bad_graph("parameter '", p.name, "' (value ", p.value,
                ") has a run-time dimension; parameters have static shapes");
  if (g_.symbols.empty()) return;
  const std::vector<int64_t> min = symbol_values(g_, false);
  for (const ExecGraph::View& v : g_.views) {
    const int64_t dst = shape_numel(shape(v.dst, min)), src = shape_numel(shape(v.src, min));
    if (dst != src)
      bad_graph("value ", v.dst, " is a view of value ", v.src, " but holds ", dst,
                " elements where value ", v.src, " holds ", src,
                " (every symbol at its minimum); a view keeps its source's element count");
  }
}

// A kernel reads its arguments' run-time dimensions from its shape_args, so it must take
// every symbol they depend on.
void ShapeBinding::check_kernels() const {
  const int n = static_cast<int>(g_.symbols.size());
  for (const ExecGraph::Kernel& k : g_.kernels) {
    std::set<int> taken;
    for (int s : k.symbols) {
      if (s < 0 || s >= n) bad_graph("kernel '", k.name, "' takes symbol ", s, " of ", n);
      if (!taken.insert(s).second)
        bad_graph("kernel '", k.name, "' takes symbol '", g_.symbols[s].name, "' twice");
    }
    for (int a : k.args) {
      const std::vector<ExecGraph::Dim>& dims = g_.values[a].dims;
      for (size_t d = 0; d < dims.size(); ++d)
        for (int s : dims[d].symbols)
          if (!taken.count(s))
            bad_graph("kernel '", k.name, "' has value ", a, " as an argument, whose dimension ", d,
                      " (", dim_str(dims[d]), ") depends on '", g_.symbols[s].name,
                      "', but does not take that symbol's value");
    }
  }
}

// Every symbol needs an input dimension of it alone (coef * s + offset) to give its value;
// input dimensions of several symbols are checked once the run's values are bound.
void ShapeBinding::find_binders() {
  std::vector<bool> bound(g_.symbols.size(), false);
  for (size_t i = 0; i < g_.inputs.size(); ++i) {
    const std::vector<ExecGraph::Dim>& dims = g_.values[g_.inputs[i].value].dims;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d].symbols.size() == 1) bound[dims[d].symbols[0]] = true;
      if (dims[d].symbols.size() > 1) products_.emplace_back(i, d);
    }
  }
  for (size_t s = 0; s < bound.size(); ++s)
    if (!bound[s])
      bad_graph("symbol '", g_.symbols[s].name,
                "' cannot be bound at run time: no input has a dimension that is ",
                g_.symbols[s].name, " alone (or coef*", g_.symbols[s].name,
                " + offset), so no run gives its value");
}

std::string ShapeBinding::dim_str(const ExecGraph::Dim& d) const {
  if (d.symbols.empty()) return std::to_string(d.offset);
  std::string s = d.coef == 1 ? "" : std::to_string(d.coef) + "*";
  for (size_t i = 0; i < d.symbols.size(); ++i) s += (i ? "*" : "") + g_.symbols[d.symbols[i]].name;
  if (d.offset > 0) s += "+";
  return d.offset ? s + std::to_string(d.offset) : s;
}

std::string ShapeBinding::range_str(int s) const {
  const ExecGraph::Symbol& sym = g_.symbols[s];
  return sym.name + " in [" + std::to_string(sym.min) + ", " + std::to_string(sym.max) + "]";
}

std::string ShapeBinding::type_str(int v) const {
  const ExecGraph::Value& val = g_.values[v];
  if (!varies_[v]) return std::string(dtype_name(val.dtype)) + shape_str(val.shape);
  std::string dims, ranges;
  std::vector<bool> listed(g_.symbols.size(), false);
  for (size_t d = 0; d < val.dims.size(); ++d) {
    dims += (d ? ", " : "") + dim_str(val.dims[d]);
    for (int s : val.dims[d].symbols) {
      if (listed[s]) continue;
      ranges += (ranges.empty() ? "" : ", ") + range_str(s);
      listed[s] = true;
    }
  }
  return std::string(dtype_name(val.dtype)) + "(" + dims + ") with " + ranges;
}

// The value of the one symbol of input `input`'s dimension d that makes it `size`.
int64_t ShapeBinding::solve(int input, int d, int64_t size) const {
  const ExecGraph::Input& in = g_.inputs[input];
  const ExecGraph::Dim& dim = g_.values[in.value].dims[d];
  const int s = dim.symbols[0];
  const ExecGraph::Symbol& sym = g_.symbols[s];
  int64_t rest = 0;
  if (sub_overflows(size, dim.offset, &rest) || rest % dim.coef != 0)
    fail("input '", in.name, "' dimension ", d, " is ", size, ", but it must be ", dim_str(dim),
         " for a whole ", range_str(s), "; pass a tensor of that shape (the input is ",
         type_str(in.value), ")");
  const int64_t value = rest / dim.coef;
  if (value >= sym.min && value <= sym.max) return value;
  const std::string is = dim.coef == 1 && dim.offset == 0
                             ? sym.name + " = " + std::to_string(size)
                             : dim_str(dim) + " = " + std::to_string(size) + ", so " + sym.name +
                                   " = " + std::to_string(value);
  fail("input '", in.name, "' dimension ", d, " is ", is, ", outside ", sym.name, "'s range [",
       sym.min, ", ", sym.max, "]; pass a tensor whose dimension ", d,
       " is in that range (or rebuild the model for a wider one)");
}

void ShapeBinding::mismatch(int input, int d, int64_t size,
                            const std::vector<int64_t>& values) const {
  const ExecGraph::Input& in = g_.inputs[input];
  const ExecGraph::Dim& dim = g_.values[in.value].dims[d];
  std::string given;
  for (int s : dim.symbols)
    given += (given.empty() ? "" : ", ") + g_.symbols[s].name + " = " + std::to_string(values[s]);
  fail("input '", in.name, "' dimension ", d, " is ", size, ", but it must be ", dim_str(dim),
       " = ", eval(dim, values), " (", given, "); pass a tensor of that shape (the input is ",
       type_str(in.value), ")");
}

std::vector<int64_t> ShapeBinding::input_values(int index, DType dtype, const Shape& shape) const {
  const ExecGraph::Input& in = g_.inputs[index];
  const ExecGraph::Value& val = g_.values[in.value];
  if (dtype != val.dtype || shape.size() != val.dims.size())
    fail("input '", in.name, "' expects ", type_str(in.value), " but was given ", dtype_name(dtype),
         shape_str(shape),
         ": pass a tensor of that dtype and rank (or rebuild the model for the new shape)");
  std::vector<int64_t> values(g_.symbols.size(), kUnbound);
  std::vector<int> from(g_.symbols.size(), -1);  // the dimension that gave each value
  for (size_t d = 0; d < shape.size(); ++d) {
    const ExecGraph::Dim& dim = val.dims[d];
    if (dim.symbols.empty() && shape[d] != dim.offset)
      fail("input '", in.name, "' dimension ", d, " is ", shape[d], " but must be ", dim.offset,
           ": the input is ", type_str(in.value),
           "; pass a tensor of that shape (or rebuild the model for the new shape)");
    if (dim.symbols.size() != 1) continue;
    const int s = dim.symbols[0];
    const int64_t value = solve(index, static_cast<int>(d), shape[d]);
    if (from[s] >= 0 && values[s] != value)
      fail("input '", in.name, "' gives ", g_.symbols[s].name, " two values: ", values[s],
           " by dimension ", from[s], " and ", value, " by dimension ", d, "; the input is ",
           type_str(in.value), ", whose dimensions must agree");
    values[s] = value;
    from[s] = static_cast<int>(d);
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    const std::vector<int>& syms = val.dims[d].symbols;
    const bool known =
        std::all_of(syms.begin(), syms.end(), [&](int s) { return values[s] != kUnbound; });
    if (syms.size() > 1 && known && eval(val.dims[d], values) != shape[d])
      mismatch(index, static_cast<int>(d), shape[d], values);
  }
  return values;
}

std::vector<int64_t> ShapeBinding::bind(const std::vector<Shape>& shapes,
                                        const std::vector<std::vector<int64_t>>& values) const {
  std::vector<int64_t> out(g_.symbols.size(), kUnbound);
  std::vector<int> from(g_.symbols.size(), -1);  // the input that gave each value
  for (size_t i = 0; i < values.size(); ++i) {
    for (size_t s = 0; s < values[i].size(); ++s) {
      const int64_t v = values[i][s];
      if (v == kUnbound || v == out[s]) continue;
      if (from[s] < 0) {
        out[s] = v;
        from[s] = static_cast<int>(i);
        continue;
      }
      const std::string& name = g_.symbols[s].name;
      const std::string &a = g_.inputs[from[s]].name, &b = g_.inputs[i].name;
      fail("inputs '", a, "' and '", b, "' disagree on ", name, ": '", a, "' gives ", name, " = ",
           out[s], " and '", b, "' gives ", name, " = ", v, "; pass inputs whose shapes agree (",
           range_str(static_cast<int>(s)), ")");
    }
  }
  for (size_t s = 0; s < out.size(); ++s)
    EMBER_CHECK(from[s] >= 0, "no input gave symbol '", g_.symbols[s].name, "' a value");
  for (auto [input, d] : products_) {
    const int64_t size = shapes[input][d];
    if (eval(g_.values[g_.inputs[input].value].dims[d], out) != size) mismatch(input, d, size, out);
  }
  return out;
}

Shape ShapeBinding::shape(int v, const std::vector<int64_t>& values) const {
  const ExecGraph::Value& val = g_.values[v];
  if (!varies_[v]) return val.shape;
  Shape out;
  for (const ExecGraph::Dim& d : val.dims) out.push_back(eval(d, values));
  return out;
}

std::vector<int64_t> ShapeBinding::max_values() const { return symbol_values(g_, true); }

}  // namespace ember::runtime
