#include "ember/passes/schedule.h"
#include "ember/support/error.h"

namespace ember::passes {

void apply_gpu_schedule(Schedule&) {
  fail("the GPU schedule is not implemented yet; build with target=\"llvm\"");
}

}  // namespace ember::passes
