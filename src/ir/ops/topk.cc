// topk(data; k, axis, largest, sorted): the k largest (or smallest) elements along `axis`
// and their positions, as torch.topk: a tuple (values: data's dtype, indices: int64), both
// of data's shape with `axis` cut to k. NaN ranks above every number, as in torch; among
// equal values the lower index comes first. sorted=0 is accepted and still gives sorted
// output (torch leaves the order unspecified then).
//
// RecognizePatterns may set softmax=1 (or log_softmax=1): the op then returns the top k of
// softmax(data, axis) (or log_softmax) without a softmax tensor; see src/passes/lower/topk.cc.
//
// Sorting fits no tensor expression, so topk has no compute rule: it is Opaque (FuseOps
// leaves it alone) and always lowers through its own loop nest (ir::custom_lowerings()).
#include <string>
#include <vector>

#include "ember/support/error.h"
#include "op_util.h"

namespace ember::ir {
namespace {

using namespace ops;

int64_t flag(const Attrs& attrs, const std::string& key, int64_t dflt, const TypeContext& ctx) {
  int64_t v = attrs.get_int(key, dflt);
  if (v != 0 && v != 1) ctx.fail(key + " must be 0 or 1 (False or True), got " + std::to_string(v));
  return v;
}

Type topk_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 1, ctx);
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  if (data.dtype == DType::Bool)
    ctx.fail("data is " + to_string(data) +
             " but topk ranks numbers (float32, float64, int32 or int64); cast it to int32");
  if (data.ndim() == 0)
    ctx.fail("data is a scalar (" + to_string(data) + "); reshape it to [1] to take its top k");
  if (!attrs.has("k")) ctx.fail("needs the attribute k (how many elements to keep)");
  int64_t axis = normalize_axis(attrs.get_int("axis", -1), data.ndim(), ctx);
  int64_t k = attrs.get_int("k", 0), length = data.shape[axis];
  if (k < 1 || k > length)
    ctx.fail("k is " + std::to_string(k) + " but must be between 1 and " + std::to_string(length) +
             ", the length of axis " + std::to_string(axis) + " of " + to_string(data) +
             "; pass a smaller k or another axis");
  int64_t softmax = flag(attrs, "softmax", 0, ctx),
          log_softmax = flag(attrs, "log_softmax", 0, ctx);
  if (softmax && log_softmax) ctx.fail("softmax and log_softmax cannot both be set");
  if (softmax || log_softmax) check_float(data, "data", ctx);
  attrs = attrs.with("k", k)
              .with("axis", axis)
              .with("largest", flag(attrs, "largest", 1, ctx))
              .with("sorted", flag(attrs, "sorted", 1, ctx))
              .with("softmax", softmax)
              .with("log_softmax", log_softmax);
  std::vector<int64_t> shape = data.shape;
  shape[axis] = k;
  return Type::tuple({TensorType{shape, data.dtype}, TensorType{shape, DType::Int64}});
}

// The registry requires a compute rule; topk's is never reached, because lower_group takes
// the custom lowering for a group holding topk alone, and FuseOps never groups it.
Tensor topk_compute(const std::vector<Tensor>&, const Attrs&, const TensorType&) {
  EMBER_CHECK(false, "topk has no tensor-expression form; it lowers only through its own kernel");
  return Tensor();
}

[[maybe_unused]] const Op* kTopk =
    register_op({"topk", 1, OpPattern::Opaque, topk_rel, topk_compute});

}  // namespace
}  // namespace ember::ir
