// cumsum(data; axis): the running sum along `axis`, as torch.cumsum: out[..., j, ...] =
// data[..., 0, ...] + ... + data[..., j, ...], of data's shape. Float data keeps its dtype;
// integer and bool data give int64 (torch's promotion). On the CPU the running sum of float
// data is kept in float64 and rounded at each store, as torch's CPU kernel does, so a long
// float32 row does not drift (torch.cumsum of float32 [1e8, 1, -1e8] ends in 1, not 0); on a
// GPU it is kept in the data's dtype, as torch's CUDA kernel does.
//
// A scan is sequential along its axis: its only tensor expression (a masked sum over the
// whole axis for every output) does quadratic work, so cumsum has no compute rule. It is
// Opaque (FuseOps leaves it alone) and always lowers through its own loop nest,
// `lower_cumsum` below.
//
// The kernel sees the data as [outer, n, inner] (the axes before, along and after `axis`);
// a row is the n elements of one (outer, inner) position, scanned in index order. Rows are
// independent: in parallel on the CPU, one per thread on a GPU. Along a middle axis
// (inner > 1) the CPU takes a block of `lanes` neighbouring rows (consecutive inner
// positions, contiguous in memory) at a time, with one running sum per lane, so each step
// along the axis is one vector load, add and store instead of strided scalar ones.
#include <algorithm>
#include <string>
#include <vector>

#include "ember/passes/machine_model.h"
#include "ember/support/error.h"
#include "op_util.h"

namespace ember::ir {
namespace {

using namespace ops;

constexpr int64_t kRowsPerBlock = 128;  // GPU threads per block, one row each

Type cumsum_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 1, ctx);
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  if (data.ndim() == 0)
    ctx.fail("data is a scalar (" + to_string(data) + "); reshape it to [1] to sum along an axis");
  attrs = attrs.with("axis", normalize_axis(attr_int(attrs, "axis"), data.ndim(), ctx));
  return TensorType{data.shape, is_float(data.dtype) ? data.dtype : DType::Int64};
}

// The widest vector of running sums (a power of two) that divides `inner`; 1 on a GPU or
// along the last axis.
int64_t scan_lanes(int64_t inner, DType acc, const passes::MachineModel& machine, bool gpu) {
  if (gpu || inner <= 1) return 1;
  for (int64_t b = machine.lanes(acc); b > 1; b /= 2)
    if (inner % b == 0) return b;
  return 1;
}

// Builds the kernel of a group holding one cumsum call on its parameter (Op::lower).
PrimFunc lower_cumsum(const Function& group, const std::string& func_name,
                      const passes::MachineModel& machine, bool gpu) {
  auto* c = as<CallNode>(group->body);
  EMBER_CHECK(c && c->op && c->op->name == "cumsum" && group->params.size() == 1 &&
                  c->args.size() == 1 && c->args[0] == group->params[0],
              "group ", group->name, " is not a single cumsum call on its parameter");
  const TensorType& in_t = group->params[0]->type.tensor();
  const TensorType& out_t = c->type.tensor();
  const int64_t axis = attr_int(c->attrs, "axis"), n = in_t.shape.at(axis);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < in_t.ndim(); ++d) {
    if (d < axis) outer *= in_t.shape[d];
    if (d > axis) inner *= in_t.shape[d];
  }
  const DType acc_t = !is_float(out_t.dtype) ? DType::Int64 : gpu ? out_t.dtype : DType::Float64;
  const int64_t lanes = scan_lanes(inner, acc_t, machine, gpu);
  const ForKind vec = lanes > 1 ? ForKind::Vectorized : ForKind::Serial;

  PrimFunc f;
  f.name = func_name;
  Buffer in = make_buffer("p0", in_t.dtype, in_t.shape);
  Buffer out = make_buffer("cumsum", out_t.dtype, out_t.shape);
  f.params = {in, out};
  f.num_inputs = 1;

  // One block of `lanes` rows starting at element `base`: zero the sums, then step along
  // the axis, adding each element to its lane's sum and storing the sum.
  Buffer acc = make_buffer("running_sum", acc_t, {lanes}, BufferScope::Local);
  PrimVar base("base"), j("j"), w0("w"), w("w");
  PrimExpr at = PrimExpr(base) + PrimExpr(j) * inner + w;
  Stmt step = seq({store(acc, w, load(acc, w) + cast(acc_t, load(in, at))),
                   store(out, at, cast(out_t.dtype, load(acc, w)))});
  Stmt scan =
      allocate(acc, seq({for_loop(w0, 0, lanes, vec, store(acc, w0, make_const(acc_t, 0))),
                         for_loop(j, 0, n, ForKind::Serial, for_loop(w, 0, lanes, vec, step))}));

  // Block b holds rows b * lanes ...; row r is position (r / inner, r % inner).
  const int64_t blocks = outer * inner / lanes;
  PrimVar b("row_block");
  PrimExpr first = PrimExpr(b) * lanes;
  PrimExpr start = inner == 1 ? first * n : first / inner * (n * inner) + first % inner;
  Stmt body = let_stmt(base, start, scan);
  if (!gpu) {
    f.body = for_loop(b, 0, blocks, ForKind::Parallel, body);
  } else {
    const int64_t threads = std::max<int64_t>(1, std::min(blocks, kRowsPerBlock));
    PrimVar block("block"), thread("thread");
    PrimExpr r = PrimExpr(block) * threads + thread;
    body = let_stmt(b, r, blocks % threads ? if_then_else(r < PrimExpr(blocks), body) : body);
    f.body = for_loop(block, 0, (blocks + threads - 1) / threads, ForKind::GpuBlockX,
                      for_loop(thread, 0, threads, ForKind::GpuThreadX, body));
  }
  verify(f);
  return f;
}

const Op* register_cumsum() {
  Op op{"cumsum", 1, OpPattern::Opaque, cumsum_rel, nullptr};
  op.lower = lower_cumsum;
  op.attrs = {required_attr("axis", AttrKind::Int, "the axis to sum along (torch's dim)")};
  return register_op(std::move(op));
}
[[maybe_unused]] const Op* kCumsum = register_cumsum();

}  // namespace
}  // namespace ember::ir
