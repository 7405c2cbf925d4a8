#pragma once
/// The op registry: one place per op (its file under src/ir/ops/) that says everything about
/// it — its attribute schema (defaults and kinds, also read by Python), type relation with
/// user-facing errors, fusion traits (pattern kind, two-anchor pairs, family name), compute
/// rule as a tensor expression, and optionally its own lowering (a loop nest).
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ember/ir/graph.h"
#include "ember/ir/tensor_expr.h"

namespace ember::passes {
struct MachineModel;  // passes/machine_model.h: what a custom lowering sizes its tiles by
}

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

/// A custom lowering: builds the kernel of a fused group whose only op is the op it belongs
/// to, in place of compute rule + schedule (nn.attention's online-softmax loop nest, which
/// never holds the score matrix). `group`'s parameters are the kernel's inputs in order; the
/// PrimFunc takes them, then the output. `machine` is the target CPU's model (vector width,
/// registers), the same one the schedules read; `gpu` asks for GPU thread loops. The compute
/// rule stays the reference form.
using LowerRule = std::function<PrimFunc(const Function& group, const std::string& func_name,
                                         const passes::MachineModel& machine, bool gpu)>;

/// A two-anchor pattern: called on the first anchor of a group (`first`, a call of this op)
/// and a later anchor `second` that reads its result; returns the name of the pattern under
/// which one kernel computes both (schedule_two_anchors in cpu_template_two_anchors.cc), or ""
/// when the pair has no such schedule.
using TwoAnchorRule = std::function<std::string(const CallNode& first, const CallNode& second)>;

/// An attribute in an op's schema. Before the type relation runs, a missing attribute gets
/// its default (an error naming the node when it is `required`; left to the relation when it
/// has neither, as attention's scale = 1 / sqrt(E)) and a present one must have the declared
/// kind. Python reads the schema (Op.attrs), so its wrappers cannot drift.
enum class AttrKind { Int, Float, Str, Ints };
const char* attr_kind_name(AttrKind k);
struct AttrSpec {
  std::string name;
  AttrKind kind;
  std::optional<AttrValue> dflt;
  std::string doc;  // what it means, for error messages and Python's schema
  bool required = false;
};
/// An attribute without a default: "needs the attribute <name> (<doc>)" names the node.
AttrSpec required_attr(std::string name, AttrKind kind, std::string doc);

/// Everything about an op, registered once from its file under src/ir/ops/.
struct Op {
  std::string name;
  int num_inputs = -1;  // -1: variadic
  /// Fusion trait: ElemWise/Broadcast/Injective fuse freely, OutEWiseFusable and CommReduce
  /// anchor a kernel, Opaque is never fused.
  OpPattern pattern = OpPattern::Opaque;
  TypeRelation type_rel;
  /// The reference compute rule; an op with `lower` and no tensor-expression form (topk)
  /// leaves it empty.
  ComputeRule compute;
  /// True for ops whose output is a view of their input (reshape, flatten, squeeze):
  /// the executor aliases memory instead of running a kernel.
  bool is_view = false;
  ConstantCheck check_constants;  // optional
  /// Optional: the op's own kernel when it is alone in its group (see LowerRule).
  LowerRule lower;
  /// Whether `lower` builds kernels over run-time sizes (passes::KernelSymbols); a group of
  /// run-time sizes is refused otherwise (issue 44).
  bool lower_takes_run_time_sizes = false;
  /// Optional fusion trait: the anchors this op (as the first anchor) pairs with.
  TwoAnchorRule two_anchor;
  /// The name fusion patterns use ("conv2d" for nn.conv2d and nn.conv2d_blocked); empty:
  /// bare_op_name(name).
  std::string family;
  /// Declared attributes (may be empty: the relation reads what it needs).
  std::vector<AttrSpec> attrs;
};

/// The op's type relation, also over run-time dimensions (symbolic.h): where `args` or
/// `attrs` hold symbols, the relation runs at probe_bindings and each result dimension (and
/// each normalised size attribute) is fitted; one that fits no run-time dimension, or a
/// probe that the relation rejects, is a ctx.fail naming the op, the dimension and the sizes.
Type run_relation(const Op& op, const std::vector<Type>& args, Attrs& attrs,
                  const TypeContext& ctx);

/// "nn.relu" -> "relu": the op's name without its namespace (kernel and stage names, fusion
/// pattern names, "did you mean" suggestions).
std::string bare_op_name(const std::string& name);
/// The name fusion patterns use for `op` (Op::family, or its bare name).
std::string op_family(const Op& op);

/// The call `e` when it is a call of the op named `op`, else nullptr.
const CallNode* op_call(const Expr& e, const std::string& op);

/// The value of `e` when it is a one-element constant (`floats_only`: of a float dtype),
/// else none.
std::optional<double> scalar_constant(const Expr& e, bool floats_only = false);

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

/// The vectors in a column tile of nn.grouped_matmul's CPU kernel (grouped_matmul.cc), the
/// panel width AlterOpLayout packs a constant weight for: 4 with 32 vector registers
/// (AVX-512), 2 with 16 (AVX2).
int64_t grouped_matmul_tile_vectors(const passes::MachineModel& machine);

/// The most window taps the depthwise form of nn.conv2d_u8s8 sums exactly (nn_conv.cc: in
/// float32, each uint8 x int8 product at most 255 * 128 in magnitude, so a window sums
/// below 2^24): 514.
inline constexpr int64_t kU8S8DepthwiseMaxTaps = (int64_t{1} << 24) / (255 * 128);

}  // namespace ember::ir
