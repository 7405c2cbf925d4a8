#pragma once
/// One kernel for a symbol's whole range out of kernels of the same computation, each
/// lowered (lower_schedule with Schedule::live) and scheduled for a part of the range: a
/// GEMM over a few rows wants another schedule than over many (a GEMV at one row), and the
/// tiles chosen for a range's largest size need not suit its smallest (issue 44).
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ember/ir/graph.h"
#include "ember/ir/loop.h"

namespace ember::ir {

/// `parts[i]` = (bound, kernel): the kernel serves runs whose `extent` (an expression of the
/// last part's symbol variables: a symbol, or a run's rows `batch * seq`) is at most `bound`
/// and above the previous part's bound; the bounds ascend, and the last part serves the rest
/// of the range. The kernels take the same parameters (by name, dtype and rank; the static
/// shapes may differ, the last part's are kept) and read the same symbols from the same
/// shape argument, in the same order (with variables of their own: each part is lowered
/// alone). The result reads the symbols once and runs the part whose range holds the run's
/// value. Mismatched kernels are an ember::Error naming the parameter.
PrimFunc dispatch_by_range(const std::string& name, const PrimExpr& extent,
                           const std::vector<std::pair<int64_t, PrimFunc>>& parts);

/// The parts of a kernel that dispatch_by_range made, as its chain tests them ("seq<=16,32,64":
/// the extent and the bounds but the last), for reports; "" for any other kernel.
std::string dispatch_label(const PrimFunc& f);

/// A run-time dimension over the symbols' variables (null where `d` is static).
PrimExpr run_dim(const Dim& d, const std::map<std::string, PrimVar>& vars);

/// The run-time sizes a kernel of `group` reads, for a loop nest written by hand (Op::lower):
/// a variable per symbol of the group (function_symbols' order), loaded from the `shape_args`
/// parameter that follows the inputs, where lower_schedule and the executor put it.
struct KernelSymbols {
  std::map<std::string, PrimVar> vars;
  std::vector<PrimVar> order;  // function_symbols' order
  Buffer shape_args;           // null for a static group
  explicit KernelSymbols(const Function& group);
  /// The same for variables made elsewhere (a schedule's LiveExtents), in this order.
  explicit KernelSymbols(std::vector<PrimVar> vars);
  KernelSymbols() = default;
  bool empty() const { return order.empty(); }
  /// `d` over the variables (a constant where static).
  PrimExpr dim(const Dim& d) const;
  /// `body` under the lets that read the variables: first in a kernel, where
  /// dispatch_by_range finds them.
  Stmt bind(Stmt body) const;
};

}  // namespace ember::ir
