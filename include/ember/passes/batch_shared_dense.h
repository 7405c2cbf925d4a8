#pragma once
#include "ember/ir/graph.h"

namespace ember::passes {

/// BatchSharedDense (opt level 2): several nn.dense calls that multiply rank-2 inputs
/// [M_i, K] by the same constant weight, none of whose inputs depends on another of them
/// (an unrolled RNN's input projections, one per step; a Siamese network's branches),
/// become one nn.dense of their inputs concatenated along the rows, and each call is replaced
/// by its rows of the result (strided_slice). The weight is then read once rather than once
/// per call: a batch-1 dense streams its weight, a batched one reuses it from registers.
/// Calls whose input depends on another call of the group (the recurrence's state
/// projections) are left alone, as are calls on an input that another call of the group
/// also reads (they compute the same rows), and a weight with one reader.
ir::Function batch_shared_dense(const ir::Function& f);

}  // namespace ember::passes
