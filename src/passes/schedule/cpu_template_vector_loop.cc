// The "vector_loop" template of tile_templates() (default_schedule.cc), the last one tried:
// the loop over the output's vectors is the parallel tile loop.
#include "cpu_schedule.h"

namespace ember::passes::cpu {

using namespace ir;

bool OutputTiling::has_vectors() const { return static_cast<bool>(outer_vec); }

void OutputTiling::parallel_vectors() {
  o.parallel(outer_vec);
  if (along) tile = outer_vec;
}

}  // namespace ember::passes::cpu
