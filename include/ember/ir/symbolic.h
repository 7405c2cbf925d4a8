#pragma once
/// Sizes known only at run time (issue 44, dynamic shapes): a symbol is a named size with a
/// range (`seq` in [1, 512]); a dimension is a constant or `coef * (product of symbols) +
/// offset` (`seq`, `12*batch`, `batch*seq`, `seq+1`). A graph built for a range is typed at
/// every symbol's maximum (TensorType::shape: what memory plans, schedules and costs read)
/// and carries its dimensions beside it (TensorType::dims), which the kernels read at run
/// time. Op relations stay integer functions: `call` runs them at a few bindings of the
/// symbols and fits each result dimension to that form (symbolic.cc), so every op carries
/// symbols, and one whose result is not of that form is an error naming the op and dimension.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ember::ir {

struct SymbolNode {
  std::string name;
  int64_t min, max;  // the range every run's value lies in
};
using Symbol = std::shared_ptr<const SymbolNode>;
/// ember::Error unless 1 <= min <= max and the name is an identifier.
Symbol make_symbol(const std::string& name, int64_t min, int64_t max);

/// Values of symbols, by name.
using Binding = std::map<std::string, int64_t>;

/// One dimension: `offset` alone when static, else coef * (product of `symbols`) + offset.
struct Dim {
  int64_t coef = 0;
  std::vector<Symbol> symbols;  // distinct, sorted by name; empty: static
  int64_t offset = 0;
  Dim() = default;
  Dim(int64_t value) : offset(value) {}  // NOLINT: a static size converts implicitly
  static Dim of(Symbol s);
  bool is_static() const { return symbols.empty(); }
  /// The value at `b` (every symbol of the dimension must be bound).
  int64_t at(const Binding& b) const;
  /// The values with every symbol at its maximum (minimum).
  int64_t max() const;
  int64_t min() const;
  bool operator==(const Dim& o) const;
  bool operator!=(const Dim& o) const { return !(*this == o); }
};
std::string to_string(const Dim& d);  // "768", "seq", "12*batch", "batch*seq", "seq+1"

/// Arithmetic that stays a run-time dimension (an importer computes sizes with it: batch *
/// seq, seq + 1, 12 * batch // 4); anything else (seq * seq, (seq + 1) * batch, seq // 2, a
/// result that can be negative) is an ember::Error that names the expression.
Dim operator*(const Dim& a, const Dim& b);
Dim operator+(const Dim& a, const Dim& b);
Dim operator-(const Dim& a, const Dim& b);
Dim floordiv(const Dim& a, int64_t k);
/// Each symbol's range once: "batch in [1, 16], seq in [1, 512]".
std::string to_string(const std::vector<Symbol>& symbols);

/// The symbols of `dims`, each once, sorted by name; ember::Error when one name has two
/// different ranges (`where` names what holds them).
std::vector<Symbol> symbols_of(const std::vector<Dim>& dims, const std::string& where);
/// `a` and `b` merged as symbols_of merges.
std::vector<Symbol> merge_symbols(const std::vector<Symbol>& a, const std::vector<Symbol>& b,
                                  const std::string& where);
/// Every symbol at its maximum.
Binding max_binding(const std::vector<Symbol>& symbols);

/// The bindings a relation is run at to fit its results: every symbol at its maximum first,
/// then each symbol alone at another value of its range, then all at other values twice
/// (two points confirm a fit). Values other than the maximum avoid 1 where the range allows
/// (a 1 broadcasts, so a relation may accept it where it accepts no other size).
std::vector<Binding> probe_bindings(const std::vector<Symbol>& symbols);

/// The dimension that takes `values[i]` at `probes[i]` (probe_bindings(symbols)), or false
/// when none of the form coef * product + offset does (coef > 0).
bool fit_dim(const std::vector<Symbol>& symbols, const std::vector<Binding>& probes,
             const std::vector<int64_t>& values, Dim* out);

/// "seq = 3, batch = 16": a binding for messages.
std::string to_string(const Binding& b);

}  // namespace ember::ir
