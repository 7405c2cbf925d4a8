#pragma once
/// The executor's memory plan, computed from the graph alone (no memory is taken, no device
/// is touched), so that it can be tested on its own: who owns each value's memory, which
/// values share it (views), and where each intermediate lives in one pool that values reuse
/// once their last reader has run.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ember/runtime/graph_executor.h"

namespace ember::runtime {

/// How a value gets its memory.
enum class Role {
  Intermediate,  // pool space (or, when no kernel touches it, a small buffer of its own)
  Input,         // the executor's own buffer, written by set_input
  Param,         // the parameter's data (shared by every executor of the model)
  View,          // its root's memory with another shape
  Output,        // a buffer of its own: later kernels must not overwrite it
};

struct MemoryPlan {
  std::vector<Role> role;  // per value
  /// Per value: the value whose memory it is (itself unless it is a view; a chain of views
  /// ends at its first non-view value).
  std::vector<int> root;
  /// Per value: its byte offset in the pool (a multiple of 64) for an intermediate root
  /// that kernels touch; -1 for every other value.
  std::vector<int64_t> offset;
  size_t pool_bytes = 0;
  /// Per graph output: whether it is (a view of) a parameter, so get_output copies it.
  std::vector<bool> output_is_param;
};

/// Plans `g`'s memory. An intermediate takes its block at the first kernel that touches it
/// and gives it back after the last one does; best-fit reuse of the freed blocks. Blocks
/// are taken before the kernel's freed ones are given back, so no kernel's output shares
/// memory with its input. Checks the graph as it goes: a parameter whose data does not
/// match its value is an ember::Error; ids out of range, a value with two owners, a view
/// that changes the byte size or a cycle of views are InternalErrors (the compiler and the
/// model-file reader never produce them).
MemoryPlan plan_memory(const ExecGraph& g);

}  // namespace ember::runtime
