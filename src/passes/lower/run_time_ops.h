#pragma once
// run_time_refusal: whether an op's compute rule is right over run-time sizes.
#include <string>

#include "ember/ir/graph.h"

namespace ember::passes {

/// Why op call `c` (whose types have run-time sizes) cannot be lowered from its compute rule
/// for a range of sizes: its rule uses a run-time size as a value (a mean's count, a pad's
/// far edge, a window, a concatenation's offset, a size attribute); "" when it only loops
/// over them.
std::string run_time_refusal(const ir::CallNode& c);

}  // namespace ember::passes
