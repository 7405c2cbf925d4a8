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
// and O / l at the end is exactly softmax(S) V. Only one (rows x keys) score tile and the
// (rows x Ev) accumulator live at a time, on the stack of the thread that owns the (batch,
// query block); the L x S score matrix never exists. K is transposed once, before the query
// blocks, into a scratch buffer of K's size.
//
// A row whose keys seen so far are all masked has m = -inf; exponentials then use 0 as the
// max (otherwise exp(-inf - -inf) would poison the row with NaN before an unmasked key
// arrives). A row that stays fully masked ends with 0 / 0 = NaN, as softmax gives.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ember/ir/prim_math.h"
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
  double scale = attrs.has("scale") ? attr_float(attrs, "scale") : 1.0 / std::sqrt(double(E));
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

constexpr int64_t kQueryBlock = 64;     // query rows per task, about
constexpr int64_t kTileRows = 6;        // rows of a register tile of two vectors
constexpr int64_t kKeyBlock = 64;       // keys per tile (rounded to whole vectors)
constexpr int64_t kRowsPerBlock = 128;  // GPU threads per block, one query row each

using Body = std::function<Stmt(PrimExpr)>;

Stmt serial(const std::string& name, PrimExpr extent, const Body& body) {
  PrimVar v(name);
  return for_loop(v, 0, std::move(extent), ForKind::Serial, body(v));
}

// A loop over [0, extent) whose innermost part runs as vectors of `lanes` when they divide
// the extent, the loop over the vectors being of kind `tiles`; the body has no loops.
Stmt vector_loop(const std::string& name, int64_t extent, int64_t lanes, const Body& body,
                 ForKind tiles = ForKind::Serial) {
  if (lanes <= 1 || extent % lanes != 0) return serial(name, extent, body);
  PrimVar outer(name + ".o"), inner(name + ".v");
  if (extent == lanes) return for_loop(inner, 0, lanes, ForKind::Vectorized, body(inner));
  return for_loop(outer, 0, extent / lanes, tiles,
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

// The vector length along `extent` values: `lanes` where they divide it, else scalars.
int64_t lanes_or_one(int64_t extent, int64_t lanes) {
  return lanes > 1 && extent % lanes == 0 ? lanes : 1;
}

// Rows of a register tile with `vectors` vectors per row: as many as keep 12 accumulators
// or fewer (AVX2's 16 registers, less the operands), dividing `rows`.
int64_t tile_rows(int64_t rows, int64_t vectors) {
  for (int64_t r = 2 * kTileRows / vectors; r > 1; --r)
    if (rows % r == 0) return r;
  return 1;
}

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Query rows per task: the rows in blocks of about kQueryBlock, each rounded up to whole
// register tiles of kTileRows (the rows past L repeat the last row and are not stored).
int64_t query_block(int64_t L) {
  int64_t blocks = (L + kQueryBlock - 1) / kQueryBlock;
  int64_t rows = (L + blocks - 1) / blocks;
  return rows <= kTileRows ? rows : round_up(rows, kTileRows);
}

// a * b + c rounded once (an FMA instruction; the code generator never contracts itself).
PrimExpr fma(PrimExpr a, PrimExpr b, PrimExpr c) {
  return prim_call(Intrinsic::Fma, {std::move(a), std::move(b), std::move(c)});
}

// What both kernel forms share: the buffers, the sizes and the score of one (row, key).
struct Operands {
  PrimFunc f;
  Buffer q, k, v, mask, out;
  DType t;
  std::vector<int64_t> batch;
  int64_t B = 1, L, S, E, Ev;
  PrimExpr scale, neg_inf, zero;
  bool causal;

  Operands(const Function& group, const std::string& func_name) {
    auto* call = as<CallNode>(group->body);
    EMBER_CHECK(call && call->op && call->op->name == "nn.attention", "group ", group->name,
                " is not a single nn.attention call");
    f.name = func_name;
    std::map<const ExprNode*, Buffer> buffer_of;
    for (size_t i = 0; i < group->params.size(); ++i) {
      const TensorType& pt = group->params[i]->type.tensor();
      f.params.push_back(make_buffer("p" + std::to_string(i), pt.dtype, pt.shape));
      buffer_of[group->params[i].get()] = f.params.back();
    }
    f.num_inputs = static_cast<int>(f.params.size());
    auto input = [&](size_t i) {
      auto it = buffer_of.find(call->args[i].get());
      EMBER_CHECK(it != buffer_of.end(), "nn.attention in ", group->name, " reads a non-parameter");
      return it->second;
    };
    q = input(0);
    k = input(1);
    v = input(2);
    if (call->args.size() == 4) mask = input(3);
    const TensorType& ot = call->type.tensor();
    out = make_buffer("attention", ot.dtype, ot.shape);
    f.params.push_back(out);
    t = ot.dtype;
    size_t nb = ot.shape.size() - 2;
    batch.assign(ot.shape.begin(), ot.shape.begin() + nb);
    for (int64_t d : batch) B *= d;
    L = ot.shape[nb];
    Ev = ot.shape[nb + 1];
    S = k->shape[nb];
    E = k->shape[nb + 1];
    scale = make_const(t, attr_float(call->attrs, "scale"));
    causal = attr_int(call->attrs, "causal") != 0;
    neg_inf = make_const(t, -INFINITY);
    zero = make_const(t, 0.0);
  }

  // Flat index of the mask element for (b, row, col) under broadcasting: the mask's
  // dimensions align with the trailing ones of [batch..., L, S].
  PrimExpr mask_index(PrimExpr b, PrimExpr row, PrimExpr col) const {
    std::vector<PrimExpr> full;
    int64_t inner = B;
    for (int64_t d : batch) {
      inner /= d;
      full.push_back(b / inner % d);
    }
    full.push_back(std::move(row));
    full.push_back(std::move(col));
    PrimExpr index = int64_t{0};
    int64_t stride = 1;
    for (size_t d = mask->shape.size(); d-- > 0;) {
      if (mask->shape[d] != 1) index = index + full[full.size() - mask->shape.size() + d] * stride;
      stride *= mask->shape[d];
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

}  // namespace

PrimFunc lower_attention_rows(const Function& group, const std::string& func_name,
                              ForKind block_kind, ForKind thread_kind);

namespace {

// Builds the kernel of a group holding one nn.attention call (Op::lower).
PrimFunc lower_attention(const Function& group, const std::string& func_name, int vector_bits,
                         bool gpu) {
  if (gpu) return lower_attention_rows(group, func_name, ForKind::GpuBlockX, ForKind::GpuThreadX);
  Operands o(group, func_name);
  const DType t = o.t;
  const int64_t B = o.B, L = o.L, S = o.S, E = o.E, Ev = o.Ev;
  const Buffer &q = o.q, &k = o.k, &v = o.v, &out = o.out;
  const PrimExpr &scale = o.scale, &neg_inf = o.neg_inf, &zero = o.zero;
  const bool causal = o.causal;
  const int64_t lanes = std::max(1, vector_bits / (8 * dtype_bytes(t)));
  const int64_t BL = query_block(L);
  int64_t BS = std::min(S, kKeyBlock);
  if (lanes > 1) BS = round_up(BS, lanes);
  const int64_t num_qb = (L + BL - 1) / BL, num_kb = (S + BS - 1) / BS;
  const int64_t SP = num_kb * BS;  // keys padded to whole key blocks

  Buffer s = make_buffer("score_tile", t, {BL, BS}, BufferScope::Local);
  // K^T of every batch, keys padded with zeros (their scores are masked to -inf): written
  // once before the query blocks, so each block's score tile loads contiguous keys. (A
  // transposed tile per query block and key block cost a quarter of the kernel at seq 384.)
  Buffer kt = make_buffer("keys_t", t, {B, E, SP});
  Buffer acc = make_buffer("out_acc", t, {BL, Ev}, BufferScope::Local);
  // Per-row state, padded to whole vectors so that the rescale factors are computed as
  // vectors (the pad rows hold -inf maxima and are never stored).
  const int64_t BLp = lanes > 1 ? round_up(BL, lanes) : BL;
  Buffer m = make_buffer("row_max", t, {BLp}, BufferScope::Local);
  Buffer l = make_buffer("row_sum", t, {BLp}, BufferScope::Local);
  Buffer m_blk = make_buffer("block_max", t, {BLp}, BufferScope::Local);
  Buffer alpha_b = make_buffer("rescale", t, {BLp}, BufferScope::Local);
  Buffer safe_b = make_buffer("safe_max", t, {BLp}, BufferScope::Local);
  const int64_t width = BS % lanes == 0 ? lanes : 1;  // partial sums per row
  Buffer red = make_buffer("row_reduce", t, {width}, BufferScope::Local);

  PrimVar task("task"), b("b"), row0("row0"), col0("col0");
  auto at = [](const Buffer& buf, PrimExpr i) { return load(buf, std::move(i)); };

  // --- K^T, parallel over the batch. Contiguous stores (a gather from k) beat contiguous
  // loads and a scatter.
  PrimVar kb_b("b");
  Stmt transpose_keys = for_loop(kb_b, 0, B, ForKind::Parallel, serial("e", E, [&](PrimExpr e) {
                                   return vector_loop("c", SP, lanes, [&](PrimExpr c) {
                                     PrimExpr x =
                                         at(k, (kb_b * S + min(c, PrimExpr(S - 1))) * E + e);
                                     if (SP != S) x = select(c < PrimExpr(S), x, zero);
                                     return store(kt, (kb_b * E + e) * SP + c, x);
                                   });
                                 }));

  // --- one key block: scores, online-softmax update of every row.
  // Scores as a register tile of R rows x VB vectors of keys: per e, R broadcasts of q and
  // VB vector loads of K^T feed R * VB FMAs (one row alone would load one vector per FMA).
  // The tile is zeroed, accumulated, then scaled and masked while it is in registers.
  const int64_t nvec = BS / lanes_or_one(BS, lanes);
  const int64_t vlen = BS / nvec;  // lanes of one vector of keys
  const int64_t VB = nvec % 2 == 0 ? 2 : 1, R = tile_rows(BL, VB);
  auto row_of = [&](PrimExpr r) { return min(row0 + r, PrimExpr(L - 1)); };
  Stmt dot = serial("r.o", BL / R, [&](PrimExpr ro) {
    return serial("c.o", nvec / VB, [&](PrimExpr cg) {
      auto each = [&](const std::function<Stmt(PrimExpr, PrimExpr, PrimExpr)>& body) {
        return unrolled("r.i", R, [&](PrimExpr ri) {
          return unrolled("c.i", VB, [&](PrimExpr vb) {
            return vectorized("c", vlen, [&](PrimExpr lane) {
              PrimExpr r = ro * R + ri, c = (cg * VB + vb) * vlen + lane;
              return body(r, c, r * BS + c);
            });
          });
        });
      };
      Stmt zero_tile = each([&](PrimExpr, PrimExpr, PrimExpr t) { return store(s, t, zero); });
      Stmt accumulate = serial("e", E, [&](PrimExpr e) {
        return each([&](PrimExpr r, PrimExpr c, PrimExpr t) {
          PrimExpr qv = at(q, (b * L + row_of(r)) * E + e);
          return store(s, t, fma(qv, at(kt, (b * E + e) * SP + col0 + c), at(s, t)));
        });
      });
      Stmt scale_and_mask = each([&](PrimExpr r, PrimExpr c, PrimExpr t) {
        PrimExpr j = col0 + c;
        PrimExpr x = o.masked(at(s, t) * scale, b, row0 + r, j, row_of(r),
                              S % BS == 0 ? j : min(j, PrimExpr(S - 1)));
        if (S % BS != 0) x = select(j < PrimExpr(S), x, neg_inf);
        return store(s, t, x);
      });
      return seq({zero_tile, accumulate, scale_and_mask});
    });
  });
  // Row max and row sum of row r over one partial result per vector lane, folded at the end.
  auto lane_reduce = [&](PrimExpr r, PrimExpr init,
                         const std::function<PrimExpr(PrimExpr, PrimExpr)>& op,
                         const std::function<PrimExpr(PrimExpr)>& value, bool write_back) {
    PrimVar co("c.o"), w("w"), w1("w");
    Stmt step = for_loop(w, 0, width, width > 1 ? ForKind::Vectorized : ForKind::Serial, [&] {
      PrimExpr c = co * width + w, x = value(c);
      if (!write_back) return store(red, w, op(at(red, w), x));
      // Store x, then reduce what was stored (x itself would be computed twice).
      return seq({store(s, r * BS + c, x), store(red, w, op(at(red, w), at(s, r * BS + c)))});
    }());
    return seq(
        {vector_loop("w", width, lanes, [&](PrimExpr i) { return store(red, i, init); }),
         for_loop(co, 0, BS / width, ForKind::Serial, step),
         for_loop(w1, 1, width - 1, ForKind::Serial, store(red, 0, op(at(red, 0), at(red, w1))))});
  };
  // The greater of the two, a compare and a select (x86's maxps): max's NaN propagation and
  // signed-zero order cost four more instructions per vector, and a NaN score reaches the
  // output through exp(s - m) and the row sum anyway.
  auto maximum = [](PrimExpr a, PrimExpr b) { return select(b > a, b, a); };
  auto plus = [](PrimExpr a, PrimExpr b) { return a + b; };
  // The online-softmax update in three passes over the rows: each row's new max; then, for
  // all rows at once as vectors, its safe form and the rescale factor alpha = exp(m - m');
  // then each row's P = exp(S - m') in place, its sum, and the rescaled sum and accumulator.
  Stmt row_maxes = serial("r", BL, [&](PrimExpr r) {
    return seq({lane_reduce(
                    r, at(m, r), maximum, [&](PrimExpr c) { return at(s, r * BS + c); }, false),
                store(m_blk, r, at(red, 0))});
  });
  Stmt factors = vector_loop("r", BLp, lanes, [&](PrimExpr r) {
    PrimExpr m_new = at(m_blk, r);
    PrimExpr safe = select(m_new == neg_inf, zero, m_new);
    return seq(
        {store(alpha_b, r, exp(at(m, r) - safe)), store(safe_b, r, safe), store(m, r, m_new)});
  });
  PrimVar m_safe("m_safe", t), alpha("alpha", t);
  Stmt exps = serial("r", BL, [&](PrimExpr r) {
    // P = exp(S - m) in place, summed on the way.
    Stmt exps_and_sum = lane_reduce(
        r, zero, plus, [&](PrimExpr c) { return exp(at(s, r * BS + c) - m_safe); }, true);
    Stmt rescale = vector_loop("d", Ev, lanes, [&](PrimExpr d) {
      return store(acc, r * Ev + d, at(acc, r * Ev + d) * alpha);
    });
    Stmt body = seq({exps_and_sum, store(l, r, at(l, r) * alpha + at(red, 0)), rescale});
    return let_stmt(m_safe, at(safe_b, r), let_stmt(alpha, at(alpha_b, r), body));
  });
  Stmt update = seq({row_maxes, factors, exps});
  // acc += P V as a register tile of R rows x VB vectors of the output: per key, R
  // broadcasts of p and VB vector loads of v, summed in a small tile of its own (constant
  // indices once unrolled, so LLVM keeps it in registers) and added to acc at the end.
  // Only real keys: a clamped tail key's value times its zero probability could be NaN.
  PrimExpr keys = S % BS == 0 ? PrimExpr(BS) : min(PrimExpr(BS), S - col0);
  const int64_t nvd = Ev / lanes_or_one(Ev, lanes), dlen = Ev / nvd;
  const int64_t VBd = nvd % 2 == 0 ? 2 : 1, Rp = tile_rows(BL, VBd);
  Buffer pt = make_buffer("pv_tile", t, {Rp * VBd * dlen}, BufferScope::Local);
  Stmt pv = serial("r.o", BL / Rp, [&](PrimExpr ro) {
    return serial("d.o", nvd / VBd, [&](PrimExpr dg) {
      auto each = [&](const std::function<Stmt(PrimExpr, PrimExpr, PrimExpr)>& body) {
        return unrolled("r.i", Rp, [&](PrimExpr ri) {
          return unrolled("d.i", VBd, [&](PrimExpr vb) {
            return vectorized("d", dlen, [&](PrimExpr lane) {
              return body(ro * Rp + ri, (dg * VBd + vb) * dlen + lane,
                          (ri * VBd + vb) * dlen + lane);
            });
          });
        });
      };
      Stmt zero_tile = each([&](PrimExpr, PrimExpr, PrimExpr i) { return store(pt, i, zero); });
      Stmt accumulate = serial("c", keys, [&](PrimExpr c) {
        return each([&](PrimExpr r, PrimExpr d, PrimExpr i) {
          PrimExpr p = at(s, r * BS + c), j = col0 + c;
          return store(pt, i, fma(p, at(v, (b * S + j) * Ev + d), at(pt, i)));
        });
      });
      Stmt add = each([&](PrimExpr r, PrimExpr d, PrimExpr i) {
        return store(acc, r * Ev + d, at(acc, r * Ev + d) + at(pt, i));
      });
      return seq({zero_tile, accumulate, add});
    });
  });
  update = seq({update, pv});
  PrimExpr key_blocks = num_kb;
  if (causal) key_blocks = min(PrimExpr(num_kb), (row0 + (BL - 1)) / BS + 1);
  PrimVar kb("kb");
  Stmt key_loop =
      for_loop(kb, 0, key_blocks, ForKind::Serial, let_stmt(col0, kb * BS, seq({dot, update})));

  // --- per task: init, key blocks, normalise and store.
  Stmt init = seq({vector_loop("r", BLp, lanes,
                               [&](PrimExpr r) {
                                 return seq({store(m, r, neg_inf), store(l, r, zero),
                                             store(m_blk, r, neg_inf)});
                               }),
                   serial("r", BL, [&](PrimExpr r) {
                     return vector_loop("d", Ev, lanes,
                                        [&](PrimExpr d) { return store(acc, r * Ev + d, zero); });
                   })});
  Stmt finish = serial("r", BL, [&](PrimExpr r) {
    Stmt st = vector_loop("d", Ev, lanes, [&](PrimExpr d) {
      return store(out, (b * L + row0 + r) * Ev + d, at(acc, r * Ev + d) / at(l, r));
    });
    return L % BL == 0 ? st : if_then_else(row0 + r < PrimExpr(L), st);
  });
  Stmt body = seq({init, key_loop, finish});
  for (const Buffer& buf : {pt, red, safe_b, alpha_b, m_blk, l, m, acc, s})
    body = allocate(buf, body);
  body = let_stmt(row0, PrimExpr(task) % num_qb * BL, body);
  body = let_stmt(b, PrimExpr(task) / num_qb, body);
  o.f.body =
      allocate(kt, seq({transpose_keys, for_loop(task, 0, B * num_qb, ForKind::Parallel, body)}));
  verify(o.f);
  return o.f;
}

}  // namespace

// The one-row-per-thread form: each (batch, query row) streams over the keys one at a time
// with the same online-softmax update. `block_kind` and `thread_kind` are the two outer
// loops' kinds: GpuBlockX/GpuThreadX on a GPU, Parallel/Serial to run it on the CPU (tests).
PrimFunc lower_attention_rows(const Function& group, const std::string& func_name,
                              ForKind block_kind, ForKind thread_kind) {
  Operands o(group, func_name);
  const int64_t rows = o.B * o.L, threads = std::min<int64_t>(rows, kRowsPerBlock);
  Buffer acc = make_buffer("out_acc", o.t, {o.Ev}, BufferScope::Local);
  Buffer st = make_buffer("row_state", o.t, {3}, BufferScope::Local);  // max, sum, dot
  PrimVar block("block"), thread("thread"), b("b"), i("i"), m_new("m_new", o.t),
      m_safe("m_safe", o.t), alpha("alpha", o.t), p("p", o.t);
  PrimExpr m = load(st, 0), l = load(st, 1), dot = load(st, 2);

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
    PrimVar x("x", o.t);
    Stmt update =
        seq({store(st, 1, l * alpha + p), store(st, 0, m_new), serial("d", o.Ev, [&](PrimExpr d) {
               return store(acc, d, load(acc, d) * alpha + p * load(o.v, (b * o.S + j) * o.Ev + d));
             })});
    update = let_stmt(p, exp(PrimExpr(x) - m_safe), update);
    update = let_stmt(alpha, exp(m - m_safe), update);
    update = let_stmt(m_safe, select(PrimExpr(m_new) == o.neg_inf, o.zero, m_new), update);
    update = let_stmt(m_new, max(m, x), update);
    update = let_stmt(x, o.masked(dot * o.scale, b, i, j, i, j), update);
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
  op.attrs = {int_attr("causal", 0, "1: query i attends to keys j <= i"),
              // No default here: the relation fills in 1 / sqrt(E).
              AttrSpec{"scale", AttrKind::Float, std::nullopt, "the scores' factor; 1 / sqrt(E)"}};
  return register_op(std::move(op));
}

[[maybe_unused]] const Op* kAttention = register_attention();

}  // namespace
}  // namespace ember::ir
