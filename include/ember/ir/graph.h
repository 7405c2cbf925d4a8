#pragma once
/// Graph IR: a relay-like dataflow DAG of immutable, shared nodes. Every node is typed when
/// it is made (`make` runs the op's type relation), so a graph that exists is well typed,
/// and a mistake is reported at the node that makes it, with that node's source name.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <variant>
#include <vector>

#include "ember/ir/symbolic.h"
#include "ember/runtime/dtype.h"
#include "ember/runtime/ndarray.h"

namespace ember::ir {

struct TensorType {
  /// The sizes; a run-time dimension's at every symbol's maximum (symbolic.h).
  std::vector<int64_t> shape;
  DType dtype = DType::Float32;
  /// Empty when every dimension is static; else one per dimension, `shape` their maxima.
  std::vector<Dim> dims;
  int64_t ndim() const { return static_cast<int64_t>(shape.size()); }
  bool symbolic() const { return !dims.empty(); }
  /// The type with run-time dimensions `dims` (static ones as plain sizes; `dims` is
  /// dropped when all are static).
  static TensorType of(std::vector<Dim> dims, DType dtype);
  /// Dimension i (a static Dim where the type is static).
  Dim dim(size_t i) const { return dims.empty() ? Dim(shape.at(i)) : dims.at(i); }
  /// Every dimension (for a size attribute that must follow the run: Attrs::with_dims).
  std::vector<Dim> all_dims() const {
    return dims.empty() ? std::vector<Dim>(shape.begin(), shape.end()) : dims;
  }
  /// The static type at `b` (every symbol of the type bound).
  TensorType at(const Binding& b) const;
  bool operator==(const TensorType& o) const {
    return shape == o.shape && dtype == o.dtype && dims == o.dims;
  }
  bool operator!=(const TensorType& o) const { return !(*this == o); }
};

/// A tensor type, or a tuple of tensor types (tuples do not nest).
struct Type {
  std::vector<TensorType> fields;
  bool is_tuple = false;
  Type() = default;
  Type(TensorType t) : fields{std::move(t)} {}
  static Type tuple(std::vector<TensorType> f) {
    Type t;
    t.fields = std::move(f);
    t.is_tuple = true;
    return t;
  }
  /// The tensor type; ember::Error if this is a tuple.
  const TensorType& tensor() const;
  bool operator==(const Type& o) const { return is_tuple == o.is_tuple && fields == o.fields; }
  bool operator!=(const Type& o) const { return !(*this == o); }
};
std::string to_string(const TensorType& t);  // "float32[1, 3, 32, 32]"
std::string to_string(const Type& t);

/// Op attributes: a small typed map (strides, padding, axis, ...). A list of sizes may hold
/// run-time dimensions (a reshape to [batch*seq, 768]): the getters read it at every
/// symbol's maximum, `dims` reads it as dimensions, `at` binds it.
using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>>;
class Attrs {
 public:
  Attrs() = default;
  Attrs(std::map<std::string, AttrValue> v) : values_(std::move(v)) {}
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  int64_t get_int(const std::string& key, int64_t dflt) const;
  double get_float(const std::string& key, double dflt) const;
  std::string get_str(const std::string& key, const std::string& dflt) const;
  std::vector<int64_t> get_ints(const std::string& key, std::vector<int64_t> dflt) const;
  Attrs with(const std::string& key, AttrValue v) const;
  /// A list of sizes, some of which may be run-time dimensions.
  Attrs with_dims(const std::string& key, const std::vector<Dim>& dims) const;
  /// The list `key` as dimensions (static ones where it has no symbols).
  std::vector<Dim> dims(const std::string& key) const;
  /// The lists that hold run-time dimensions, by key.
  const std::map<std::string, std::vector<Dim>>& symbolic() const { return symbolic_; }
  /// The attributes with every run-time dimension evaluated at `b`.
  Attrs at(const Binding& b) const;
  const std::map<std::string, AttrValue>& values() const { return values_; }
  bool operator==(const Attrs& o) const { return values_ == o.values_ && symbolic_ == o.symbolic_; }

 private:
  std::map<std::string, AttrValue> values_;
  std::map<std::string, std::vector<Dim>> symbolic_;
};
std::string to_string(const Attrs& a);

struct Op;  // op.h

enum class NodeKind { Var, Constant, Call, Tuple, TupleGetItem, Function };

struct ExprNode {
  NodeKind kind;
  Type type;
  /// Source name: the PyTorch module path ("layer1.0.conv1"), kept by every pass. A node
  /// that a pass merged others into joins their names with " + " ("conv1 + bn1").
  std::string name;
  ExprNode(NodeKind k, Type t, std::string n) : kind(k), type(std::move(t)), name(std::move(n)) {}
  virtual ~ExprNode() = default;
};
using Expr = std::shared_ptr<const ExprNode>;

/// The name of a node that stands for nodes named `names`: their parts, each once and in
/// order, joined with " + ". Names already joined are split first, so {"conv1 + bn1", "bn1"}
/// gives "conv1 + bn1"; empty names add nothing.
std::string join_names(const std::vector<std::string>& names);

template <class T>
const T* as(const Expr& e) {
  return e && e->kind == T::kKind ? static_cast<const T*>(e.get()) : nullptr;
}

/// A function input.
struct VarNode : ExprNode {
  static constexpr NodeKind kKind = NodeKind::Var;
  VarNode(std::string n, TensorType t) : ExprNode(kKind, std::move(t), std::move(n)) {}
};

/// A constant tensor (weights, folded values).
struct ConstantNode : ExprNode {
  static constexpr NodeKind kKind = NodeKind::Constant;
  runtime::NDArray value;
  ConstantNode(runtime::NDArray v, std::string n);
};

struct FunctionNode;

/// A call of an op, or (after FuseOps) of a primitive function: one fused group, which
/// lowers to one kernel. Exactly one of `op` and `fn` is set.
struct CallNode : ExprNode {
  static constexpr NodeKind kKind = NodeKind::Call;
  const Op* op;
  std::shared_ptr<const FunctionNode> fn;
  std::vector<Expr> args;
  Attrs attrs;
  CallNode(const Op* o, std::vector<Expr> a, Attrs at, Type t, std::string n)
      : ExprNode(kKind, std::move(t), std::move(n)),
        op(o),
        args(std::move(a)),
        attrs(std::move(at)) {}
  CallNode(std::shared_ptr<const FunctionNode> f, std::vector<Expr> a, Type t, std::string n)
      : ExprNode(kKind, std::move(t), std::move(n)),
        op(nullptr),
        fn(std::move(f)),
        args(std::move(a)) {}
};

struct TupleNode : ExprNode {
  static constexpr NodeKind kKind = NodeKind::Tuple;
  std::vector<Expr> fields;
  TupleNode(std::vector<Expr> f, Type t, std::string n)
      : ExprNode(kKind, std::move(t), std::move(n)), fields(std::move(f)) {}
};

struct TupleGetItemNode : ExprNode {
  static constexpr NodeKind kKind = NodeKind::TupleGetItem;
  Expr tuple;
  int64_t index;
  TupleGetItemNode(Expr tup, int64_t i, Type t, std::string n)
      : ExprNode(kKind, std::move(t), std::move(n)), tuple(std::move(tup)), index(i) {}
};

/// params are Var nodes; body's type is the function's result (a tensor or a tuple).
struct FunctionNode : ExprNode {
  static constexpr NodeKind kKind = NodeKind::Function;
  std::vector<Expr> params;
  Expr body;
  FunctionNode(std::vector<Expr> p, Expr b, std::string n)
      : ExprNode(kKind, b->type, std::move(n)), params(std::move(p)), body(std::move(b)) {}
};
using Function = std::shared_ptr<const FunctionNode>;

// Checking constructors: each validates its inputs and throws ember::Error naming the node.
Expr var(const std::string& name, TensorType type);
Expr constant(runtime::NDArray value, const std::string& name = "");
/// Runs the op's type relation (and attribute normalisation); errors name `name` and the op.
Expr call(const Op* op, std::vector<Expr> args, Attrs attrs = {}, const std::string& name = "");
Expr call(const std::string& op_name, std::vector<Expr> args, Attrs attrs = {},
          const std::string& name = "");
/// Calls a primitive (fused) function; the argument types must match its parameters.
Expr call_function(Function fn, std::vector<Expr> args, const std::string& name = "");
Expr tuple(std::vector<Expr> fields, const std::string& name = "");
Expr tuple_get_item(Expr tuple, int64_t index, const std::string& name = "");
/// Every free Var in body must be in params (ember::Error naming the missing input).
Function function(std::vector<Expr> params, Expr body, const std::string& name = "main");

/// The symbols of every type in `f` (its parameters and nodes), each once, sorted by name:
/// the order in which a kernel of a group reads them from its shape argument, and the
/// executor numbers a graph's.
std::vector<Symbol> function_symbols(const Function& f);

/// `f` with its symbols bound to `b`: the static graph of one run's sizes (every symbol of
/// `f` must be bound).
Function bind_symbols(const Function& f, const Binding& b);
/// `f` for the runs in which each symbol named in `maxima` is at most that value (and its
/// range's minimum): its types' static shapes shrink with the ranges (a kernel for the
/// short runs of a range is scheduled for them).
Function narrow_symbols(const Function& f, const Binding& maxima);

/// Re-runs every type relation over the graph (rebuilding nothing) and throws on mismatch;
/// passes call it to check what they produced.
void infer_types(const Function& f);

/// The direct inputs of a node: a call's arguments, a tuple's fields, a TupleGetItem's tuple.
std::vector<Expr> inputs_of(const Expr& e);

/// Nodes reachable from `root`, producers first, each once.
std::vector<Expr> post_order(const Expr& root);

/// How many times each node of `f` is read: once per input slot (argument, tuple field,
/// TupleGetItem) that names it, and once more for the function's output. A node is single
/// use (a pass may fold it into its reader) when its count is 1. Unread nodes are absent.
std::map<const ExprNode*, int> use_counts(const Function& f);

/// The readers of each node of `f` (calls, tuples, TupleGetItems), in post order, once per
/// input slot that names the node. The function's output is not a reader.
std::map<const ExprNode*, std::vector<Expr>> consumers(const Function& f);

/// Rebuilds the graph under `root` bottom-up (each node once). For every node, `fn(node,
/// new_inputs)` gets the node and its already rewritten inputs and returns its replacement,
/// or nullptr to keep it (rebuilt with the new inputs if any changed). Sharing is kept.
using RewriteFn = std::function<Expr(const Expr& node, const std::vector<Expr>& new_inputs)>;
Expr rewrite(const Expr& root, const RewriteFn& fn);
Function rewrite(const Function& f, const RewriteFn& fn);

/// The call `node` rebuilt over `new_inputs` where any differs from its arguments, else
/// `node` itself: what a rewrite rule matches on, so that inner rewrites come first.
Expr with_inputs(const Expr& node, const std::vector<Expr>& new_inputs);

/// Same graph shape, ops, attributes, types and constant values; Vars match by position in
/// the function parameters (or by identity outside a function).
bool structural_equal(const Expr& a, const Expr& b);

/// Relay-like text: `%2 = nn.conv2d(%x, meta[0], strides=[1, 1]) /* conv1 */ : float32[...]`.
std::string to_string(const Expr& e);
std::ostream& operator<<(std::ostream& os, const Expr& e);

}  // namespace ember::ir
