#pragma once
// Run-time shapes in the executor (dynamic shapes, ExecGraph::symbols): the graph's symbols
// and dimensions checked once, each input's shape checked against its dimensions and read
// as the symbols' values it gives, a run's values bound from all the inputs, and any value's
// shape at a binding. A user's mistake is an ember::Error naming the input, the dimension,
// the symbol and its range.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ember/runtime/graph_executor.h"

namespace ember::runtime {

/// A symbol's value that an input's shape does not give (ShapeBinding::input_values).
inline constexpr int64_t kUnbound = -1;

class ShapeBinding {
 public:
  /// Checks `g`'s symbols (ranges), value dimensions (symbol ids, coefficients, the shape
  /// at the maxima), parameters (static), kernels (their symbols include those of their
  /// arguments' dimensions), views (same element count) and that an input dimension gives
  /// each symbol's value: ember::Error naming what is wrong. `g` must outlive the binding.
  explicit ShapeBinding(const ExecGraph& g);

  /// Whether value `v` has a dimension of run-time size.
  bool varies(int v) const { return varies_[v]; }
  /// "float32(rows, 40) with rows in [1, 64]": value v's type, for messages.
  std::string type_str(int v) const;
  /// Checks a tensor of `dtype` and `shape` given for input `index` (one that varies): its
  /// dtype and rank, its static dimensions, the symbols' values its dimensions give (whole,
  /// in range, agreeing between its dimensions) and its dimensions of several symbols
  /// whose values it gives. One value per symbol, kUnbound where the input gives none.
  std::vector<int64_t> input_values(int index, DType dtype, const Shape& shape) const;
  /// The run's value of every symbol, from the inputs' `values` (input_values of the
  /// inputs' `shapes`; empty for an input that does not vary). ember::Error naming the
  /// symbol, both inputs and both values where two inputs disagree, or an input dimension
  /// of several symbols that the run's values do not give.
  std::vector<int64_t> bind(const std::vector<Shape>& shapes,
                            const std::vector<std::vector<int64_t>>& values) const;
  /// Value v's shape with the symbols at `values`.
  Shape shape(int v, const std::vector<int64_t>& values) const;
  /// Every symbol at its maximum: the binding the buffers are allocated for.
  std::vector<int64_t> max_values() const;

 private:
  void check_symbols() const;
  void check_dims(int v) const;
  void check_params_and_views() const;
  void check_kernels() const;
  void find_binders();
  std::string dim_str(const ExecGraph::Dim& d) const;
  std::string range_str(int s) const;  // "rows in [1, 64]"
  int64_t solve(int input, int d, int64_t size) const;
  [[noreturn]] void mismatch(int input, int d, int64_t size,
                             const std::vector<int64_t>& values) const;

  const ExecGraph& g_;
  std::vector<bool> varies_;  // per value
  // Per input dimension of several symbols, (input, dimension): checked once every symbol
  // has its value.
  std::vector<std::pair<int, int>> products_;
};

}  // namespace ember::runtime
