#pragma once
/// Row invariants: a long scalar chain that a vector loop's lanes share but each row of the
/// serial loop around it computes anew (a row's log in log-sum-exp + bias over short rows)
/// runs the rows' chains one after another. vectorize_row_invariants computes such a value
/// for all rows of that loop first, as one vector across the rows, into a small buffer the
/// row loop then reads: one vector chain instead of a scalar chain per row.
#include "ember/ir/loop.h"
#include "ember/passes/machine_model.h"

namespace ember::passes {

/// `f` with each row invariant (an expression in a vectorized loop's store, of at least
/// kLongChain operations, depending on the serial row loop around it but on no variable
/// bound inside that loop, reading no buffer the loop writes) computed before its row loop
/// for all of the loop's rows. Row loops of more than two vectors (of `machine`'s lanes) of
/// rows, or with a guard inside, are left alone.
ir::PrimFunc vectorize_row_invariants(const ir::PrimFunc& f, const MachineModel& machine);

}  // namespace ember::passes
