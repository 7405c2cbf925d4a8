#pragma once
/// What schedule tuning (issue #13, python/ember/tuning/) needs from the build: a model's
/// distinct kernels as workloads, and one kernel compiled alone with chosen knobs.
#include <memory>
#include <string>
#include <vector>

#include "ember/codegen/build.h"
#include "ember/passes/schedule_knobs.h"

namespace ember {

/// One distinct kernel of a built model.
struct Workload {
  std::string key;             // passes::workload_key
  ir::Function group;          // the fused group (its params are the kernel's inputs)
  runtime::KernelReport info;  // of its first occurrence
  int count = 0;               // kernels of the model with this key
};

/// The distinct kernels of a built CPU library, in first-use order.
std::vector<Workload> extract_workloads(const Library& lib);

/// Compiles `group` alone for the CPU `target` with `knobs`: a Library whose graph runs
/// the one kernel on inputs p0, p1, ... (the group's params). Knobs that do not fit the
/// kernel are an ember::Error.
std::shared_ptr<Library> build_kernel(const ir::Function& group, const std::string& target,
                                      const passes::ScheduleKnobs& knobs);

}  // namespace ember
