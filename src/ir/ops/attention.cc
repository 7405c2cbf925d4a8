// nn.attention(q, k, v[, mask]; scale, causal): softmax(q k^T * scale + mask) v as one op,
// torch.nn.functional.scaled_dot_product_attention's semantics.
//
//   q [..., L, E], k [..., S, E], v [..., S, Ev]  (the same batch dimensions "...")
//   mask (optional) broadcastable to [..., L, S]: bool keeps the True positions (the others
//        score -inf), a float mask is added to the scores
//   causal  query i attends to keys j <= i (top-left aligned, as torch's is_causal)
//   scale   defaults to 1 / sqrt(E)
//   -> [..., L, Ev]
//
// The compute rule below is the reference form (scores, row max, exp, row sum, weighted sum
// of v); it materialises the scores and is what the GPU path uses. On the CPU the op is
// lowered by its own loop nest (`lower_attention` below, Op::lower): online softmax over key
// blocks that never holds the L x S score matrix.
//
// The CPU kernel: flash-attention style online softmax in Ember's loop IR.
//
// softmax(S) V needs each row's max and sum over all keys before any probability is known.
// Online softmax removes that dependency: walking the keys block by block, a row keeps its
// running max m and sum l of exp(s - m) and an output accumulator O = sum exp(s - m) v.
// When a block raises the max to m', everything so far is rescaled by exp(m - m'):
//   l = l * exp(m - m') + rowsum(exp(S_blk - m')),  O = O * exp(m - m') + exp(S_blk - m') V_blk,
// and O / l at the end is exactly softmax(S) V. Only one (keys x rows) score tile and the
// (rows x Ev) accumulator live at a time, on the stack of the thread that owns the (batch,
// query block); the L x S score matrix never exists.
//
// The scores are transposed so that the queries run along the vectors (`CpuKernel`): per
// task (a batch entry and a block of BL queries, BL whole vectors) Q^T [E, BL] is gathered
// once, scaled; per key block of BS keys
//   S^T = K_blk Q^T          register tiles of R keys x VB query vectors: per e, R broadcasts
//                            from K's rows and VB loads of Q^T feed R*VB FMAs; the epilogue
//                            masks the tile and folds it into each query's block max
//                            (vertical: a vector max, no horizontal reduction);
//   alpha = exp(m - m')      all queries as vectors;
//   P^T = exp(S^T - m')      in place, summed into l vertically;
// (in base 2 unless a float mask is added: Q^T is scaled by scale * log2 e, so the
// exponentials are exp2, three FMAs cheaper per vector, a third of their cost);
//   O = O alpha + P V        register tiles of R queries x VB vectors of output features:
//                            per key, R broadcasts from P^T's row and VB loads of V's row.
// So both products are GEMM micro-kernels on operands as stored (no transposed copy of K or
// V), the softmax has no horizontal reduction, the output rows need no transpose (storing
// O^T's columns is slower; calibration: attention output rows), and no hot loop has a lane
// mask: rows that a tile does not divide get a remainder tile, pad queries (the last
// block's rows past L) repeat the last query and are not stored, pad keys (the last block's
// keys past S) repeat the last key and score -inf. The last key block's tiles are the
// output, (O alpha + P V) * (1 / l): one division per query, and no pass over O after the
// products.
//
// While one product runs, the rows the next one reads are prefetched, a tile's share at a
// time: the value rows of the keys being scored, then during P V the next key block's key
// rows, or after the last block the next task's query rows. In the BERT layer q, k and v
// come from L3 or memory (the dense kernels between stream megabytes of weights), where
// without the prefetches the kernel waits on them as it does not on inputs in cache
// (calibration: attention prefetches).
//
// A row whose keys seen so far are all masked has m = -inf; exponentials then use 0 as the
// max (otherwise exp(-inf - -inf) would poison the row with NaN before an unmasked key
// arrives). A row that stays fully masked ends with 0 * (1 / 0) = NaN, as softmax gives.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ember/ir/prim_math.h"
#include "ember/ir/range_dispatch.h"
#include "ember/passes/machine_model.h"
#include "ember/support/error.h"
#include "op_util.h"

namespace ember::ir {
namespace {

using namespace ops;

Type attention_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  if (args.size() != 3 && args.size() != 4)
    ctx.fail("takes 3 inputs (q, k, v) or 4 (q, k, v, mask) but was given " +
             std::to_string(args.size()));
  const TensorType& q = tensor_arg(args, 0, "q", ctx);
  const TensorType& k = tensor_arg(args, 1, "k", ctx);
  const TensorType& v = tensor_arg(args, 2, "v", ctx);
  check_float(q, "q", ctx);
  check_same_dtype(q, "q", k, "k", ctx);
  check_same_dtype(q, "q", v, "v", ctx);
  for (auto* t : {&q, &k, &v})
    if (t->ndim() < 2)
      ctx.fail("q, k and v must be [..., rows, features] but got " + to_string(*t));
  std::vector<int64_t> batch(q.shape.begin(), q.shape.end() - 2);
  for (auto [t, what] : {std::pair{&k, "k"}, std::pair{&v, "v"}})
    if (std::vector<int64_t>(t->shape.begin(), t->shape.end() - 2) != batch)
      ctx.fail(std::string(what) + " is " + to_string(*t) + " but q is " + to_string(q) +
               ": q, k and v must have the same batch dimensions; broadcast them first");
  int64_t L = q.shape[q.ndim() - 2], E = q.shape.back();
  int64_t S = k.shape[k.ndim() - 2];
  if (k.shape.back() != E)
    ctx.fail("k is " + to_string(k) + " but q is " + to_string(q) +
             ": the last dimension (features) of q and k must be equal");
  if (v.shape[v.ndim() - 2] != S)
    ctx.fail("v is " + to_string(v) + " but k is " + to_string(k) +
             ": k and v must have the same number of rows (keys)");
  std::vector<int64_t> scores = batch;
  scores.push_back(L);
  scores.push_back(S);
  if (args.size() == 4) {
    const TensorType& m = tensor_arg(args, 3, "the mask", ctx);
    if (m.dtype != DType::Bool && m.dtype != q.dtype)
      ctx.fail("the mask is " + to_string(m) + " but must be bool or " + dtype_name(q.dtype) +
               " like q; cast it");
    bool fits = m.ndim() <= static_cast<int64_t>(scores.size());
    for (int64_t d = 0; fits && d < m.ndim(); ++d) {
      int64_t target = scores[scores.size() - m.ndim() + d];
      fits = m.shape[d] == 1 || m.shape[d] == target;
    }
    if (!fits)
      ctx.fail("the mask " + to_string(m) + " does not broadcast to the scores " +
               ints_str(scores) + " (batch..., queries, keys)");
  }
  double scale = attr_has(attrs, "scale") ? attr_float(attrs, "scale") : 1.0 / std::sqrt(double(E));
  if (!std::isfinite(scale))
    ctx.fail("scale must be a finite number, got " + std::to_string(scale));
  int64_t causal = attr_int(attrs, "causal");
  if (causal != 0 && causal != 1) ctx.fail("causal must be 0 or 1, got " + std::to_string(causal));
  attrs = attrs.with("scale", scale).with("causal", causal);
  std::vector<int64_t> out = batch;
  out.push_back(L);
  out.push_back(v.shape.back());
  return TensorType{out, q.dtype};
}

Tensor attention_compute(const std::vector<Tensor>& in, const Attrs& attrs, const TensorType& out) {
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  DType t = q.dtype();
  size_t nb = out.shape.size() - 2;  // batch dimensions
  int64_t S = k.shape()[nb];
  std::vector<int64_t> scores_shape(out.shape.begin(), out.shape.end() - 1);  // [..., L, S]
  scores_shape.push_back(S);
  std::vector<int64_t> rows(out.shape.begin(), out.shape.end() - 1);  // [..., L]
  PrimExpr scale = make_const(t, attr_float(attrs, "scale"));
  bool causal = attr_int(attrs, "causal") != 0;
  // The first n indices of i followed by `extra`.
  auto prefix = [](const std::vector<PrimVar>& i, size_t n, std::vector<PrimExpr> extra) {
    std::vector<PrimExpr> r(i.begin(), i.begin() + n);
    r.insert(r.end(), extra.begin(), extra.end());
    return r;
  };

  IterVar e = reduce_axis(q.shape().back(), "e");
  Tensor dots = compute("attention_dots", scores_shape, [&](const std::vector<PrimVar>& i) {
    return sum(q(prefix(i, nb + 1, {e->var})) * k(prefix(i, nb, {i[nb + 1], e->var})), {e});
  });
  Tensor logits = compute("attention_logits", scores_shape, [&](const std::vector<PrimVar>& i) {
    PrimExpr x = dots(as_exprs(i)) * scale;
    if (in.size() == 4) {
      const Tensor& m = in[3];
      PrimExpr mv = m(broadcast_index(m, i));
      x = m.dtype() == DType::Bool ? select(mv, x, make_const(t, -INFINITY)) : x + mv;
    }
    if (causal) x = select(i[nb + 1] <= i[nb], x, make_const(t, -INFINITY));
    return x;
  });
  IterVar j1 = reduce_axis(S, "j");
  Tensor mx = compute("attention_max", rows, [&](const std::vector<PrimVar>& i) {
    return max_reduce(logits(prefix(i, nb + 1, {j1->var})), {j1});
  });
  Tensor ex = compute("attention_exp", scores_shape, [&](const std::vector<PrimVar>& i) {
    return exp(logits(as_exprs(i)) - mx(prefix(i, nb + 1, {})));
  });
  IterVar j2 = reduce_axis(S, "j");
  Tensor total = compute("attention_sum", rows, [&](const std::vector<PrimVar>& i) {
    return sum(ex(prefix(i, nb + 1, {j2->var})), {j2});
  });
  IterVar j3 = reduce_axis(S, "j");
  Tensor weighted = compute("attention_pv", out.shape, [&](const std::vector<PrimVar>& i) {
    return sum(ex(prefix(i, nb + 1, {j3->var})) * v(prefix(i, nb, {j3->var, i[nb + 1]})), {j3});
  });
  return compute("attention", out.shape, [&](const std::vector<PrimVar>& i) {
    return weighted(as_exprs(i)) / total(prefix(i, nb + 1, {}));
  });
}

}  // namespace

// ---------------------------------------------------------------- the kernel

namespace {

constexpr int64_t kQueryBlock = 64;   // query rows per task, about
constexpr int64_t kKeyBlock = 64;     // keys per score tile, about
constexpr int64_t kMaxTileRows = 12;  // rows of a register tile, at most
// GPU threads per block, one query row each: one warp, so that a batch-1 BERT layer (12 x
// 128 rows) still spreads over 48 multiprocessors (an H100 has 132; 128 rows per block
// used 12). Each warp reads the same key row at once, from L1.
constexpr int64_t kRowsPerBlock = 32;
constexpr int64_t kGpuKeyTile = 32;  // keys staged in shared memory per step on the GPU
constexpr double kLog2E = 1.4426950408889634;

using Body = std::function<Stmt(PrimExpr)>;

Stmt serial(const std::string& name, PrimExpr extent, const Body& body) {
  PrimVar v(name);
  return for_loop(v, 0, std::move(extent), ForKind::Serial, body(v));
}

// A loop over [0, extent) whose innermost part runs as vectors of `lanes` when they divide
// the extent; the body has no loops.
Stmt vector_loop(const std::string& name, int64_t extent, int64_t lanes, const Body& body) {
  if (lanes <= 1 || extent % lanes != 0) return serial(name, extent, body);
  PrimVar outer(name + ".o"), inner(name + ".v");
  if (extent == lanes) return for_loop(inner, 0, lanes, ForKind::Vectorized, body(inner));
  return for_loop(outer, 0, extent / lanes, ForKind::Serial,
                  for_loop(inner, 0, lanes, ForKind::Vectorized, body(outer * lanes + inner)));
}

Stmt unrolled(const std::string& name, int64_t extent, const Body& body) {
  PrimVar v(name);
  return for_loop(v, 0, extent, ForKind::Unrolled, body(v));
}

Stmt vectorized(const std::string& name, int64_t extent, const Body& body) {
  if (extent == 1) return body(PrimExpr(int64_t{0}));
  PrimVar v(name);
  return for_loop(v, 0, extent, ForKind::Vectorized, body(v));
}

int64_t ceil_div(int64_t x, int64_t m) { return (x + m - 1) / m; }
int64_t round_up(int64_t x, int64_t m) { return ceil_div(x, m) * m; }

// Rows [0, extent) in tiles of `rows`: a loop over the whole tiles, then one tile of the
// remainder, so that every tile has constant extents (no guard in the hot loop).
// `tile(start, rows)` builds one tile.
Stmt row_tiles(const std::string& name, int64_t extent, int64_t rows,
               const std::function<Stmt(PrimExpr, int64_t)>& tile) {
  std::vector<Stmt> parts;
  if (extent >= rows)
    parts.push_back(serial(name, extent / rows, [&](PrimExpr t) { return tile(t * rows, rows); }));
  if (extent % rows != 0) parts.push_back(tile(PrimExpr(extent / rows * rows), extent % rows));
  return seq(parts);
}

// What both kernel forms share: the buffers, the sizes and the score of one (row, key).
struct Operands {
  PrimFunc f;
  Buffer q, k, v, mask, out;
  DType t;
  int64_t B = 1, L, S, E, Ev;  // the largest run's sizes (the buffers')
  // The run's sizes: constants where static, else over the kernel's symbols (issue 44; the
  // CPU kernel only). The operands lie packed by them in the buffers, as the executor
  // stores every run-time shape.
  std::vector<PrimExpr> run_batch, run_mask;
  PrimExpr run_B = int64_t{1}, run_L, run_S;
  double scale_value;
  PrimExpr scale, neg_inf, zero;
  bool causal;

  Operands(const Function& group, const std::string& func_name, const KernelSymbols& run) {
    auto* call = as<CallNode>(group->body);
    EMBER_CHECK(call && call->op && call->op->name == "nn.attention", "group ", group->name,
                " is not a single nn.attention call");
    f.name = func_name;
    std::vector<Buffer> in = single_call_buffers(group, call, f);
    q = in[0];
    k = in[1];
    v = in[2];
    if (call->args.size() == 4) mask = in[3];
    if (!run.empty()) {  // the symbols' values follow the inputs
      f.params.push_back(run.shape_args);
      ++f.num_inputs;
    }
    const TensorType& ot = call->type.tensor();
    out = make_buffer("attention", ot.dtype, ot.shape);
    f.params.push_back(out);
    t = ot.dtype;
    size_t nb = ot.shape.size() - 2;
    for (size_t d = 0; d < nb; ++d) {
      B *= ot.shape[d];
      run_batch.push_back(run.dim(ot.dim(d)));
      run_B = run_B * run_batch.back();
    }
    const TensorType& kt = call->args[1]->type.tensor();
    if (!ot.dim(nb + 1).is_static() || !kt.dim(nb + 1).is_static())
      fail("nn.attention '", call->name, "' has run-time feature sizes (", to_string(ot), ", k ",
           to_string(kt), "); only its batch, query and key counts may vary");
    L = ot.shape[nb];
    Ev = ot.shape[nb + 1];
    S = k->shape[nb];
    E = k->shape[nb + 1];
    run_L = run.dim(ot.dim(nb));
    run_S = run.dim(kt.dim(nb));
    if (mask)
      for (const Dim& d : call->args[3]->type.tensor().all_dims()) run_mask.push_back(run.dim(d));
    scale_value = attr_float(call->attrs, "scale");
    scale = make_const(t, scale_value);
    causal = attr_int(call->attrs, "causal") != 0;
    neg_inf = make_const(t, -INFINITY);
    zero = make_const(t, 0.0);
  }

  // Flat index of the mask element for (b, row, col) under broadcasting: the mask's
  // dimensions align with the trailing ones of [batch..., L, S].
  PrimExpr mask_index(PrimExpr b, PrimExpr row, PrimExpr col) const {
    std::vector<PrimExpr> full;
    for (size_t d = 0; d < run_batch.size(); ++d) {
      PrimExpr inner = int64_t{1};
      for (size_t e = d + 1; e < run_batch.size(); ++e) inner = inner * run_batch[e];
      full.push_back(b / inner % run_batch[d]);
    }
    full.push_back(std::move(row));
    full.push_back(std::move(col));
    PrimExpr index = int64_t{0}, stride = int64_t{1};
    for (size_t d = mask->shape.size(); d-- > 0;) {
      if (mask->shape[d] != 1) index = index + full[full.size() - mask->shape.size() + d] * stride;
      stride = stride * run_mask[d];
    }
    return index;
  }

  // The scaled score x of (b, row i, key j) with the mask and causality applied; the mask
  // is read at (mask_row, mask_col): i and j clamped into range where they may run past it.
  PrimExpr masked(PrimExpr x, PrimExpr b, PrimExpr i, PrimExpr j, PrimExpr mask_row,
                  PrimExpr mask_col) const {
    if (mask) {
      PrimExpr mv = load(mask, mask_index(b, mask_row, mask_col));
      x = mask->dtype == DType::Bool ? select(mv, x, neg_inf) : x + mv;
    }
    if (causal) x = select(j <= i, x, neg_inf);
    return x;
  }
};

// The vector axis of a register-tiled product: `extent` values in vectors of `lanes` (the
// widest power of two up to the full width that divides it, or all of a short extent that
// only narrower ones divide), VB vectors per tile,
// and tiles of at most R rows: the accumulators, VB vectors and one broadcast row value fit
// in the vector registers.
struct Panel {
  int64_t extent, lanes, VB, R;
  Panel(int64_t extent, const passes::MachineModel& machine, DType t) : extent(extent) {
    const int64_t full = machine.lanes(t);
    lanes = full;
    while (lanes > 1 && extent % lanes != 0) lanes /= 2;
    // A row shorter than a register that only narrow vectors divide (7 or 6 output features)
    // is one vector of its own length: lane by lane, 7 FMAs took the place of one
    // (calibration: attention short feature rows).
    if (lanes < 4 && extent <= full) lanes = extent;
    const int64_t vectors = extent / lanes;
    // The most vectors per row (fewest broadcasts per FMA) whose tile still fills the
    // registers (passes::fills_accumulators): 4 x 16 lanes with AVX-512's 32 registers (6
    // rows, rather than 12 x 2), 2 x 8 lanes with AVX2's 16 (6 rows, not 3 x 3) (calibration:
    // attention tile rows).
    auto rows_for = [&](int64_t vb) {
      return std::clamp<int64_t>((machine.vector_registers - vb - 2) / vb, 1, kMaxTileRows);
    };
    VB = 1;
    for (int64_t vb : {4, 3, 2})
      if (vectors % vb == 0 && passes::fills_accumulators(machine, vb * rows_for(vb))) {
        VB = vb;
        break;
      }
    R = rows_for(VB);
  }
  int64_t groups() const { return extent / (lanes * VB); }
};

// The CPU kernel's sizes (see the essay at the top).
struct Blocking {
  int64_t lanes;   // vector lanes
  int64_t BL;      // query rows per task, whole vectors
  int64_t num_qb;  // query blocks (tasks) per batch
  int64_t BS;      // keys per key block
  int64_t num_kb;  // key blocks; num_kb * BS >= S
  Panel queries;   // S^T's tiles: rows of keys x vectors of queries
  Panel features;  // O's tiles: rows of queries x vectors of output features
};

// Query and key blocks of about kQueryBlock and kKeyBlock, split evenly (so 384 keys are six
// blocks of 64, 100 two of 50), for runs of at most L queries and S keys.
Blocking choose_blocking(const Operands& o, const passes::MachineModel& machine, int64_t L,
                         int64_t S) {
  const int64_t lanes = machine.lanes(o.t);
  const int64_t BL = round_up(ceil_div(L, ceil_div(L, kQueryBlock)), lanes);
  const int64_t num_kb = ceil_div(S, kKeyBlock);
  return Blocking{lanes,
                  BL,
                  ceil_div(L, BL),
                  ceil_div(S, num_kb),
                  num_kb,
                  Panel(BL, machine, o.t),
                  Panel(o.Ev, machine, o.t)};
}

// The greater of the two, a compare and a select (x86's maxps): max's NaN propagation and
// signed-zero order cost four more instructions per vector, and a NaN score reaches the
// output through exp(s - m) and the row sum anyway.
PrimExpr maximum(PrimExpr a, PrimExpr b) { return select(b > a, b, a); }

// The CPU kernel of one nn.attention group; build() returns it. Each method is one stage of
// a task (one batch entry, one block of BL queries); the layouts are transposed so that
// queries run along the vectors everywhere (see the essay at the top). Over run-time sizes
// the blocks are chosen for runs of at most `plan_L` queries and `plan_S` keys, and a run's
// last query and key blocks are padded.
class CpuKernel {
 public:
  CpuKernel(const Function& group, const std::string& func_name,
            const passes::MachineModel& machine, const KernelSymbols& run, int64_t plan_L,
            int64_t plan_S)
      : run(run), o(group, func_name, run), k(choose_blocking(o, machine, plan_L, plan_S)) {
    const DType t = o.t;
    const int64_t BL = k.BL;
    qt = make_buffer("queries_t", t, {o.E, BL}, BufferScope::Local);
    st = make_buffer("scores_t", t, {k.BS, BL}, BufferScope::Local);
    o_rows = make_buffer("out_rows", t, {BL, o.Ev}, BufferScope::Local);
    m = make_buffer("row_max", t, {BL}, BufferScope::Local);
    l = make_buffer("row_sum", t, {BL}, BufferScope::Local);
    m_blk = make_buffer("block_max", t, {BL}, BufferScope::Local);
    safe = make_buffer("safe_max", t, {BL}, BufferScope::Local);
    alpha = make_buffer("rescale", t, {BL}, BufferScope::Local);
    auto tile_size = [](const Panel& p) { return p.R * p.VB * p.lanes; };
    tile = make_buffer("register_tile", t, {std::max(tile_size(k.queries), tile_size(k.features))},
                       BufferScope::Local);
  }

  PrimFunc build() {
    Stmt body = seq({init(), transpose_queries(), key_blocks()});
    for (const Buffer& buf : {tile, alpha, safe, m_blk, l, m, o_rows, st, qt})
      body = allocate(buf, body);
    body = let_stmt(row0, PrimExpr(task) % query_blocks() * k.BL, body);
    body = let_stmt(b, PrimExpr(task) / query_blocks(), body);
    o.f.body = run.bind(for_loop(task, 0, o.run_B * query_blocks(), ForKind::Parallel, body));
    verify(o.f);
    return o.f;
  }

 private:
  using TileBody = std::function<Stmt(PrimExpr, PrimExpr, PrimExpr)>;

  // Whether the rows of the last query block, or the keys of the last key block, run past
  // L or S (the pad queries repeat the last one and are never stored; the pad keys repeat
  // the last one and score -inf).
  bool pad_queries() const {
    int64_t L;
    return !as_int(o.run_L, &L) || k.num_qb * k.BL != L;
  }
  bool pad_keys() const {
    int64_t S;
    return !as_int(o.run_S, &S) || k.num_kb * k.BS != S;
  }
  // The run's query blocks per batch entry and key blocks.
  PrimExpr query_blocks() const { return (o.run_L + (k.BL - 1)) / k.BL; }
  PrimExpr key_block_count() const { return (o.run_S + (k.BS - 1)) / k.BS; }
  int64_t query_vectors() const { return k.BL / k.lanes; }

  // Prefetches of rows [first, first + count) of `buf` ([rows, width], `rows` in all; rows
  // past the end are not touched), one per cache line.
  static Stmt prefetch_rows(const Buffer& buf, PrimExpr rows, int64_t width, PrimExpr first,
                            PrimExpr count) {
    const int64_t line = std::max<int64_t>(1, 64 / dtype_bytes(buf->dtype));
    return serial("pf", count, [&](PrimExpr r) {
      PrimExpr row = min(first + r, rows - 1);
      return unrolled("pf.l", ceil_div(width, line),
                      [&](PrimExpr c) { return evaluate(prefetch(buf, row * width + c * line)); });
    });
  }

  // Every element of a register tile of `rows` rows x VB vectors of panel `p` (group `g`),
  // unrolled, so the tile's indices are constants and LLVM keeps it in registers:
  // body(r, i, t) for tile row r, index i along the panel and element t of `tile`.
  Stmt each_in_tile(const Panel& p, int64_t rows, PrimExpr g, const TileBody& body) const {
    return unrolled("r.i", rows, [&](PrimExpr r) {
      return unrolled("v.i", p.VB, [&](PrimExpr vb) {
        return vectorized("i", p.lanes, [&](PrimExpr lane) {
          return body(r, (g * p.VB + vb) * p.lanes + lane, (r * p.VB + vb) * p.lanes + lane);
        });
      });
    });
  }

  // A register-tiled product over panel `p`'s vector groups and the row tiles of `rows`
  // (tiles of p.R, then the remainder): `ahead(start, n)` first (the prefetches issued
  // beside a tile of n rows), then the tile is zeroed, `step(start, e)` accumulated over
  // `extent`, and `epilogue(start)` writes it out.
  Stmt tiled_product(const Panel& p, const std::string& name, int64_t rows, PrimExpr extent,
                     const std::function<TileBody(PrimExpr, PrimExpr)>& step,
                     const std::function<TileBody(PrimExpr)>& epilogue,
                     const std::function<Stmt(PrimExpr, int64_t)>& ahead) const {
    return serial("g", p.groups(), [&](PrimExpr g) {
      return row_tiles(name, rows, p.R, [&](PrimExpr start, int64_t n) {
        Stmt zero = each_in_tile(
            p, n, g, [&](PrimExpr, PrimExpr, PrimExpr t) { return store(tile, t, o.zero); });
        Stmt accumulate =
            serial("e", extent, [&](PrimExpr e) { return each_in_tile(p, n, g, step(start, e)); });
        return seq({ahead(start, n), zero, accumulate, each_in_tile(p, n, g, epilogue(start))});
      });
    });
  }

  // Per task: no keys seen yet (max -inf, sum 0, output 0).
  Stmt init() const {
    Stmt state = vector_loop("i", k.BL, k.lanes, [&](PrimExpr i) {
      return seq({store(m, i, o.neg_inf), store(l, i, o.zero)});
    });
    Stmt rows = vector_loop("i", k.BL * o.Ev, k.features.lanes,
                            [&](PrimExpr i) { return store(o_rows, i, o.zero); });
    return seq({state, rows});
  }

  // Whether the scores stay in natural units: with a float mask the sum score + mask is
  // rounded as torch rounds it, which base 2 would not be (at a -1e4 offset, exp2 of the
  // sum moved the probabilities by 6e-3).
  bool float_mask() const { return o.mask && o.mask->dtype != DType::Bool; }
  PrimExpr exponential(PrimExpr x) const {
    return float_mask() ? exp_nonpositive(x) : exp2_nonpositive(x);
  }

  // Q^T of the task's queries, times the scale (and log2 e unless float_mask): [E, BL].
  // A vector of queries at a time, its features inside: each V features of it are then one
  // V x V block, which the code generator transposes in registers (ir::transposed_loads).
  Stmt transpose_queries() const {
    PrimExpr factor = make_const(o.t, o.scale_value * (float_mask() ? 1.0 : kLog2E));
    auto element = [&](PrimExpr i, PrimExpr e) {
      PrimExpr row = pad_queries() ? min(row0 + i, o.run_L - 1) : row0 + i;
      return store(qt, e * k.BL + i, load(o.q, (b * o.run_L + row) * o.E + e) * factor);
    };
    if (k.lanes <= 1 || k.BL % k.lanes != 0)
      return serial("e", o.E, [&](PrimExpr e) {
        return serial("i", k.BL, [&](PrimExpr i) { return element(i, e); });
      });
    return serial("i.o", k.BL / k.lanes, [&](PrimExpr io) {
      return serial("e", o.E, [&](PrimExpr e) {
        return vectorized("i.v", k.lanes,
                          [&](PrimExpr iv) { return element(io * k.lanes + iv, e); });
      });
    });
  }

  // S^T = K_blk Q^T for the key block from key col0, masked, into scores_t [BS, BL], and
  // each query's running max over it: tiles of R keys (broadcast from K's rows) x VB vectors
  // of queries (from Q^T).
  Stmt scores(PrimExpr col0) const {
    auto key = [&](PrimExpr j) {  // the key row read for block row j
      return pad_keys() ? min(col0 + j, o.run_S - 1) : col0 + j;
    };
    auto step = [&](PrimExpr j0, PrimExpr e) -> TileBody {
      return [=, this](PrimExpr r, PrimExpr i, PrimExpr t) {
        PrimExpr kv = load(o.k, (b * o.run_S + key(j0 + r)) * o.E + e);
        return store(tile, t, fma(kv, load(qt, e * k.BL + i), load(tile, t)));
      };
    };
    auto epilogue = [&](PrimExpr j0) -> TileBody {
      return [=, this](PrimExpr r, PrimExpr i, PrimExpr t) {
        PrimExpr j = col0 + j0 + r, row = row0 + i;
        PrimExpr mask_row = pad_queries() ? min(row, o.run_L - 1) : row;
        PrimExpr x = o.masked(load(tile, t), b, row, j, mask_row, key(j0 + r));
        if (pad_keys()) x = select(j < o.run_S, x, o.neg_inf);
        PrimExpr at = (j0 + r) * k.BL + i;
        return seq({store(st, at, x), store(m_blk, i, maximum(load(m_blk, i), load(st, at)))});
      };
    };
    // While a tile of keys is scored, their value rows are fetched for the product P V.
    auto ahead = [&](PrimExpr j0, int64_t n) {
      return prefetch_rows(o.v, o.run_B * o.run_S, o.Ev, b * o.run_S + key(j0), PrimExpr(n));
    };
    return tiled_product(k.queries, "j.o", k.BS, o.E, step, epilogue, ahead);
  }

  // For all queries as vectors: the new max (and its safe form: 0 while every key so far
  // is masked), the rescale factor alpha = exp(m - m') and the rescaled sum.
  Stmt softmax_factors() const {
    return vector_loop("i", k.BL, k.lanes, [&](PrimExpr i) {
      PrimExpr m_new = load(m_blk, i);
      return seq({store(safe, i, select(m_new == o.neg_inf, o.zero, m_new)),
                  store(alpha, i, exponential(load(m, i) - load(safe, i))), store(m, i, m_new),
                  store(l, i, load(l, i) * load(alpha, i))});
    });
  }

  // P^T = exp(S^T - m') in place, added to the queries' sums.
  Stmt exponentials() const {
    return serial("j", k.BS, [&](PrimExpr j) {
      return serial("ig", query_vectors(), [&](PrimExpr ig) {
        return vectorized("i", k.lanes, [&](PrimExpr lane) {
          PrimExpr i = ig * k.lanes + lane, at = j * k.BL + i;
          return seq({store(st, at, exponential(load(st, at) - load(safe, i))),
                      store(l, i, load(l, i) + load(st, at))});
        });
      });
    });
  }

  // O = O * alpha + P V_blk, O [BL, Ev] in the output's row order: tiles of R queries
  // (broadcast from P^T's columns) x VB vectors of output features (from V's rows, as
  // stored), over the block's real keys only (a pad key's value times its zero probability
  // could be NaN). Rows of O, not of O^T: the output then needs no transpose. The last key
  // block's tiles go straight to the output, times 1 / l (see key_blocks).
  Stmt weighted_values(PrimExpr col0, bool last) const {
    PrimExpr keys = pad_keys() ? min(PrimExpr(k.BS), o.run_S - col0) : PrimExpr(k.BS);
    auto step = [&](PrimExpr i0, PrimExpr j) -> TileBody {
      return [=, this](PrimExpr r, PrimExpr d, PrimExpr t) {
        PrimExpr vv = load(o.v, (b * o.run_S + col0 + j) * o.Ev + d);
        return store(tile, t, fma(load(st, j * k.BL + i0 + r), vv, load(tile, t)));
      };
    };
    auto epilogue = [&](PrimExpr i0) -> TileBody {
      return [=, this](PrimExpr r, PrimExpr d, PrimExpr t) {
        PrimExpr at = (i0 + r) * o.Ev + d;
        PrimExpr x = fma(load(o_rows, at), load(alpha, i0 + r), load(tile, t));
        if (!last) return store(o_rows, at, x);
        PrimExpr row = row0 + i0 + r;
        Stmt out = store(o.out, (b * o.run_L + row) * o.Ev + d, x * load(l, i0 + r));
        return pad_queries() ? if_then_else(row < o.run_L, out) : out;
      };
    };
    // While a tile of queries is weighted, its share of what comes next is fetched: the
    // next key block's key rows, or after the last block the next task's query rows.
    auto ahead = [&](PrimExpr i0, int64_t n) {
      PrimExpr from = i0 * k.BS / k.BL, to = (i0 + n) * k.BS / k.BL;
      const PrimExpr keys = o.run_B * o.run_S, queries = o.run_B * o.run_L;
      if (!last) return prefetch_rows(o.k, keys, o.E, b * o.run_S + col0 + k.BS + from, to - from);
      PrimExpr next = task + 1;
      PrimExpr first = next / query_blocks() * o.run_L + next % query_blocks() * k.BL;
      return prefetch_rows(o.q, queries, o.E, first + i0, PrimExpr(n));
    };
    return tiled_product(k.features, "i.o", k.BL, keys, step, epilogue, ahead);
  }

  // The key blocks (under causality only those up to the task's last query), each with the
  // online-softmax update. The last block is peeled: once its exponentials are summed, l is
  // final, so its P V tiles are stored as out = (O * alpha + P V) * (1 / l), one division
  // per query, and its P V prefetches the next task's queries. (Storing from the tiles
  // rather than in a pass over O after them costs no more on its own: calibration:
  // attention final store.) l >= 1 wherever a key is unmasked (the max scores exp(0)); a
  // fully masked row still gives 0 * inf = NaN, as 0 / 0 did.
  Stmt key_blocks() const {
    PrimExpr blocks = key_block_count();
    if (o.causal) blocks = min(blocks, (row0 + (k.BL - 1)) / k.BS + 1);
    auto block = [&](PrimExpr col0, bool last) {
      Stmt start =
          vector_loop("i", k.BL, k.lanes, [&](PrimExpr i) { return store(m_blk, i, load(m, i)); });
      std::vector<Stmt> parts{start, scores(col0), softmax_factors(), exponentials()};
      if (last)
        parts.push_back(vector_loop("i", k.BL, k.lanes, [&](PrimExpr i) {
          return store(l, i, make_const(o.t, 1.0) / load(l, i));
        }));
      parts.push_back(weighted_values(col0, last));
      return seq(parts);
    };
    PrimVar kb("kb"), col0("col0"), last_col0("last_col0");
    Stmt last = let_stmt(last_col0, (blocks - 1) * k.BS, block(last_col0, true));
    if (!o.causal && k.num_kb == 1) return last;
    Stmt rest =
        for_loop(kb, 0, blocks - 1, ForKind::Serial, let_stmt(col0, kb * k.BS, block(col0, false)));
    return seq({rest, last});
  }

  const KernelSymbols& run;
  Operands o;
  Blocking k;
  Buffer qt, st, o_rows, m, l, m_blk, safe, alpha, tile;
  PrimVar task{"task"}, b{"b"}, row0{"row0"};
};

}  // namespace

PrimFunc lower_attention_rows(const Function& group, const std::string& func_name,
                              ForKind block_kind, ForKind thread_kind);

namespace {

// One key's online-softmax step in the row forms: the masked score x of (b, i, j) from
// `dot`, then the row's max and sum (`state[at]`, `state[at + 1]`) updated and `rescale`
// applied to its accumulator with the factor alpha for what it holds and the weight p of
// key j. A row whose keys so far are all masked keeps 0 as the exponentials' max (the top).
Stmt softmax_step(const Operands& o, const Buffer& state, PrimExpr at, PrimExpr dot, PrimExpr b,
                  PrimExpr i, PrimExpr j, const std::function<Stmt(PrimExpr, PrimExpr)>& rescale) {
  PrimVar x("x", o.t), m_new("m_new", o.t), m_safe("m_safe", o.t), alpha("alpha", o.t), p("p", o.t);
  PrimExpr m = load(state, at), l = load(state, at + 1);
  Stmt update =
      seq({store(state, at + 1, l * alpha + p), store(state, at, m_new), rescale(alpha, p)});
  update = let_stmt(p, exp(PrimExpr(x) - m_safe), update);
  update = let_stmt(alpha, exp(m - m_safe), update);
  update = let_stmt(m_safe, select(PrimExpr(m_new) == o.neg_inf, o.zero, m_new), update);
  update = let_stmt(m_new, max(m, x), update);
  return let_stmt(x, o.masked(dot * o.scale, b, i, j, i, j), update);
}

// The operands of the forms that take static sizes only (the GPU's and the rows form).
Operands static_operands(const Function& group, const std::string& func_name) {
  const KernelSymbols run(group);
  if (!run.empty())
    fail("nn.attention '", group->name,
         "' over run-time sizes has a CPU kernel only (issue 44); build it with static sizes");
  return Operands(group, func_name, run);
}

// The GPU's rows per block when the keys can go through shared memory: a block's rows must
// be of one batch entry (the threads share its K and V), so the count divides L; 64 where
// that still leaves two blocks per multiprocessor of an H100 (132), else at most 32. 0: the
// one-row-per-thread form instead (too few rows of one entry, or a q row and an accumulator
// too long to keep in registers).
int64_t gpu_rows_per_block(const Operands& o) {
  if (o.E + o.Ev > 256) return 0;
  if (o.L % 64 == 0 && o.B * o.L / 64 >= 264) return 64;
  for (int64_t t = std::min<int64_t>(o.L, 32); t >= 8; --t)
    if (o.L % t == 0) return t;
  return 0;
}

// The GPU form: a block of T query rows of one batch entry, a row per thread; its q row,
// output accumulator and softmax state stay in the thread's registers (PerThread buffers,
// lower_gpu_phases) while the block's threads stage K and V through shared memory
// kGpuKeyTile keys at a time, so each key is read from global memory once per block, not
// once per row.
PrimFunc lower_attention_gpu(const Function& group, const std::string& func_name) {
  Operands o = static_operands(group, func_name);
  const int64_t T = gpu_rows_per_block(o);
  if (T == 0)
    return lower_attention_rows(group, func_name, ForKind::GpuBlockX, ForKind::GpuThreadX);
  // Per thread (row), in registers: its q row, its output accumulator, max, sum and dot.
  Buffer qr = make_buffer("q_row", o.t, {T * o.E}, BufferScope::PerThread);
  Buffer acc = make_buffer("out_acc", o.t, {T * o.Ev}, BufferScope::PerThread);
  Buffer st = make_buffer("row_state", o.t, {T * 3}, BufferScope::PerThread);
  PrimVar block("block"), b("b"), i0("i0");
  // A phase: thread t of the block computes query row i0 + t of batch entry b.
  auto phase = [&](const std::string& name, const std::function<Stmt(PrimExpr, PrimExpr)>& body) {
    PrimVar t(name);
    return for_loop(t, 0, T, ForKind::GpuThreadX, body(t, PrimExpr(i0) + t));
  };
  Stmt init = phase("init", [&](PrimExpr t, PrimExpr i) {
    return seq({store(st, t * 3, o.neg_inf), store(st, t * 3 + 1, o.zero),
                unrolled("d", o.Ev, [&](PrimExpr d) { return store(acc, t * o.Ev + d, o.zero); }),
                unrolled("e", o.E, [&](PrimExpr e) {
                  return store(qr, t * o.E + e, load(o.q, (PrimExpr(b) * o.L + i) * o.E + e));
                })});
  });
  // The block's threads copy keys [j0, j0 + kGpuKeyTile) of `src` into `tile` together.
  auto stage = [&](const Buffer& tile, const Buffer& src, int64_t width, PrimExpr j0) {
    const int64_t n = kGpuKeyTile * width;
    return phase("stage", [&](PrimExpr t, PrimExpr) {
      return serial("c", ceil_div(n, T), [&](PrimExpr c) {
        PrimExpr at = c * T + t;
        return if_then_else(logical_and(at < PrimExpr(n), j0 + at / width < PrimExpr(o.S)),
                            store(tile, at, load(src, (PrimExpr(b) * o.S + j0) * width + at)));
      });
    });
  };
  PrimVar jt("jt");
  Buffer ks = make_buffer("k_tile", o.t, {kGpuKeyTile * o.E}, BufferScope::Local);
  Buffer vs = make_buffer("v_tile", o.t, {kGpuKeyTile * o.Ev}, BufferScope::Local);
  PrimExpr j0 = PrimExpr(jt) * kGpuKeyTile;
  Stmt keys = phase("keys", [&](PrimExpr t, PrimExpr i) {
    PrimExpr dot = load(st, t * 3 + 2);
    PrimExpr last = o.causal ? min(PrimExpr(o.S), i + 1) : PrimExpr(o.S);
    return serial("jj", kGpuKeyTile, [&](PrimExpr jj) {
      PrimExpr j = j0 + jj;
      Stmt dot_loop = seq({store(st, t * 3 + 2, o.zero), unrolled("e", o.E, [&](PrimExpr e) {
                             return store(st, t * 3 + 2,
                                          prim_call(Intrinsic::Fma, {load(qr, t * o.E + e),
                                                                     load(ks, jj * o.E + e), dot}));
                           })});
      Stmt update = softmax_step(o, st, t * 3, dot, b, i, j, [&](PrimExpr alpha, PrimExpr p) {
        return unrolled("d", o.Ev, [&](PrimExpr d) {
          PrimExpr a = load(acc, t * o.Ev + d);
          return store(acc, t * o.Ev + d,
                       prim_call(Intrinsic::Fma, {p, load(vs, jj * o.Ev + d), a * alpha}));
        });
      });
      return if_then_else(j < last, seq({dot_loop, update}));
    });
  });
  Stmt key_tiles = for_loop(
      jt, 0, ceil_div(o.S, kGpuKeyTile), ForKind::Serial,
      allocate(ks, allocate(vs, seq({stage(ks, o.k, o.E, j0), stage(vs, o.v, o.Ev, j0), keys}))));
  Stmt finish = phase("finish", [&](PrimExpr t, PrimExpr i) {
    return unrolled("d", o.Ev, [&](PrimExpr d) {
      return store(o.out, (PrimExpr(b) * o.L + i) * o.Ev + d,
                   load(acc, t * o.Ev + d) / load(st, t * 3 + 1));
    });
  });
  Stmt body = allocate(qr, allocate(acc, allocate(st, seq({init, key_tiles, finish}))));
  body = let_stmt(b, PrimExpr(block) * T / o.L, let_stmt(i0, PrimExpr(block) * T % o.L, body));
  o.f.body = for_loop(block, 0, o.B * o.L / T, ForKind::GpuBlockX, body);
  verify(o.f);
  return o.f;
}

// The CPU kernel, over run-time sizes one per part of the query count's range: blocks of
// 64 queries and keys, chosen for 512 of them, would compute 64 x 64 scores for a run of 7
// (pad rows and keys), where a kernel blocked for at most 16 of each computes 16 x 16. The
// parts end at one and two vectors of queries and at a query block.
PrimFunc lower_attention_cpu(const Function& group, const std::string& func_name,
                             const passes::MachineModel& machine) {
  const KernelSymbols run(group);
  auto* call = as<CallNode>(group->body);
  const TensorType &qt = call->args[0]->type.tensor(), &kt = call->args[1]->type.tensor();
  const Dim L = qt.dim(qt.ndim() - 2), S = kt.dim(kt.ndim() - 2);
  auto kernel = [&](const std::string& name, int64_t plan_L, int64_t plan_S) {
    return CpuKernel(group, name, machine, run, plan_L, plan_S).build();
  };
  if (L.symbols.size() != 1 || L.coef != 1 || L.offset != 0)
    return kernel(func_name, L.max(), S.max());
  const std::string& queries = L.symbols[0]->name;
  std::vector<std::pair<int64_t, PrimFunc>> parts;
  const int64_t lanes = machine.lanes(qt.dtype);
  for (int64_t bound : {lanes, 2 * lanes, kQueryBlock}) {
    if (bound < L.min() || bound >= L.max() || (!parts.empty() && bound <= parts.back().first))
      continue;
    Binding at = max_binding(S.symbols);
    if (at.count(queries)) at[queries] = bound;
    parts.emplace_back(bound, kernel(func_name + "_upto" + std::to_string(bound), bound, S.at(at)));
  }
  parts.emplace_back(L.max(), kernel(func_name, L.max(), S.max()));
  return parts.size() == 1 ? parts[0].second : dispatch_by_range(func_name, run.dim(L), parts);
}

// Builds the kernel of a group holding one nn.attention call (Op::lower).
PrimFunc lower_attention(const Function& group, const std::string& func_name,
                         const passes::MachineModel& machine, bool gpu) {
  if (gpu) return lower_attention_gpu(group, func_name);
  return lower_attention_cpu(group, func_name, machine);
}

}  // namespace

// The one-row-per-thread form: each (batch, query row) streams over the keys one at a time
// with the same online-softmax update. `block_kind` and `thread_kind` are the two outer
// loops' kinds: GpuBlockX/GpuThreadX on a GPU, Parallel/Serial to run it on the CPU (tests).
PrimFunc lower_attention_rows(const Function& group, const std::string& func_name,
                              ForKind block_kind, ForKind thread_kind) {
  Operands o = static_operands(group, func_name);
  const int64_t rows = o.B * o.L, threads = std::min<int64_t>(rows, kRowsPerBlock);
  Buffer acc = make_buffer("out_acc", o.t, {o.Ev}, BufferScope::Local);
  Buffer st = make_buffer("row_state", o.t, {3}, BufferScope::Local);  // max, sum, dot
  PrimVar block("block"), thread("thread"), b("b"), i("i");
  PrimExpr l = load(st, 1), dot = load(st, 2);

  Stmt init = seq({store(st, 0, o.neg_inf), store(st, 1, o.zero),
                   serial("d", o.Ev, [&](PrimExpr d) { return store(acc, d, o.zero); })});
  // One key: x = q_i . k_j * scale (masked), then the online-softmax update with it alone.
  PrimExpr keys = o.causal ? min(PrimExpr(o.S), PrimExpr(i) + 1) : PrimExpr(o.S);
  Stmt key_loop = serial("j", keys, [&](PrimExpr j) {
    Stmt dot_loop = seq({store(st, 2, o.zero), serial("e", o.E, [&](PrimExpr e) {
                           return store(st, 2,
                                        load(st, 2) + load(o.q, (b * o.L + i) * o.E + e) *
                                                          load(o.k, (b * o.S + j) * o.E + e));
                         })});
    Stmt update = softmax_step(o, st, 0, dot, b, i, j, [&](PrimExpr alpha, PrimExpr p) {
      return serial("d", o.Ev, [&](PrimExpr d) {
        return store(acc, d, load(acc, d) * alpha + p * load(o.v, (b * o.S + j) * o.Ev + d));
      });
    });
    return seq({dot_loop, update});
  });
  Stmt finish = serial("d", o.Ev, [&](PrimExpr d) {
    return store(o.out, (b * o.L + i) * o.Ev + d, load(acc, d) / l);
  });
  Stmt body = allocate(acc, allocate(st, seq({init, key_loop, finish})));
  PrimExpr row = PrimExpr(block) * threads + thread;
  body = let_stmt(b, row / o.L, let_stmt(i, row % o.L, body));
  if (rows % threads != 0) body = if_then_else(row < PrimExpr(rows), body);
  o.f.body = for_loop(block, 0, (rows + threads - 1) / threads, block_kind,
                      for_loop(thread, 0, threads, thread_kind, body));
  verify(o.f);
  return o.f;
}

namespace {

const Op* register_attention() {
  Op op{"nn.attention", -1, OpPattern::Opaque, attention_rel, attention_compute};
  op.lower = lower_attention;
  op.lower_takes_run_time_sizes = true;
  op.attrs = {int_attr("causal", 0, "1: query i attends to keys j <= i"),
              // No default here: the relation fills in 1 / sqrt(E).
              AttrSpec{"scale", AttrKind::Float, std::nullopt, "the scores' factor; 1 / sqrt(E)"}};
  return register_op(std::move(op));
}

[[maybe_unused]] const Op* kAttention = register_attention();

}  // namespace
}  // namespace ember::ir
