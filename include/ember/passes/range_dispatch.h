#pragma once
/// One kernel for a symbol's whole range out of kernels of the same computation, each
/// lowered (lower_schedule with Schedule::live) and scheduled for a part of the range: a
/// GEMM over a few rows wants another schedule than over many (a GEMV at one row), and the
/// tiles chosen for a range's largest size need not suit its smallest (issue 44).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ember/ir/loop.h"

namespace ember::passes {

/// `parts[i]` = (bound, kernel): the kernel serves runs whose `extent` (an expression of the
/// last part's symbol variables: a symbol, or a run's rows `batch * seq`) is at most `bound`
/// and above the previous part's bound; the bounds ascend, and the last part serves the rest
/// of the range. The kernels take the same parameters (by name, dtype and rank; the static
/// shapes may differ, the last part's are kept) and read the same symbols from the same
/// shape argument, in the same order (with variables of their own: each part is lowered
/// alone). The result reads the symbols once and runs the part whose range holds the run's
/// value. Mismatched kernels are an ember::Error naming the parameter.
ir::PrimFunc dispatch_by_range(const std::string& name, const ir::PrimExpr& extent,
                               const std::vector<std::pair<int64_t, ir::PrimFunc>>& parts);

}  // namespace ember::passes
