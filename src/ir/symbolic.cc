// Symbols, run-time dimensions and the fit that carries symbols through integer relations.
#include "ember/ir/symbolic.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "ember/support/checked_math.h"
#include "ember/support/error.h"

namespace ember::ir {

Symbol make_symbol(const std::string& name, int64_t min, int64_t max) {
  bool ident = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
  for (char c : name) ident = ident && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!ident) fail("symbol name '", name, "' is not an identifier (letters, digits, _)");
  if (min < 1 || max < min)
    fail("symbol ", name, " has the range [", min, ", ", max,
         "]; a run-time size needs 1 <= min <= max");
  return std::make_shared<SymbolNode>(SymbolNode{name, min, max});
}

Dim Dim::of(Symbol s) {
  Dim d;
  d.coef = 1;
  d.symbols = {std::move(s)};
  return d;
}

int64_t Dim::at(const Binding& b) const {
  if (is_static()) return offset;
  int64_t v = coef;
  for (const Symbol& s : symbols) {
    auto it = b.find(s->name);
    EMBER_CHECK(it != b.end(), "symbol ", s->name, " is not bound");
    v *= it->second;
  }
  return v + offset;
}

int64_t Dim::max() const {
  int64_t v = coef;
  for (const Symbol& s : symbols) v *= s->max;
  return is_static() ? offset : v + offset;
}

int64_t Dim::min() const {
  int64_t v = coef;
  for (const Symbol& s : symbols) v *= s->min;
  return is_static() ? offset : v + offset;
}

bool Dim::operator==(const Dim& o) const {
  if (offset != o.offset || symbols.size() != o.symbols.size()) return false;
  if (is_static()) return true;
  if (coef != o.coef) return false;
  for (size_t i = 0; i < symbols.size(); ++i)
    if (symbols[i]->name != o.symbols[i]->name || symbols[i]->min != o.symbols[i]->min ||
        symbols[i]->max != o.symbols[i]->max)
      return false;
  return true;
}

std::string to_string(const Dim& d) {
  if (d.is_static()) return std::to_string(d.offset);
  std::vector<std::string> names;
  for (const Symbol& s : d.symbols) names.push_back(s->name);
  std::string s = d.coef == 1 ? "" : std::to_string(d.coef) + "*";
  s += fmt::format("{}", fmt::join(names, "*"));
  if (d.offset > 0) s += "+" + std::to_string(d.offset);
  if (d.offset < 0) s += std::to_string(d.offset);
  return s;
}

namespace {

[[noreturn]] void not_a_dim(const Dim& a, const char* op, const std::string& b) {
  fail("the size ", to_string(a), " ", op, " ", b,
       " is not a run-time dimension Ember carries (coef * a product of distinct symbols + "
       "offset, never below 0); give the input a static size for the symbols involved");
}

Dim checked(Dim d, const Dim& a, const char* op, const std::string& b) {
  if (!d.is_static() && d.coef == 0) d = Dim(d.offset);
  if (d.min() < 0) not_a_dim(a, op, b);
  return d;
}

}  // namespace

Dim operator*(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return Dim(a.offset * b.offset);
  if (b.is_static() || a.is_static()) {
    const Dim& d = a.is_static() ? b : a;
    const int64_t k = a.is_static() ? a.offset : b.offset;
    if (k == 0) return Dim(0);
    Dim out = d;
    out.coef *= k;
    out.offset *= k;
    return checked(out, a, "*", to_string(b));
  }
  if (a.offset != 0 || b.offset != 0) not_a_dim(a, "*", to_string(b));
  Dim out;
  out.coef = a.coef * b.coef;
  out.symbols = a.symbols;
  for (const Symbol& s : b.symbols) {
    for (const Symbol& t : a.symbols)
      if (t->name == s->name) not_a_dim(a, "*", to_string(b));
    out.symbols.push_back(s);
  }
  std::sort(out.symbols.begin(), out.symbols.end(),
            [](const Symbol& x, const Symbol& y) { return x->name < y->name; });
  return out;
}

Dim operator+(const Dim& a, const Dim& b) {
  if (b.is_static() || a.is_static()) {
    Dim out = a.is_static() ? b : a;
    out.offset = a.offset + b.offset;
    return checked(out, a, "+", to_string(b));
  }
  Dim same = b;
  same.coef = a.coef;
  same.offset = a.offset;
  if (same != a) not_a_dim(a, "+", to_string(b));
  Dim out = a;
  out.coef += b.coef;
  out.offset += b.offset;
  return checked(out, a, "+", to_string(b));
}

Dim operator-(const Dim& a, const Dim& b) {
  Dim neg = b;
  neg.coef = -b.coef;
  neg.offset = -b.offset;
  if (a.is_static() && !b.is_static()) not_a_dim(a, "-", to_string(b));
  if (!a.is_static() && !b.is_static()) {
    Dim same = b;
    same.coef = a.coef;
    same.offset = a.offset;
    if (same != a) not_a_dim(a, "-", to_string(b));
    Dim out = a;
    out.coef -= b.coef;
    out.offset -= b.offset;
    if (out.coef < 0) not_a_dim(a, "-", to_string(b));
    return checked(out, a, "-", to_string(b));
  }
  return checked(a + Dim(-b.offset), a, "-", to_string(b));
}

Dim floordiv(const Dim& a, int64_t k) {
  if (k <= 0) fail("a size divided by ", k, "; divide by a positive number");
  if (a.is_static()) return Dim(a.offset / k);
  if (a.coef % k != 0 || a.offset % k != 0) not_a_dim(a, "//", std::to_string(k));
  Dim out = a;
  out.coef /= k;
  out.offset /= k;
  return out;
}

std::string to_string(const std::vector<Symbol>& symbols) {
  std::vector<std::string> parts;
  for (const Symbol& s : symbols)
    parts.push_back(fmt::format("{} in [{}, {}]", s->name, s->min, s->max));
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string to_string(const Binding& b) {
  std::vector<std::string> parts;
  for (auto& [name, v] : b) parts.push_back(fmt::format("{} = {}", name, v));
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::vector<Symbol> merge_symbols(const std::vector<Symbol>& a, const std::vector<Symbol>& b,
                                  const std::string& where) {
  std::map<std::string, Symbol> all;
  for (const std::vector<Symbol>* list : {&a, &b})
    for (const Symbol& s : *list) {
      auto [it, added] = all.emplace(s->name, s);
      if (!added && (it->second->min != s->min || it->second->max != s->max))
        fail(where, ": symbol ", s->name, " has two ranges, [", it->second->min, ", ",
             it->second->max, "] and [", s->min, ", ", s->max,
             "]; one symbol must have one range in a graph");
    }
  std::vector<Symbol> out;
  for (auto& [name, s] : all) out.push_back(s);
  return out;
}

std::vector<Symbol> symbols_of(const std::vector<Dim>& dims, const std::string& where) {
  std::vector<Symbol> out;
  for (const Dim& d : dims) out = merge_symbols(out, d.symbols, where);
  return out;
}

Binding max_binding(const std::vector<Symbol>& symbols) {
  Binding b;
  for (const Symbol& s : symbols) b[s->name] = s->max;
  return b;
}

namespace {

bool is_prime(int64_t n) {
  if (n < 2) return false;
  for (int64_t d = 2; d * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}

// Values of `s`'s range other than its maximum, for the probes: primes from 3 up where the
// range has them (products of different primes do not collide), else whatever it has.
std::vector<int64_t> other_values(const Symbol& s, size_t count) {
  std::vector<int64_t> out;
  for (int64_t v = std::max<int64_t>(s->min, 3); v < s->max && out.size() < count; ++v)
    if (is_prime(v)) out.push_back(v);
  for (int64_t v = s->max - 1; v >= s->min && out.size() < count; --v)
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  while (out.size() < count) out.push_back(out.empty() ? s->max : out.back());
  return out;
}

}  // namespace

std::vector<Binding> probe_bindings(const std::vector<Symbol>& symbols) {
  const Binding top = max_binding(symbols);
  std::vector<Binding> probes{top};
  std::map<std::string, std::vector<int64_t>> others;
  for (const Symbol& s : symbols) others[s->name] = other_values(s, 3);
  for (const Symbol& s : symbols) {
    Binding b = top;
    b[s->name] = others[s->name][0];
    probes.push_back(b);
  }
  for (size_t k : {1, 2}) {
    Binding b;
    for (const Symbol& s : symbols) b[s->name] = others[s->name][k];
    probes.push_back(b);
  }
  return probes;
}

bool fit_dim(const std::vector<Symbol>& symbols, const std::vector<Binding>& probes,
             const std::vector<int64_t>& values, Dim* out) {
  EMBER_CHECK(probes.size() == symbols.size() + 3 && values.size() == probes.size(),
              "fit_dim takes the values at probe_bindings");
  const Binding& top = probes[0];
  Dim d;
  // The symbols the dimension depends on: those whose probe alone changes it.
  for (size_t i = 0; i < symbols.size(); ++i)
    if (values[i + 1] != values[0]) d.symbols.push_back(symbols[i]);
  if (d.symbols.empty()) {
    d.offset = values[0];
  } else {
    // values[0] - values[i+1] = coef * (max_i - v_i) * (product of the others at max).
    for (size_t i = 0; i < symbols.size(); ++i) {
      if (values[i + 1] == values[0]) continue;
      const std::string& name = symbols[i]->name;
      int64_t unit = top.at(name) - probes[i + 1].at(name);
      for (const Symbol& s : d.symbols)
        if (s->name != name) unit *= top.at(s->name);
      const int64_t diff = values[0] - values[i + 1];
      if (unit == 0 || diff % unit != 0) return false;
      const int64_t coef = diff / unit;
      if (coef <= 0 || (d.coef != 0 && coef != d.coef)) return false;
      d.coef = coef;
    }
    d.offset = values[0] - d.max();
  }
  for (size_t p = 0; p < probes.size(); ++p)
    if (d.at(probes[p]) != values[p]) return false;
  *out = d;
  return true;
}

}  // namespace ember::ir
