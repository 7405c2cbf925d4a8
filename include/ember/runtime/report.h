#pragma once
/// The report of a compiled model, shared by the compiler (which fills it: lower_graph,
/// FuseOps) and the runtime (which saves and loads it with the model file), so that a loaded
/// model reports what the build did. In the runtime so that the runtime needs no compiler.
#include <string>
#include <vector>

namespace ember::runtime {

/// How one kernel was formed.
struct KernelReport {
  std::string func;                   // symbol in the code
  std::string name;                   // display name: source names joined by " + "
  std::vector<std::string> ops;       // ops fused into it, in order (empty if not recorded)
  std::string anchor;                 // the op that sets the loop nest; "" if not recorded
  std::vector<std::string> patterns;  // fusion rules that fired (empty for a single op)
  // Tuning (set by a build with a tuning table; not saved in the model file).
  std::string workload;     // workload key
  bool tuned = false;       // built with knobs from the tuning table
  std::string tuning_note;  // why a tuned schedule was not applied
};

/// One edge between two ops of the compiled graph, and what fusion decided about it.
struct FusionEdge {
  std::string producer, consumer;  // "op 'source name'"
  bool fused = false;
  std::string reason;  // why not, or which rule fused it
};

}  // namespace ember::runtime
