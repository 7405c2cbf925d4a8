#pragma once
/// Tensor expressions: the bridge between the graph IR and the loop IR (as in Halide and
/// TVM's TE). `compute(shape, fn)` declares a tensor by an index expression over loop-IR
/// scalar expressions; `reduce_axis` with `sum`/`max_reduce` declares reductions. An op's
/// compute rule is a few lines of this.
#include <functional>
#include <string>
#include <vector>

#include "ember/ir/loop.h"

namespace ember::ir {

/// A loop axis of a compute: its variable and constant extent (range [0, extent)).
struct IterVarNode {
  PrimVar var;
  int64_t extent;
  bool reduce;
};
IterVar iter_var(const std::string& name, int64_t extent, bool reduce = false);

/// A tensor: a placeholder (an input buffer, `body` empty) or a compute whose element at
/// `axes` is `body` (which may be a ReduceNode at the top).
struct TensorNode {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<IterVar> axes;  // one per dimension; empty for placeholders
  PrimExpr body;
  bool is_placeholder() const { return !body; }
  /// Tensors read directly by `body`, in first-use order.
  std::vector<TensorRef> inputs() const;
};

/// A handle with call syntax: `A({i, j})` reads A at (i, j).
class Tensor {
 public:
  Tensor() = default;
  Tensor(TensorRef n) : node_(std::move(n)) {}
  PrimExpr operator()(std::vector<PrimExpr> indices) const;
  const TensorNode* operator->() const { return node_.get(); }
  const TensorRef& ref() const { return node_; }
  explicit operator bool() const { return node_ != nullptr; }
  const std::vector<int64_t>& shape() const { return node_->shape; }
  int64_t ndim() const { return static_cast<int64_t>(node_->shape.size()); }
  DType dtype() const { return node_->dtype; }

 private:
  TensorRef node_;
};

using ComputeFn = std::function<PrimExpr(const std::vector<PrimVar>& indices)>;

Tensor placeholder(const std::string& name, std::vector<int64_t> shape, DType dtype);
/// The tensor's dtype is the body's.
Tensor compute(const std::string& name, std::vector<int64_t> shape, const ComputeFn& fn);
IterVar reduce_axis(int64_t extent, const std::string& name);
PrimExpr sum(PrimExpr source, std::vector<IterVar> axes);
PrimExpr max_reduce(PrimExpr source, std::vector<IterVar> axes);
PrimExpr min_reduce(PrimExpr source, std::vector<IterVar> axes);
/// Identity element of a reduction for a dtype (0, -inf/lowest, +inf/highest).
PrimExpr reduce_identity(ReduceOp op, DType dtype);

/// All compute and placeholder tensors reachable from `outputs`, producers first.
std::vector<Tensor> topo_order(const std::vector<Tensor>& outputs);

}  // namespace ember::ir
