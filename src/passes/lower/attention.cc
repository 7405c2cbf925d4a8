// nn.attention's CPU kernel: flash-attention style online softmax in Ember's loop IR.
//
// softmax(S) V needs each row's max and sum over all keys before any probability is known.
// Online softmax removes that dependency: walking the keys block by block, a row keeps its
// running max m and sum l of exp(s - m) and an output accumulator O = sum exp(s - m) v.
// When a block raises the max to m', everything so far is rescaled by exp(m - m'):
//   l = l * exp(m - m') + rowsum(exp(S_blk - m')),  O = O * exp(m - m') + exp(S_blk - m') V_blk,
// and O / l at the end is exactly softmax(S) V. Only one (rows x keys) score tile, one K^T
// tile and the (rows x Ev) accumulator live at a time, all on the stack of the thread that
// owns the (batch, query block); the L x S score matrix never exists.
//
// A row whose keys seen so far are all masked has m = -inf; exponentials then use 0 as the
// max (otherwise exp(-inf - -inf) would poison the row with NaN before an unmasked key
// arrives). A row that stays fully masked ends with 0 / 0 = NaN, as softmax gives.
#include <cmath>
#include <functional>

#include "ember/ir/op.h"
#include "ember/ir/prim_math.h"
#include "ember/passes/recognize_attention.h"
#include "ember/support/error.h"

namespace ember::passes {

using namespace ir;

namespace {

constexpr int64_t kQueryBlock = 64;     // query rows per task, about
constexpr int64_t kTileRows = 6;        // rows of a register tile of two vectors
constexpr int64_t kKeyBlock = 64;       // keys per tile (rounded to whole vectors)
constexpr int64_t kMaxKeyTile = 8192;   // elements of the K^T tile (stays on the stack)
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
    scale = make_const(t, call->attrs.get_float("scale", 1.0));
    causal = call->attrs.get_int("causal", 0) != 0;
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
  while (BS > lanes && E * BS > kMaxKeyTile) BS -= lanes;
  const int64_t num_qb = (L + BL - 1) / BL, num_kb = (S + BS - 1) / BS;

  Buffer s = make_buffer("score_tile", t, {BL, BS}, BufferScope::Local);
  Buffer kt = make_buffer("key_tile_t", t, {E, BS}, BufferScope::Local);
  Buffer acc = make_buffer("out_acc", t, {BL, Ev}, BufferScope::Local);
  Buffer m = make_buffer("row_max", t, {BL}, BufferScope::Local);
  Buffer l = make_buffer("row_sum", t, {BL}, BufferScope::Local);
  const int64_t width = BS % lanes == 0 ? lanes : 1;  // partial sums per row
  Buffer red = make_buffer("row_reduce", t, {width}, BufferScope::Local);

  PrimVar task("task"), b("b"), row0("row0"), col0("col0");
  auto at = [](const Buffer& buf, PrimExpr i) { return load(buf, std::move(i)); };

  // --- one key block: K^T tile, scores, online-softmax update of every row.
  // Contiguous stores into the tile (a gather from k) beat contiguous loads and a scatter.
  Stmt load_keys = serial("e", E, [&](PrimExpr e) {
    return vector_loop("c", BS, lanes, [&](PrimExpr c) {
      PrimExpr j = min(col0 + c, PrimExpr(S - 1));
      return store(kt, e * BS + c, at(k, (b * S + j) * E + e));
    });
  });
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
          return store(s, t, fma(qv, at(kt, e * BS + c), at(s, t)));
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
  PrimVar m_new("m_new", t), m_safe("m_safe", t), alpha("alpha", t);
  Stmt update = serial("r", BL, [&](PrimExpr r) {
    auto tile = [&](PrimExpr c) { return r * BS + c; };
    // Row max and row sum over one partial result per vector lane, folded at the end.
    auto lane_reduce = [&](PrimExpr init, const std::function<PrimExpr(PrimExpr, PrimExpr)>& op,
                           const std::function<PrimExpr(PrimExpr)>& value, bool write_back) {
      PrimVar co("c.o"), w("w"), w1("w");
      Stmt step = for_loop(w, 0, width, width > 1 ? ForKind::Vectorized : ForKind::Serial, [&] {
        PrimExpr c = co * width + w, x = value(c);
        if (!write_back) return store(red, w, op(at(red, w), x));
        // Store x, then reduce what was stored (x itself would be computed twice).
        return seq({store(s, tile(c), x), store(red, w, op(at(red, w), at(s, tile(c))))});
      }());
      return seq({vector_loop("w", width, lanes, [&](PrimExpr i) { return store(red, i, init); }),
                  for_loop(co, 0, BS / width, ForKind::Serial, step),
                  for_loop(w1, 1, width - 1, ForKind::Serial,
                           store(red, 0, op(at(red, 0), at(red, w1))))});
    };
    auto maximum = [](PrimExpr a, PrimExpr b) { return max(a, b); };
    auto plus = [](PrimExpr a, PrimExpr b) { return a + b; };
    Stmt row_max =
        lane_reduce(at(m, r), maximum, [&](PrimExpr c) { return at(s, tile(c)); }, false);
    // P = exp(S - m) in place, summed on the way.
    Stmt exps_and_sum =
        lane_reduce(zero, plus, [&](PrimExpr c) { return exp(at(s, tile(c)) - m_safe); }, true);
    Stmt rescale = vector_loop("d", Ev, lanes, [&](PrimExpr d) {
      return store(acc, r * Ev + d, at(acc, r * Ev + d) * alpha);
    });
    Stmt body = seq(
        {exps_and_sum, store(l, r, at(l, r) * alpha + at(red, 0)), store(m, r, m_new), rescale});
    body = let_stmt(alpha, exp(at(m, r) - m_safe), body);
    body = let_stmt(m_safe, select(m_new == neg_inf, zero, m_new), body);
    return seq({row_max, let_stmt(m_new, at(red, 0), body)});
  });
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
  Stmt key_loop = for_loop(kb, 0, key_blocks, ForKind::Serial,
                           let_stmt(col0, kb * BS, seq({load_keys, dot, update})));

  // --- per task: init, key blocks, normalise and store.
  Stmt init = serial("r", BL, [&](PrimExpr r) {
    return seq(
        {store(m, r, neg_inf), store(l, r, zero),
         vector_loop("d", Ev, lanes, [&](PrimExpr d) { return store(acc, r * Ev + d, zero); })});
  });
  Stmt finish = serial("r", BL, [&](PrimExpr r) {
    Stmt st = vector_loop("d", Ev, lanes, [&](PrimExpr d) {
      return store(out, (b * L + row0 + r) * Ev + d, at(acc, r * Ev + d) / at(l, r));
    });
    return L % BL == 0 ? st : if_then_else(row0 + r < PrimExpr(L), st);
  });
  Stmt body = seq({init, key_loop, finish});
  for (const Buffer& buf : {pt, red, l, m, acc, kt, s}) body = allocate(buf, body);
  body = let_stmt(row0, PrimExpr(task) % num_qb * BL, body);
  body = let_stmt(b, PrimExpr(task) / num_qb, body);
  o.f.body = for_loop(task, 0, B * num_qb, ForKind::Parallel, body);
  verify(o.f);
  return o.f;
}

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

}  // namespace ember::passes
