#pragma once
#include "ember/ir/graph.h"

namespace ember::passes {

/// SimplifyExpr (opt level 1): TensorRT's "erase and merge" layer fusions, as graph rewrites
/// that remove work before FuseOps groups what is left. Each call it creates or keeps in
/// place of others gets attrs["fusion_pattern"] and the merged nodes' names joined by " + ".
///  - "ReLU -> ReLU": relu(relu(x)) is relu(x).
///  - "identity scale erased": x * 1, x / 1, x ** 1, x - (+0.0), x + (-0.0) (and 1 * x,
///    -0.0 + x; for integers any zero) with a constant operand whose every element is that
///    value and the result's type equal to x's (a broadcast that grows x is not an identity).
///    x + (+0.0) is kept for floats: it turns -0.0 into +0.0.
///  - "shuffle -> shuffle": transpose(transpose(x)) becomes one transpose (or x when the
///    pair is inverse), reshape-like ops (reshape, flatten, squeeze, expand_dims) in a row
///    become one reshape (or x when the shape comes back), and any chain of transposes and
///    reshapes whose composition is the identity is removed.
///  - "shuffle -> reduce": a reduction (sum, mean, max, min, the catalog norms) of
///    transpose(x) reduces x over the permuted axes when that gives the same shape (the kept
///    axes stay in order and, with keepdims, the size-1 axes land in the same places).
///  - "average-reduce -> global average pool": mean over axes 2, 3 with keepdims of a 4-D
///    (NCHW) float tensor becomes nn.adaptive_avg_pool2d to 1x1. (Without keepdims the pool
///    would need a reshape, and a view between it and its epilogue stops FuseOps.)
/// An erased node's pattern and name go to its producer when that is a call with no other
/// user (otherwise they are dropped with it).
ir::Function simplify_expr(const ir::Function& f);

}  // namespace ember::passes
