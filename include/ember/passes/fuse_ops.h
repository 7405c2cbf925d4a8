#pragma once
#include "ember/ir/graph.h"

namespace ember::passes {

/// FuseOps (opt level 1): groups operators by TVM's post-dominator rules over the op
/// pattern kinds, and wraps each group in a primitive function called from the main
/// function (ir::call_function). Every call of an op that computes something ends up in
/// exactly one group; views (reshape) and constants stay outside. `max_depth` bounds the
/// number of ops in a group.
ir::Function fuse_ops(const ir::Function& f, int max_depth = 256);

}  // namespace ember::passes
