#pragma once
/// Schedule tuning support (issue #13): what identifies a kernel's workload across models
/// and builds, and the valid knob settings of its default schedule. The search itself is in
/// Python (python/ember/tuning/); ember::build applies a table of chosen knobs
/// (LowerOptions::tuned).
#include <string>
#include <vector>

#include "ember/ir/graph.h"
#include "ember/passes/machine_model.h"
#include "ember/passes/schedule_knobs.h"

namespace ember::passes {

/// Bumped whenever the default schedule's knobs change meaning, so that a tuning log
/// written for another version is not applied.
constexpr int kScheduleTemplateVersion = 1;

/// A fused group's workload key: the anchor op, its result type and a 64-bit hash of the
/// group's canonical form (ops, attributes, input shapes and dtypes, the values of
/// constants inside the group, in post order; not the source names), so that the same
/// kernel in two layers or two models has one key. "nn.dense float32[1, 64] #0123abcd..."
std::string workload_key(const ir::Function& group);

/// The distinct knob settings of `group`'s default CPU schedule on `machine`, the
/// default's first, where the kernel has each knob: every row block (divisors) and register
/// tile axis, and for each of them the register tiles whose accumulators fit in the vector
/// registers, both loop orders, padded-input row tiles of 2..64 rows, reduction unrolls of
/// 1..16 that divide the loop; for a one-row tile (a GEMV) also any number of vectors up to
/// 8 and 1..16 partial sums that divide the reduction loop. Settings that schedule the kernel alike
/// (a knob that does not arise) are listed once. A kernel without knobs (a custom lowering, an
/// elementwise op) has the default only.
std::vector<ScheduleKnobs> knob_space(const ir::Function& group, const MachineModel& machine);

}  // namespace ember::passes
