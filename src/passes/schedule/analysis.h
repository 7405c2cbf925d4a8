#pragma once
// Questions the schedule templates (default_schedule.cc, gpu_schedule.cc) ask of stages and
// of tensor-expression bodies; one copy for both.
#include "ember/ir/chains.h"
#include "ember/ir/loop.h"
#include "ember/passes/schedule.h"

namespace ember::passes {

/// Is `s` a reduction (its body a Reduce)?
bool is_reduction(const Stage& s);

/// Does `e` use the variable `v`?
bool uses_var(const ir::PrimExpr& e, const ir::PrimVarNode* v);

/// Does `body` read `producer` anywhere?
bool reads(const ir::PrimExpr& body, const ir::TensorNode* producer);

/// Does `body` read `producer` at an index that uses `axis_var`?
bool reads_along(const ir::PrimExpr& body, const ir::TensorNode* producer,
                 const ir::PrimVarNode* axis_var);

}  // namespace ember::passes
