// topk(data; k, axis, largest, sorted): the k largest (or smallest) elements along `axis`
// and their positions, as torch.topk: a tuple (values: data's dtype, indices: int64), both
// of data's shape with `axis` cut to k. NaN ranks above every number, as in torch; among
// equal values the lower index comes first. sorted=0 is accepted and still gives sorted
// output (torch leaves the order unspecified then).
//
// RecognizePatterns may set softmax=1 (or log_softmax=1): the op then returns the top k of
// softmax(data, axis) (or log_softmax) without a softmax tensor; see the kernel below.
//
// Sorting fits no tensor expression, so topk has no compute rule: it is Opaque (FuseOps
// leaves it alone) and always lowers through its own loop nest, `lower_topk` below.
//
// The kernel: selection by insertion into a small sorted list, one row at a time.
//
// A row is every element along `axis` for one position of the other axes; rows run in
// parallel on the CPU and one per thread on a GPU. Each row keeps its best k (value,
// index) pairs sorted, best first. The first k elements are inserted unconditionally;
// after that an element is compared with the k-th best and, only if it beats it, inserted
// by shifting the worse entries down one slot. Cost per row: n comparisons plus O(k) per
// accepted element, so O(n + a k) for `a` acceptances; a is small for typical data (about
// k log(n / k) for random order) and n - k at worst (input already in rank order), where it
// becomes O(n k). k is small in practice (classifier top-5, beam widths), so this beats a
// sort of the whole row and needs no scratch memory of size n.
//
// The list lives in local (stack or register) buffers when k <= kMaxLocalK; a larger k
// keeps it in the output row itself, so no k-sized stack allocation can overflow.
//
// Order: "a beats b" is a > b (largest) or a < b (smallest), with NaN ranked above every
// number as torch does (first for largest, last for smallest). An element only moves ahead
// of entries it strictly beats, and elements arrive in index order, so among equal values
// the lower index comes first (-0.0 and 0.0 are equal).
//
// softmax=1 / log_softmax=1 (set by RecognizePatterns for topk(softmax(x))): the kernel
// first takes the row's max m and s = sum(exp(x - m)) (NaN-propagating, as softmax), then
// selects on x itself: softmax is monotonic, so the k best logits are the k best
// probabilities, and only those k winners are turned into exp(x - m) / s (or x - m - log s).
// No softmax tensor is written or read. (Logits whose probabilities round to the same value
// keep their logit order.) Along a middle axis (inner positions after it), the rows of up to
// a vector of neighbouring inner positions take m and s together, as vectors over those
// positions (as the softmax kernel does), so exp is never computed one strided lane at a time.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ember/ir/prim_math.h"
#include "ember/passes/machine_model.h"
#include "ember/support/error.h"
#include "op_util.h"

namespace ember::ir {
namespace {

using namespace ops;

Type topk_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 1, ctx);
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  if (data.dtype == DType::Bool)
    ctx.fail("data is " + to_string(data) +
             " but topk ranks numbers (float32, float64, int32 or int64); cast it to int32");
  if (data.ndim() == 0)
    ctx.fail("data is a scalar (" + to_string(data) + "); reshape it to [1] to take its top k");
  int64_t axis = normalize_axis(attr_int(attrs, "axis"), data.ndim(), ctx);
  int64_t k = attr_int(attrs, "k"), length = data.shape[axis];
  if (k < 1 || k > length)
    ctx.fail("k is " + std::to_string(k) + " but must be between 1 and " + std::to_string(length) +
             ", the length of axis " + std::to_string(axis) + " of " + to_string(data) +
             "; pass a smaller k or another axis");
  int64_t softmax = attr_flag(attrs, "softmax", ctx),
          log_softmax = attr_flag(attrs, "log_softmax", ctx);
  if (softmax && log_softmax) ctx.fail("softmax and log_softmax cannot both be set");
  if (softmax || log_softmax) check_float(data, "data", ctx);
  attrs = attrs.with("k", k)
              .with("axis", axis)
              .with("largest", attr_flag(attrs, "largest", ctx))
              .with("sorted", attr_flag(attrs, "sorted", ctx))
              .with("softmax", softmax)
              .with("log_softmax", log_softmax);
  std::vector<int64_t> shape = data.shape;
  shape[axis] = k;
  return Type::tuple({TensorType{shape, data.dtype}, TensorType{shape, DType::Int64}});
}

// ---------------------------------------------------------------- the kernel

constexpr int64_t kMaxLocalK = 256;     // larger k: the sorted list lives in the output row
constexpr int64_t kRowsPerBlock = 128;  // GPU threads per block, one row each

Stmt loop(const std::string& name, PrimExpr begin, PrimExpr end, ForKind kind,
          const std::function<Stmt(PrimExpr)>& body) {
  PrimVar v(name);
  return for_loop(v, begin, end - begin, kind, body(v));
}

// red[0] = op(init, value(0), ..., value(n - 1)) as a scalar loop: the softmax kernel's form,
// which the CPU code generator vectorizes with several accumulators (is_rolled_scalar_sum),
// summing in the softmax kernel's order, so a fused topk matches the unfused build.
Stmt row_reduce(const Buffer& red, int64_t n, PrimExpr init,
                const std::function<PrimExpr(PrimExpr, PrimExpr)>& op,
                const std::function<PrimExpr(PrimExpr)>& value) {
  return seq({store(red, 0, init), loop("j", 0, n, ForKind::Serial, [&](PrimExpr j) {
                return store(red, 0, op(load(red, 0), value(j)));
              })});
}

// The kernel of one topk call, built in phases (the essay above): the row's selection
// (select_best), the winners written out (finish), then the statistics of a folded softmax
// (per row, or per block of neighbouring rows) and the parallel loop over the rows.
struct TopkKernel {
  TopkKernel(const Function& group, const std::string& func_name,
             const passes::MachineModel& machine, bool gpu);
  Stmt select_best();
  Stmt finish();
  Stmt row_offsets(Stmt s);
  int64_t statistics_block() const;
  Stmt blocked_rows(Stmt body, int64_t block);
  Stmt with_row_statistics(Stmt body);
  Stmt over_rows(Stmt body);

  PrimExpr beat(const PrimExpr& a, const PrimExpr& b) const;
  PrimExpr elem(const PrimExpr& j) const { return load(in, PrimExpr(in0) + j * inner); }
  PrimExpr out_at(const PrimExpr& s) const { return PrimExpr(out0) + s * inner; }
  PrimExpr slot(const PrimExpr& s) const { return local ? s : out_at(s); }
  Stmt insert(const PrimExpr& x, const PrimExpr& j, const PrimExpr& m);
  PrimExpr result(const PrimExpr& v) const;

  const passes::MachineModel& machine;  // lower_topk's, which outlives the kernel
  const bool gpu;
  DType t = DType::Float32;
  int64_t axis = 0, k = 0, n = 0, outer = 1, inner = 1, rows = 0;
  bool largest = true, softmax = false, log_softmax = false, local = true;
  PrimFunc f;
  Buffer in, values, indices, best_v, best_i, pos;
  PrimVar row{"row"}, in0{"in0"}, out0{"out0"};
  PrimVar mx, total;  // a folded softmax's row max and sum (log_softmax: the sum's log)
  std::vector<Buffer> scratch;
};

TopkKernel::TopkKernel(const Function& group, const std::string& func_name,
                       const passes::MachineModel& machine, bool gpu)
    : machine(machine), gpu(gpu) {
  auto* c = as<CallNode>(group->body);
  EMBER_CHECK(c && c->op && c->op->name == "topk" && group->params.size() == 1 &&
                  c->args.size() == 1 && c->args[0] == group->params[0],
              "group ", group->name, " is not a single topk call on its parameter");
  const TensorType& in_t = group->params[0]->type.tensor();
  const TensorType& out_t = c->type.fields.at(0);
  t = in_t.dtype;
  mx = PrimVar("row_max", t);
  total = PrimVar("row_sum", t);
  axis = attr_int(c->attrs, "axis");
  k = attr_int(c->attrs, "k");
  largest = attr_int(c->attrs, "largest") != 0;
  softmax = attr_int(c->attrs, "softmax") != 0;
  log_softmax = attr_int(c->attrs, "log_softmax") != 0;
  n = in_t.shape.at(axis);
  for (int64_t d = 0; d < in_t.ndim(); ++d) {
    if (d < axis) outer *= in_t.shape[d];
    if (d > axis) inner *= in_t.shape[d];
  }
  rows = outer * inner;
  f.name = func_name;
  in = make_buffer("p0", t, in_t.shape);
  values = make_buffer("topk_values", t, out_t.shape);
  indices = make_buffer("topk_indices", DType::Int64, out_t.shape);
  f.params = {in, values, indices};
  f.num_inputs = 1;
  // The sorted list: local buffers, or the output row itself for a large k.
  local = k <= kMaxLocalK;
  best_v = local ? make_buffer("best_values", t, {k}, BufferScope::Local) : values;
  best_i = local ? make_buffer("best_indices", DType::Int64, {k}, BufferScope::Local) : indices;
  pos = make_buffer("insert_at", DType::Int64, {1}, BufferScope::Local);
  scratch.push_back(pos);
  if (local) scratch.insert(scratch.end(), {best_v, best_i});
}

PrimExpr TopkKernel::beat(const PrimExpr& a, const PrimExpr& b) const {
  PrimExpr strict = largest ? a > b : a < b;
  if (!is_float(t)) return strict;
  PrimExpr nan_first = largest ? logical_and(is_nan(a), logical_not(is_nan(b)))
                               : logical_and(is_nan(b), logical_not(is_nan(a)));
  return logical_or(strict, nan_first);
}

// Inserts (x, j) into the list whose slot m is free (or holds the entry to drop).
Stmt TopkKernel::insert(const PrimExpr& x, const PrimExpr& j, const PrimExpr& m) {
  Stmt shift = loop("t", 0, m, ForKind::Serial, [&](PrimExpr i) {
    PrimExpr s = m - i;
    return if_then_else(
        beat(x, load(best_v, slot(s - 1))),
        seq({store(best_v, slot(s), load(best_v, slot(s - 1))),
             store(best_i, slot(s), load(best_i, slot(s - 1))), store(pos, 0, s - 1)}));
  });
  PrimExpr at = slot(load(pos, 0));
  return seq({store(pos, 0, m), shift, store(best_v, at, x), store(best_i, at, j)});
}

Stmt TopkKernel::select_best() {
  PrimVar x("x", t);
  Stmt fill = loop("j", 0, k, ForKind::Serial,
                   [&](PrimExpr j) { return let_stmt(x, elem(j), insert(x, j, j)); });
  Stmt rest = loop("j", k, n, ForKind::Serial, [&](PrimExpr j) {
    return let_stmt(x, elem(j),
                    if_then_else(beat(x, load(best_v, slot(k - 1))), insert(x, j, k - 1)));
  });
  return n > k ? seq({fill, rest}) : fill;
}

// A winner as written out: a probability when the softmax was folded in.
PrimExpr TopkKernel::result(const PrimExpr& v) const {
  if (softmax) return exp_nonpositive(v - mx) / total;
  if (log_softmax) return v - mx - total;
  return v;
}

// The k winners to the output (nothing to do when the list is the output row already).
Stmt TopkKernel::finish() {
  if (!local && !softmax && !log_softmax) return Stmt();
  return loop("s", 0, k, ForKind::Serial, [&](PrimExpr s) {
    Stmt v = store(values, out_at(s), result(load(best_v, slot(s))));
    return local ? seq({v, store(indices, out_at(s), load(best_i, slot(s)))}) : v;
  });
}

Stmt TopkKernel::row_offsets(Stmt s) {
  PrimExpr r_outer = inner == 1 ? PrimExpr(row) : PrimExpr(row) / inner;
  PrimExpr r_inner = inner == 1 ? PrimExpr(int64_t{0}) : PrimExpr(row) % inner;
  return let_stmt(in0, r_outer * (n * inner) + r_inner,
                  let_stmt(out0, r_outer * (k * inner) + r_inner, std::move(s)));
}

// Rows along a middle axis (inner > 1) that are neighbours in memory: `block` of them take
// their statistics together, as vectors over the inner positions (the softmax kernel's
// form), so exp runs as vectors; a row alone would run it one lane at a time, strided. All
// inner positions are one block where they fit a vector (3, 6 or 12 lanes beat 1, 2 or 4).
int64_t TopkKernel::statistics_block() const {
  if (!(softmax || log_softmax) || gpu || inner <= 1) return 1;
  const int64_t lanes = machine.lanes(t);
  if (inner <= lanes) return inner;
  for (int64_t b = lanes; b > 1; b /= 2)
    if (inner % b == 0) return b;
  return 1;
}

// The parallel loop over blocks of `block` neighbouring rows: their max and sum of exp as
// vectors, then each row's selection (`body`, in scope of its statistics).
Stmt TopkKernel::blocked_rows(Stmt body, int64_t block) {
  // The max in `parts` interleaved partial maxima (folded at the end): one chain of n
  // dependent max operations would be the kernel's critical path on short rows.
  const int64_t parts = n >= 8 ? 4 : 1;
  Buffer bmax = make_buffer("block_max", t, {parts * block}, BufferScope::Local);
  Buffer bsum = make_buffer("block_sum", t, {block}, BufferScope::Local);
  PrimVar rb("row_block"), b0("b0");
  auto at = [&](PrimExpr j, PrimExpr w) { return load(in, PrimExpr(b0) + j * inner + w); };
  auto lanes_loop = [&](auto fn) { return loop("w", 0, block, ForKind::Vectorized, fn); };
  auto over = [&](PrimExpr begin, PrimExpr end, auto fn) {
    return loop("j", begin, end, ForKind::Serial,
                [&](PrimExpr j) { return lanes_loop([&](PrimExpr w) { return fn(j, w); }); });
  };
  auto take_max = [&](PrimExpr part, PrimExpr value, PrimExpr w) {
    PrimExpr i = part * block + w;
    return store(bmax, i, max(load(bmax, i), value));
  };
  const int64_t body_end = n / parts * parts;
  Stmt max_stats = seq(
      {loop("p", 0, parts, ForKind::Unrolled,
            [&](PrimExpr p) {
              return lanes_loop(
                  [&](PrimExpr w) { return store(bmax, p * block + w, make_const(t, -INFINITY)); });
            }),
       loop("j.o", 0, body_end / parts, ForKind::Serial,
            [&](PrimExpr jo) {
              return loop("p", 0, parts, ForKind::Unrolled, [&](PrimExpr p) {
                return lanes_loop(
                    [&](PrimExpr w) { return take_max(p, at(jo * parts + p, w), w); });
              });
            }),
       over(body_end, n, [&](PrimExpr j, PrimExpr w) { return take_max(0, at(j, w), w); }),
       loop("p", 1, parts, ForKind::Unrolled, [&](PrimExpr p) {
         return lanes_loop([&](PrimExpr w) { return take_max(0, load(bmax, p * block + w), w); });
       })});
  Stmt stats =
      seq({max_stats, lanes_loop([&](PrimExpr w) { return store(bsum, w, make_const(t, 0.0)); }),
           over(0, n, [&](PrimExpr j, PrimExpr w) {
             return store(bsum, w, load(bsum, w) + exp_nonpositive(at(j, w) - load(bmax, w)));
           })});
  if (log_softmax)  // one vector log for the block, not a scalar log per winner
    stats =
        seq({stats, lanes_loop([&](PrimExpr w) { return store(bsum, w, log(load(bsum, w))); })});
  for (const Buffer& b : scratch) body = allocate(b, body);
  Stmt rows_of_block = loop("w", 0, block, ForKind::Serial, [&](PrimExpr w) {
    return let_stmt(row, PrimExpr(rb) * block + w,
                    row_offsets(let_stmt(mx, load(bmax, w), let_stmt(total, load(bsum, w), body))));
  });
  PrimExpr first = PrimExpr(rb) * block;
  Stmt blk = let_stmt(b0, first / inner * (n * inner) + first % inner, seq({stats, rows_of_block}));
  return for_loop(rb, 0, rows / block, ForKind::Parallel, allocate(bmax, allocate(bsum, blk)));
}

// A row's max and sum of exp before its selection (log_softmax: the sum's log, once a row).
Stmt TopkKernel::with_row_statistics(Stmt body) {
  Buffer red = make_buffer("row_reduce", t, {1}, BufferScope::Local);
  scratch.push_back(red);
  auto maximum = [](PrimExpr a, PrimExpr b) { return max(a, b); };
  auto plus = [](PrimExpr a, PrimExpr b) { return a + b; };
  Stmt take_max =
      row_reduce(red, n, make_const(t, -INFINITY), maximum, [&](PrimExpr j) { return elem(j); });
  Stmt take_sum = row_reduce(red, n, make_const(t, 0.0), plus,
                             [&](PrimExpr j) { return exp_nonpositive(elem(j) - mx); });
  PrimExpr row_sum = load(red, 0);
  body = let_stmt(total, log_softmax ? log(row_sum) : row_sum, body);
  return seq({take_max, let_stmt(mx, load(red, 0), seq({take_sum, body}))});
}

// One row per parallel iteration on the CPU, one per thread on a GPU.
Stmt TopkKernel::over_rows(Stmt body) {
  for (const Buffer& b : scratch) body = allocate(b, body);
  body = row_offsets(body);
  if (!gpu) return for_loop(row, 0, rows, ForKind::Parallel, body);
  const int64_t threads = std::min(rows, kRowsPerBlock);
  PrimVar block("block"), thread("thread");
  PrimExpr r = PrimExpr(block) * threads + thread;
  body = let_stmt(row, r, rows % threads ? if_then_else(r < PrimExpr(rows), body) : body);
  return for_loop(block, 0, (rows + threads - 1) / threads, ForKind::GpuBlockX,
                  for_loop(thread, 0, threads, ForKind::GpuThreadX, body));
}

// Builds the kernel of a group holding one topk call on its parameter (Op::lower).
PrimFunc lower_topk(const Function& group, const std::string& func_name,
                    const passes::MachineModel& machine, bool gpu) {
  TopkKernel kernel(group, func_name, machine, gpu);
  Stmt finish = kernel.finish();
  Stmt body = finish ? seq({kernel.select_best(), finish}) : kernel.select_best();
  if (int64_t block = kernel.statistics_block(); block > 1)
    kernel.f.body = kernel.blocked_rows(body, block);
  else if (kernel.softmax || kernel.log_softmax)
    kernel.f.body = kernel.over_rows(kernel.with_row_statistics(body));
  else
    kernel.f.body = kernel.over_rows(body);
  verify(kernel.f);
  return kernel.f;
}

const Op* register_topk() {
  Op op{"topk", 1, OpPattern::Opaque, topk_rel, nullptr};
  op.lower = lower_topk;
  op.attrs = {required_attr("k", AttrKind::Int, "how many elements to keep"),
              int_attr("axis", -1, "the axis to rank along"),
              int_attr("largest", 1, "1: the largest, 0: the smallest"),
              int_attr("sorted", 1, "the output is always sorted"),
              int_attr("softmax", 0, "1: the top k of softmax(data) (set by RecognizePatterns)"),
              int_attr("log_softmax", 0, "1: the top k of log_softmax(data)")};
  return register_op(std::move(op));
}
[[maybe_unused]] const Op* kTopk = register_topk();

}  // namespace
}  // namespace ember::ir
