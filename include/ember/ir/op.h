#pragma once
/// The op registry: one place per op family that says everything about an op — its
/// attributes (normalised by the type relation), type relation with user-facing errors,
/// fusion pattern kind, and compute rule as a tensor expression.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ember/ir/graph.h"
#include "ember/ir/tensor_expr.h"

namespace ember::ir {

/// Fusion pattern kinds, ordered as in TVM: a lower kind fuses more freely.
enum class OpPattern {
  ElemWise = 0,         // out[i] = f(in[i]) for same-shaped tensors
  Broadcast = 1,        // out[i] = f(in[broadcast(i)])
  Injective = 2,        // each output element reads one input element (reshape, transpose)
  CommReduce = 3,       // reductions (sum, max, mean)
  OutEWiseFusable = 4,  // conv2d, dense: an elementwise epilogue fuses into the output
  Opaque = 8,           // everything else: never fused
};
const char* op_pattern_name(OpPattern p);

/// The checked inputs to a type relation. `fail(...)` throws ember::Error with the node's
/// name and the op in the message.
struct TypeContext {
  const std::string& op_name;
  const std::string& node_name;
  [[noreturn]] void fail(const std::string& msg) const;
};

/// Returns the output type; may also normalise attributes (fill defaults, expand a single
/// padding value to four) by assigning to `attrs`.
using TypeRelation =
    std::function<Type(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx)>;
/// Builds the op's output tensor from input tensors (shapes/dtypes as typed) and the
/// normalised attributes. `out` is the type the relation produced.
using ComputeRule = std::function<Tensor(const std::vector<Tensor>& inputs, const Attrs& attrs,
                                         const TensorType& out)>;

/// Checks the values of an op's constant inputs (known when the graph is built), e.g. take's
/// indices; ctx.fail on a bad value. Runs whenever a call is made (also after passes bind or
/// fold constants), after the type relation normalised `attrs`.
using ConstantCheck =
    std::function<void(const std::vector<Expr>& args, const Attrs& attrs, const TypeContext& ctx)>;

struct Op {
  std::string name;
  int num_inputs = -1;  // -1: variadic
  OpPattern pattern = OpPattern::Opaque;
  TypeRelation type_rel;
  ComputeRule compute;
  /// True for ops whose output is a view of their input (reshape, flatten, squeeze):
  /// the executor aliases memory instead of running a kernel.
  bool is_view = false;
  ConstantCheck check_constants;  // optional
};

/// A custom lowering: builds the kernel of a fused group whose only op is the op it belongs
/// to, in place of compute rule + schedule (nn.attention's online-softmax loop nest, which
/// never holds the score matrix). `group`'s parameters are the kernel's inputs in order; the
/// PrimFunc takes them, then the output. `vector_bits` is the CPU's vector width; `gpu`
/// asks for GPU thread loops. The compute rule stays the reference form.
using LowerRule = std::function<PrimFunc(const Function& group, const std::string& func_name,
                                         int vector_bits, bool gpu)>;
/// Custom lowerings by op name. Ops live in ember_ir but loop-nest builders in
/// ember_passes, so the passes library fills this table from a static initialiser (it is a
/// function-local static: initialisation order does not matter); lower_group consults it.
inline std::map<std::string, LowerRule>& custom_lowerings() {
  static std::map<std::string, LowerRule> table;
  return table;
}

/// Registers an op (at static-initialisation time, from src/ir/ops/*.cc).
const Op* register_op(Op op);
/// Looks an op up by name; ember::Error listing similar names when it is unknown.
const Op* get_op(const std::string& name);
std::vector<std::string> list_ops();

/// Helpers shared by type relations.
/// NumPy broadcasting of two shapes; ctx.fail when incompatible.
std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                      const TypeContext& ctx);
/// Normalises a possibly negative axis against `ndim`; ctx.fail when out of range.
int64_t normalize_axis(int64_t axis, int64_t ndim, const TypeContext& ctx);

}  // namespace ember::ir
