#pragma once
#include "ember/ir/graph.h"
#include "ember/passes/pipeline.h"

namespace ember::passes {

/// FoldConstant (opt level 2): every maximal subgraph whose inputs are all constants is
/// evaluated with `evaluate` (Ember's own compiler for the host CPU) and replaced by a
/// constant. The constant keeps the source names of what it replaced, joined with " + ".
/// Views of constants (reshape) fold too; a function output that is a constant stays.
ir::Function fold_constant(const ir::Function& f, const ConstEvaluator& evaluate);

}  // namespace ember::passes
