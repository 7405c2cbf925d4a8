#pragma once
/// The report of a compiled model, shared by the compiler (which fills it: lower_graph,
/// FuseOps) and the runtime (which saves and loads it with the model file), so that a loaded
/// model reports what the build did. In the runtime so that the runtime needs no compiler.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ember::runtime {

/// How one kernel was formed.
struct KernelReport {
  std::string func;                   // symbol in the code
  std::string name;                   // display name: source names joined by " + "
  std::vector<std::string> ops;       // ops fused into it, in order (empty if not recorded)
  std::string anchor;                 // the op that sets the loop nest; "" if not recorded
  std::vector<std::string> patterns;  // fusion rules that fired (empty for a single op)
  // Tuning (set by a build with a tuning table; saved in the model file).
  std::string workload;     // workload key ("" when the build had no tuning table)
  bool tuned = false;       // built with knobs from the tuning table
  std::string tuning_note;  // why a tuned schedule was not applied
  std::vector<std::pair<std::string, int64_t>> knobs;  // the knobs applied, when tuned
};

/// The tuning log a CPU build applied (PassContext config "tuning_log"; `log` is "" when
/// none): the CPU, vector width and thread count whose entries it used. Saved in the model
/// file, so a loaded model says where its tuned schedules were measured.
struct TuningInfo {
  std::string log;  // the log's path as given
  std::string cpu;  // CPU model of the entries applied (/proc/cpuinfo "model name")
  int64_t vector_bits = 0;
  int64_t threads = 0;
};

/// One edge between two ops of the compiled graph, and what fusion decided about it.
struct FusionEdge {
  std::string producer, consumer;  // "op 'source name'"
  bool fused = false;
  std::string reason;  // why not, or which rule fused it
};

}  // namespace ember::runtime
