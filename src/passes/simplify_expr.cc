// SimplifyExpr: TensorRT's erase-and-merge fusions (see simplify_expr.h). Every rule is a
// local rewrite of one node over its already rewritten inputs (ir::rewrite runs bottom-up),
// so chains collapse one step at a time: relu(relu(relu(x))) becomes relu(x) in two steps.
// Nothing here changes a value: each rule checks shapes and dtypes (and the sign of zero)
// so that the rewritten graph computes exactly what the original did.
#include "ember/passes/simplify_expr.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "ember/ir/op.h"
#include "ember/support/error.h"

namespace ember::passes {

using namespace ir;

namespace {

std::string add_pattern(const Attrs& attrs, const std::string& p) {
  std::string old = attrs.get_str("fusion_pattern", "");
  if (old.empty() || old.find(p) != std::string::npos) return old.empty() ? p : old;
  return old + ", " + p;
}

bool is_reshape_like(const Expr& e) {
  static const std::set<std::string> ops = {"reshape", "flatten", "squeeze", "expand_dims"};
  auto* c = as<CallNode>(e);
  return c && c->op && ops.count(c->op->name);
}

struct Simplifier {
  std::map<const ExprNode*, int> uses;

  // The producer standing in for an erased `consumer`: it takes the pattern and the name
  // when no one else reads it (rebuilding a shared node would compute it twice).
  Expr absorb(const Expr& producer, const Expr& original_producer, const Expr& consumer,
              const std::string& pattern) {
    auto* p = as<CallNode>(producer);
    if (!p || !p->op || uses[original_producer.get()] != 1) return producer;
    return call(p->op, p->args, p->attrs.with("fusion_pattern", add_pattern(p->attrs, pattern)),
                join_names({p->name, consumer->name}));
  }

  // A new call named after the nodes it replaces, marked with `pattern`.
  static Expr make(const std::string& op, std::vector<Expr> args, Attrs attrs,
                   const std::string& name, const std::string& pattern) {
    return call(op, std::move(args), attrs.with("fusion_pattern", pattern), name);
  }

  Expr visit(const Expr& e, const std::vector<Expr>& in) {
    auto* c = as<CallNode>(e);
    if (!c || !c->op) return nullptr;
    const std::string& op = c->op->name;
    if (op == "nn.relu" && op_call(in[0], "nn.relu"))
      return absorb(in[0], c->args[0], e, "ReLU -> ReLU");
    if (Expr x = identity_operand(c, in)) {
      size_t which = x == in[0] ? 0 : 1;
      return absorb(x, c->args[which], e, "identity scale erased");
    }
    if (op == "transpose" || is_reshape_like(e)) {
      if (Expr r = shuffle(c, e, in[0])) return r;
    }
    if (Expr r = reduce_of_transpose(c, in)) return r;
    if (op == "mean") return global_pool(c, in[0]);
    return nullptr;
  }

  // x for x * 1, 1 * x, x / 1, x ** 1, x - 0, x + (-0.0), -0.0 + x (integers: x + 0, 0 + x).
  static Expr identity_operand(const CallNode* c, const std::vector<Expr>& in) {
    static const std::set<std::string> ops = {"multiply", "divide", "power", "add", "subtract"};
    if (!ops.count(c->op->name) || in.size() != 2) return nullptr;
    const std::string& op = c->op->name;
    bool commutative = op == "multiply" || op == "add";
    for (size_t k : {size_t{1}, size_t{0}}) {
      if (k == 0 && !commutative) break;
      const Expr& x = in[1 - k];
      if (!(c->type == x->type)) continue;  // a broadcast or a dtype change: not an identity
      auto* cst = as<ConstantNode>(in[k]);
      if (cst && all_identity(cst->value, op)) return x;
    }
    return nullptr;
  }

  static bool all_identity(const runtime::NDArray& t, const std::string& op) {
    if (t.numel() == 0) return false;
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (t.dtype() == DType::Bool) return false;
      const double v = t.element(i);
      bool is_f = is_float(t.dtype());
      bool ok = op == "multiply" || op == "divide" || op == "power"
                    ? v == 1.0
                    : v == 0.0 && (!is_f || std::signbit(v) == (op == "add"));
      if (!ok) return false;
    }
    return true;
  }

  // Transposes and reshapes: merge with the producer of the same kind, and drop any chain
  // back to a node whose elements come out in the same order with the same shape.
  Expr shuffle(const CallNode* c, const Expr& e, const Expr& in) {
    if (Expr root = identity_chain_root(e, in)) {
      // The chain goes; its root takes the name and the pattern when nothing else reads the
      // root or the original chain down to it (merged chain nodes are new, so the walk
      // follows the original graph, which reaches the same root when it was not rewritten).
      bool alone = uses[root.get()] == 1;
      Expr node = c->args[0];
      while (node != root && alone && (op_call(node, "transpose") || is_reshape_like(node))) {
        alone &= uses[node.get()] == 1;
        node = as<CallNode>(node)->args[0];
      }
      return alone && node == root ? absorb(root, root, e, "shuffle -> shuffle") : root;
    }
    const std::string& op = c->op->name;
    auto* inner = as<CallNode>(in);
    if (op == "transpose" && op_call(in, "transpose")) {
      auto p1 = inner->attrs.get_ints("axes", {}), p2 = c->attrs.get_ints("axes", {});
      std::vector<int64_t> q(p2.size());
      for (size_t k = 0; k < q.size(); ++k) q[k] = p1[p2[k]];
      return make("transpose", {inner->args[0]}, Attrs({{"axes", q}}),
                  join_names({inner->name, c->name}), "shuffle -> shuffle");
    }
    if (is_reshape_like(e) && is_reshape_like(in))
      return make("reshape", {inner->args[0]},
                  Attrs().with_dims("newshape", c->type.tensor().all_dims()),
                  join_names({inner->name, c->name}), "shuffle -> shuffle");
    return nullptr;
  }

  // The farthest node up a transpose/reshape chain ending at `e` (whose input is `in`)
  // that `e` reproduces exactly; null if none. Checked by running the chain on the element
  // indices (bounded, so huge tensors are left alone).
  static Expr identity_chain_root(const Expr& e, const Expr& in) {
    std::vector<const CallNode*> chain{as<CallNode>(e)};
    Expr root = in, found;
    for (int depth = 0; depth < 16; ++depth) {
      const TensorType& out = e->type.tensor();
      if (!root->type.is_tuple && root->type.tensor() == out && out.shape.size() &&
          runs_as_identity(chain, root->type.tensor()))
        found = root;
      auto* c = as<CallNode>(root);
      if (!c || !c->op || !(c->op->name == "transpose" || is_reshape_like(root))) break;
      chain.push_back(c);
      root = c->args[0];
    }
    return found;
  }

  // chain[0] is the last op; chain.back() reads `input`.
  static bool runs_as_identity(const std::vector<const CallNode*>& chain, const TensorType& input) {
    int64_t n = 1;
    for (int64_t d : input.shape) n *= d;
    if (n > (int64_t{1} << 20) || n == 0) return false;
    std::vector<int64_t> data(static_cast<size_t>(n));
    std::iota(data.begin(), data.end(), 0);
    std::vector<int64_t> shape = input.shape;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const std::vector<int64_t>& out_shape = (*it)->type.tensor().shape;
      if ((*it)->op->name == "transpose")
        data = transpose_data(data, shape, (*it)->attrs.get_ints("axes", {}));
      shape = out_shape;
    }
    for (int64_t i = 0; i < n; ++i)
      if (data[i] != i) return false;
    return true;
  }

  static std::vector<int64_t> transpose_data(const std::vector<int64_t>& data,
                                             const std::vector<int64_t>& shape,
                                             const std::vector<int64_t>& axes) {
    size_t r = shape.size();
    std::vector<int64_t> in_stride(r, 1), out_shape(r), out(data.size());
    for (size_t d = r; d-- > 1;) in_stride[d - 1] = in_stride[d] * shape[d];
    for (size_t k = 0; k < r; ++k) out_shape[k] = shape[axes[k]];
    std::vector<int64_t> idx(r, 0);
    for (size_t flat = 0; flat < data.size(); ++flat) {
      int64_t src = 0;
      for (size_t k = 0; k < r; ++k) src += idx[k] * in_stride[axes[k]];
      out[flat] = data[static_cast<size_t>(src)];
      for (size_t k = r; k-- > 0;) {  // next output index, row-major
        if (++idx[k] < out_shape[k]) break;
        idx[k] = 0;
      }
    }
    return out;
  }

  // reduce(transpose(x, p), axes) = reduce(x, p[axes]) when the kept axes keep their order.
  Expr reduce_of_transpose(const CallNode* c, const std::vector<Expr>& in) {
    static const std::set<std::string> reduces = {
        "sum", "mean", "max", "min", "l1_norm", "sum_squares", "l2_norm", "log_sum", "log_sum_exp"};
    auto* t = op_call(in[0], "transpose");
    if (!reduces.count(c->op->name) || !t) return nullptr;
    auto perm = t->attrs.get_ints("axes", {});
    auto axes = c->attrs.get_ints("axis", {});
    std::vector<int64_t> new_axes;
    int64_t last_kept = -1;
    for (int64_t k = 0; k < static_cast<int64_t>(perm.size()); ++k) {
      if (std::find(axes.begin(), axes.end(), k) != axes.end()) {
        new_axes.push_back(perm[k]);
      } else {
        if (perm[k] < last_kept) return nullptr;  // the kept axes would come out permuted
        last_kept = perm[k];
      }
    }
    std::sort(new_axes.begin(), new_axes.end());
    std::string name = join_names({t->name, c->name});
    // With keepdims the size-1 axes may land elsewhere; a reshape would restore the shape,
    // but a view between the reduce and its epilogue stops FuseOps, so leave those alone.
    Expr r =
        make(c->op->name, {t->args[0]}, c->attrs.with("axis", new_axes), name, "shuffle -> reduce");
    return r->type == c->type ? r : nullptr;
  }

  // mean(x, axis=[2, 3]) of NCHW float x is a global average pool.
  static Expr global_pool(const CallNode* c, const Expr& x) {
    const TensorType& t = x->type.tensor();
    if (t.ndim() != 4 || !is_float(t.dtype) || t.shape[2] == 0 || t.shape[3] == 0) return nullptr;
    // keepdims only: without it the pool needs a reshape, and a view between the pool and
    // its epilogue would stop FuseOps (mean fuses its epilogue as well as the pool does).
    if (c->attrs.get_ints("axis", {}) != std::vector<int64_t>{2, 3} ||
        c->attrs.get_int("keepdims", 0) != 1)
      return nullptr;
    return make("nn.adaptive_avg_pool2d", {x}, Attrs({{"output_size", std::vector<int64_t>{1, 1}}}),
                c->name, "average-reduce -> global average pool");
  }
};

}  // namespace

Function simplify_expr(const Function& f) {
  Simplifier s{use_counts(f)};
  return rewrite(f, [&](const Expr& e, const std::vector<Expr>& in) { return s.visit(e, in); });
}

}  // namespace ember::passes
