#pragma once
// Helpers shared by the op families in src/ir/ops/*.cc: argument checks for type relations
// (each failure is a user-facing ember::Error through TypeContext::fail) and small index
// builders for compute rules. Internal to src/ir/ops.
#include <fmt/format.h>

#include <functional>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "ember/ir/op.h"
#include "ember/support/error.h"

namespace ember::ir::ops {

// ---------------------------------------------------------------- type relations

inline void check_arity(const std::vector<Type>& args, size_t n, const TypeContext& ctx) {
  if (args.size() != n)
    ctx.fail("takes " + std::to_string(n) + " input(s) but was given " +
             std::to_string(args.size()));
}

inline const TensorType& tensor_arg(const std::vector<Type>& args, size_t i,
                                    const std::string& what, const TypeContext& ctx) {
  if (args[i].is_tuple) ctx.fail(what + " must be a tensor, not a tuple");
  return args[i].tensor();
}

inline std::string ints_str(const std::vector<int64_t>& v) {
  return fmt::format("[{}]", fmt::join(v, ", "));
}

inline int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

inline void check_float(const TensorType& t, const std::string& what, const TypeContext& ctx) {
  if (!is_float(t.dtype))
    ctx.fail(what + " is " + to_string(t) +
             " but the op needs a float tensor (float32 or float64); cast it to float32");
}

inline void check_rank(const TensorType& t, int64_t rank, const std::string& what,
                       const TypeContext& ctx) {
  if (t.ndim() != rank)
    ctx.fail(what + " must be " + std::to_string(rank) + "-D" + (rank == 4 ? " (NCHW)" : "") +
             " but is " + to_string(t));
}

inline void check_same_dtype(const TensorType& a, const std::string& what_a, const TensorType& b,
                             const std::string& what_b, const TypeContext& ctx) {
  if (a.dtype != b.dtype)
    ctx.fail(what_a + " is " + to_string(a) + " but " + what_b + " is " + to_string(b) +
             "; cast them to the same dtype");
}

// ---------------------------------------------------------------- index tensors

// Argument i, an index tensor: int32 or int64.
inline const TensorType& index_arg(const std::vector<Type>& args, size_t i, const std::string& what,
                                   const TypeContext& ctx) {
  const TensorType& t = tensor_arg(args, i, what, ctx);
  if (!is_int(t.dtype))
    ctx.fail(what + " must be int32 or int64, got " + to_string(t) + "; cast it");
  return t;
}

// Indices known when the graph is built (constants) are checked then: a bad one is an
// error at the node rather than at the first run.
inline void check_constant_indices(const Expr& data, const Expr& indices, int64_t axis,
                                   bool allow_negative, const TypeContext& ctx) {
  auto* c = as<ConstantNode>(indices);
  if (!c || c->value.device().type != runtime::DeviceType::CPU) return;
  int64_t size = data->type.tensor().shape[axis];
  const runtime::NDArray& v = c->value;
  for (int64_t i = 0; i < v.numel(); ++i) {
    int64_t at = v.dtype() == DType::Int64 ? v.data_as<int64_t>()[i] : v.data_as<int32_t>()[i];
    if (at < size && at >= (allow_negative ? -size : 0)) continue;
    ctx.fail("constant index " + std::to_string(at) + " (element " + std::to_string(i) +
             " of the indices) is out of range for axis " + std::to_string(axis) + " of size " +
             std::to_string(size) + " (valid indices are " +
             (allow_negative ? std::to_string(-size) : std::string("0")) + " to " +
             std::to_string(size - 1) + "); fix the indices");
  }
}

// ---------------------------------------------------------------- declared attributes

// The op whose type relation, compute rule, own lowering, constant check or two-anchor rule
// is running on this thread (register_op wraps each of them), or nullptr outside them.
const Op* op_reading_attrs();
// InternalError unless `key` is in the schema of the op whose rule is running: every
// attribute an op reads is one it declares (the readers below all check). Outside an op's
// rules (a kernel helper called directly by a test) there is nothing to check against.
void check_declared(const std::string& key);

// Whether a declared attribute without a default (attention's scale) was given.
inline bool attr_has(const Attrs& a, const std::string& key) {
  check_declared(key);
  return a.has(key);
}
// The value of a declared attribute: Op::attrs filled its default before the relation ran,
// so a typed attribute struct reads it without a default of its own.
inline const AttrValue& declared(const Attrs& a, const std::string& key) {
  check_declared(key);
  auto it = a.values().find(key);
  EMBER_CHECK(it != a.values().end(), "attribute '", key, "' is declared without a default",
              " and was not given; test attr_has first");
  return it->second;
}
inline int64_t attr_int(const Attrs& a, const std::string& key) {
  return std::get<int64_t>(declared(a, key));
}
inline double attr_float(const Attrs& a, const std::string& key) {
  const AttrValue& v = declared(a, key);
  return std::holds_alternative<double>(v) ? std::get<double>(v)
                                           : static_cast<double>(std::get<int64_t>(v));
}
inline std::vector<int64_t> attr_ints(const Attrs& a, const std::string& key) {
  return std::get<std::vector<int64_t>>(declared(a, key));
}
inline std::string attr_str(const Attrs& a, const std::string& key) {
  return std::get<std::string>(declared(a, key));
}
// A declared 0/1 attribute (a flag), checked: ctx.fail on any other value.
inline int64_t attr_flag(const Attrs& a, const std::string& key, const TypeContext& ctx) {
  int64_t v = attr_int(a, key);
  if (v != 0 && v != 1) ctx.fail(key + " must be 0 or 1 (False or True), got " + std::to_string(v));
  return v;
}
inline AttrSpec int_attr(std::string name, int64_t dflt, std::string doc) {
  return {std::move(name), AttrKind::Int, dflt, std::move(doc)};
}
inline AttrSpec float_attr(std::string name, double dflt, std::string doc) {
  return {std::move(name), AttrKind::Float, dflt, std::move(doc)};
}
inline AttrSpec ints_attr(std::string name, std::vector<int64_t> dflt, std::string doc) {
  return {std::move(name), AttrKind::Ints, std::move(dflt), std::move(doc)};
}
inline AttrSpec str_attr(std::string name, std::string dflt, std::string doc) {
  return {std::move(name), AttrKind::Str, std::move(dflt), std::move(doc)};
}
// A reduction's attributes (sum, mean, max, min and the catalog's reductions).
inline std::vector<AttrSpec> reduce_attrs() {
  return {ints_attr("axis", {}, "the axes to reduce; [] reduces every axis"),
          int_attr("keepdims", 0, "1: reduced axes stay, with size 1")};
}
// `op` with its declared attributes.
inline Op with_attrs(Op op, std::vector<AttrSpec> attrs) {
  op.attrs = std::move(attrs);
  return op;
}
// A weight-layout variant keeps its family's name in fusion patterns ("conv2d+activation").
inline Op family(Op op, const std::string& name) {
  op.family = name;
  return op;
}

// ---------------------------------------------------------------- compute rules

inline PrimExpr idx(int64_t v) { return PrimExpr(v); }

// An int32 word of four bytes, byte(j) (an int32 in [0, 255]) at bits 8j to 8j + 7: the
// little-endian word one 32-bit load of the bytes reads (int8 products' operands).
template <typename ByteFn>
PrimExpr word_of_bytes(ByteFn byte) {
  PrimExpr word = make_const(DType::Int32, 0);
  for (int64_t j = 0; j < 4; ++j)
    word = binary(BinaryOp::BitOr, word,
                  binary(BinaryOp::Shl, byte(j), make_const(DType::Int32, 8 * j)));
  return word;
}

// An int32 word of two bfloat16 values, value(0) in its low half and value(1) in its high
// half: the little-endian word one 32-bit load of the pair reads (bfloat16 products'
// operands). A bfloat16 value's bits are the upper half of its float32.
template <typename ValueFn>
PrimExpr word_of_bf16_pair(ValueFn value) {
  auto bits = [&](int64_t j) { return reinterpret(DType::Int32, cast(DType::Float32, value(j))); };
  PrimExpr low =
      binary(BinaryOp::BitAnd, binary(BinaryOp::Shr, bits(0), make_const(DType::Int32, 16)),
             make_const(DType::Int32, 0xFFFF));
  PrimExpr high = binary(BinaryOp::BitAnd, bits(1), make_const(DType::Int32, -65536));
  return binary(BinaryOp::BitOr, low, high);
}

inline std::vector<PrimExpr> as_exprs(const std::vector<PrimVar>& v) {
  return std::vector<PrimExpr>(v.begin(), v.end());
}

// Index of `t` for output index `i` under NumPy broadcasting: `t`'s dimensions align with
// the trailing ones of `i`, and size-1 dimensions read 0.
inline std::vector<PrimExpr> broadcast_index(const std::vector<int64_t>& t_shape,
                                             const std::vector<PrimExpr>& i) {
  size_t offset = i.size() - t_shape.size();
  std::vector<PrimExpr> out;
  for (size_t d = 0; d < t_shape.size(); ++d)
    out.push_back(t_shape[d] == 1 ? idx(0) : i[offset + d]);
  return out;
}

inline std::vector<PrimExpr> broadcast_index(const Tensor& t, const std::vector<PrimVar>& i) {
  return broadcast_index(t.shape(), as_exprs(i));
}

// The axis of a gather-like op (gather, scatter) whose `indices` have data's rank, checked:
// no larger than data along the other axes, and data not empty along it where there are
// indices. `done` names what the op does along the axis ("gathered", "scattered").
inline int64_t indexed_axis(const TensorType& data, const TensorType& indices, const Attrs& attrs,
                            const std::string& done, const TypeContext& ctx) {
  const int64_t axis = normalize_axis(attr_int(attrs, "axis"), data.ndim(), ctx);
  for (int64_t d = 0; d < data.ndim(); ++d)
    if (d != axis && indices.shape[d] > data.shape[d])
      ctx.fail("indices " + to_string(indices) + " are larger than data " + to_string(data) +
               " along axis " + std::to_string(d) + ", which is not the " + done + " axis " +
               std::to_string(axis));
  if (data.shape[axis] == 0 && numel(indices.shape) > 0)
    ctx.fail("data " + to_string(data) + " is empty along axis " + std::to_string(axis) +
             ", along which indices are " + done);
  return axis;
}

// The kernel of a group that is one call of an op with its own lowering (nn.attention,
// nn.grouped_matmul): `f` gets a buffer per group parameter, and the buffer each argument of
// `call` reads is returned, in argument order.
inline std::vector<Buffer> single_call_buffers(const Function& group, const CallNode* call,
                                               PrimFunc& f) {
  std::map<const ExprNode*, Buffer> buffer_of;
  for (size_t i = 0; i < group->params.size(); ++i) {
    const TensorType& pt = group->params[i]->type.tensor();
    f.params.push_back(make_buffer("p" + std::to_string(i), pt.dtype, pt.shape));
    buffer_of[group->params[i].get()] = f.params.back();
  }
  f.num_inputs = static_cast<int>(f.params.size());
  std::vector<Buffer> args;
  for (const Expr& a : call->args) {
    auto it = buffer_of.find(a.get());
    EMBER_CHECK(it != buffer_of.end(), call->op->name, " in ", group->name,
                " reads a non-parameter");
    args.push_back(it->second);
  }
  return args;
}

// Registers `op` as a view of its input (the executor aliases memory instead of running it).
inline Op view_op(Op op) {
  op.is_view = true;
  return op;
}

}  // namespace ember::ir::ops
