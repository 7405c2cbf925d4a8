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

constexpr int64_t kQueryBlock = 32;      // query rows per task
constexpr int64_t kKeyBlock = 64;        // keys per tile (rounded to whole vectors)
constexpr int64_t kMaxKeyTile = 8192;    // elements of the K^T tile (stays on the stack)

using Body = std::function<Stmt(PrimExpr)>;

Stmt serial(const std::string& name, PrimExpr extent, const Body& body) {
  PrimVar v(name);
  return for_loop(v, 0, std::move(extent), ForKind::Serial, body(v));
}

// A loop over [0, extent) whose innermost part runs as vectors of `lanes` when they divide
// the extent; the body must not contain loops.
Stmt vector_loop(const std::string& name, int64_t extent, int64_t lanes, const Body& body) {
  if (lanes <= 1 || extent % lanes != 0) return serial(name, extent, body);
  PrimVar outer(name + ".o"), inner(name + ".v");
  if (extent == lanes) return for_loop(inner, 0, lanes, ForKind::Vectorized, body(inner));
  return for_loop(outer, 0, extent / lanes, ForKind::Serial,
                  for_loop(inner, 0, lanes, ForKind::Vectorized, body(outer * lanes + inner)));
}

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

}  // namespace

PrimFunc lower_attention(const Function& group, const std::string& func_name, int vector_bits) {
  auto* call = as<CallNode>(group->body);
  EMBER_CHECK(call && call->op && call->op->name == "nn.attention", "group ", group->name,
              " is not a single nn.attention call");
  PrimFunc f;
  f.name = func_name;
  std::map<const ExprNode*, Buffer> buffer_of;
  for (size_t i = 0; i < group->params.size(); ++i) {
    const TensorType& t = group->params[i]->type.tensor();
    f.params.push_back(make_buffer("p" + std::to_string(i), t.dtype, t.shape));
    buffer_of[group->params[i].get()] = f.params.back();
  }
  f.num_inputs = static_cast<int>(f.params.size());
  auto input = [&](size_t i) {
    auto it = buffer_of.find(call->args[i].get());
    EMBER_CHECK(it != buffer_of.end(), "nn.attention in ", group->name, " reads a non-parameter");
    return it->second;
  };
  Buffer q = input(0), k = input(1), v = input(2);
  Buffer mask = call->args.size() == 4 ? input(3) : nullptr;
  const TensorType& ot = call->type.tensor();
  Buffer out = make_buffer("attention", ot.dtype, ot.shape);
  f.params.push_back(out);

  const DType t = ot.dtype;
  const size_t nb = ot.shape.size() - 2;
  std::vector<int64_t> batch(ot.shape.begin(), ot.shape.begin() + nb);
  int64_t B = 1;
  for (int64_t d : batch) B *= d;
  const int64_t L = ot.shape[nb], Ev = ot.shape[nb + 1], S = k->shape[nb], E = k->shape[nb + 1];
  const int64_t lanes = std::max(1, vector_bits / (8 * dtype_bytes(t)));
  const int64_t BL = std::min(L, kQueryBlock);
  int64_t BS = std::min(S, kKeyBlock);
  if (lanes > 1) BS = round_up(BS, lanes);
  while (BS > lanes && E * BS > kMaxKeyTile) BS -= std::max<int64_t>(lanes, 1);
  const int64_t num_qb = (L + BL - 1) / BL, num_kb = (S + BS - 1) / BS;
  const PrimExpr scale = make_const(t, call->attrs.get_float("scale", 1.0));
  const bool causal = call->attrs.get_int("causal", 0) != 0;
  const PrimExpr neg_inf = make_const(t, -INFINITY), zero = make_const(t, 0.0);

  Buffer s = make_buffer("score_tile", t, {BL, BS}, BufferScope::Local);
  Buffer kt = make_buffer("key_tile_t", t, {E, BS}, BufferScope::Local);
  Buffer acc = make_buffer("out_acc", t, {BL, Ev}, BufferScope::Local);
  Buffer m = make_buffer("row_max", t, {BL}, BufferScope::Local);
  Buffer l = make_buffer("row_sum", t, {BL}, BufferScope::Local);
  Buffer red = make_buffer("row_reduce", t, {1}, BufferScope::Local);

  PrimVar task("task"), b("b"), row0("row0"), col0("col0");
  auto at = [](const Buffer& buf, PrimExpr i) { return load(buf, std::move(i)); };

  // Flat index of the mask element for (b, row, col) under broadcasting: the mask's
  // dimensions align with the trailing ones of [batch..., L, S].
  auto mask_index = [&](PrimExpr row, PrimExpr col) {
    std::vector<PrimExpr> full;
    int64_t inner = B;
    for (int64_t d : batch) {
      inner /= d;
      full.push_back(PrimExpr(b) / inner % d);
    }
    full.push_back(std::move(row));
    full.push_back(std::move(col));
    const std::vector<int64_t>& ms = mask->shape;
    PrimExpr index = int64_t{0};
    int64_t stride = 1;
    for (size_t d = ms.size(); d-- > 0;) {
      if (ms[d] != 1) index = index + full[full.size() - ms.size() + d] * stride;
      stride *= ms[d];
    }
    return index;
  };

  // --- one key block: K^T tile, scores, online-softmax update of every row.
  Stmt load_keys = serial("c", BS, [&](PrimExpr c) {
    PrimExpr j = min(col0 + c, PrimExpr(S - 1));
    return serial("e", E, [&](PrimExpr e) {
      return store(kt, e * BS + c, at(k, (b * S + j) * E + e));
    });
  });
  Stmt scores = serial("r", BL, [&](PrimExpr r) {
    PrimExpr i = min(row0 + r, PrimExpr(L - 1));  // rows past L compute a copy of the last
    auto tile = [&](PrimExpr c) { return r * BS + c; };
    Stmt init = vector_loop("c", BS, lanes, [&](PrimExpr c) { return store(s, tile(c), zero); });
    Stmt dot = serial("e", E, [&](PrimExpr e) {
      PrimExpr qv = at(q, (b * L + i) * E + e);
      return vector_loop("c", BS, lanes, [&](PrimExpr c) {
        return store(s, tile(c), at(s, tile(c)) + qv * at(kt, e * BS + c));
      });
    });
    Stmt finish = vector_loop("c", BS, lanes, [&](PrimExpr c) {
      PrimExpr j = col0 + c;
      PrimExpr x = at(s, tile(c)) * scale;
      if (mask) {
        PrimExpr mv = at(mask, mask_index(i, S % BS == 0 ? j : min(j, PrimExpr(S - 1))));
        x = mask->dtype == DType::Bool ? select(mv, x, neg_inf) : x + mv;
      }
      if (causal) x = select(j <= row0 + r, x, neg_inf);
      if (S % BS != 0) x = select(j < PrimExpr(S), x, neg_inf);
      return store(s, tile(c), x);
    });
    return seq({init, dot, finish});
  });
  PrimVar m_new("m_new", t), m_safe("m_safe", t), alpha("alpha", t);
  Stmt update = serial("r", BL, [&](PrimExpr r) {
    auto tile = [&](PrimExpr c) { return r * BS + c; };
    Stmt row_max = seq({store(red, 0, at(m, r)), serial("c", BS, [&](PrimExpr c) {
                          return store(red, 0, max(at(red, 0), at(s, tile(c))));
                        })});
    Stmt exps = vector_loop("c", BS, lanes, [&](PrimExpr c) {
      return store(s, tile(c), exp(at(s, tile(c)) - m_safe));
    });
    Stmt row_sum = seq({store(red, 0, zero), serial("c", BS, [&](PrimExpr c) {
                          return store(red, 0, at(red, 0) + at(s, tile(c)));
                        })});
    Stmt rescale = vector_loop("d", Ev, lanes, [&](PrimExpr d) {
      return store(acc, r * Ev + d, at(acc, r * Ev + d) * alpha);
    });
    // Only real keys: a clamped tail key's value times its zero probability could be NaN.
    PrimExpr keys = S % BS == 0 ? PrimExpr(BS) : min(PrimExpr(BS), S - col0);
    Stmt pv = serial("c", keys, [&](PrimExpr c) {
      PrimExpr p = at(s, tile(c)), j = col0 + c;
      return vector_loop("d", Ev, lanes, [&](PrimExpr d) {
        return store(acc, r * Ev + d, at(acc, r * Ev + d) + p * at(v, (b * S + j) * Ev + d));
      });
    });
    Stmt body = seq({exps, row_sum, store(l, r, at(l, r) * alpha + at(red, 0)),
                     store(m, r, m_new), rescale, pv});
    body = let_stmt(alpha, exp(at(m, r) - m_safe), body);
    body = let_stmt(m_safe, select(m_new == neg_inf, zero, m_new), body);
    return seq({row_max, let_stmt(m_new, at(red, 0), body)});
  });
  PrimExpr key_blocks = num_kb;
  if (causal) key_blocks = min(PrimExpr(num_kb), (row0 + (BL - 1)) / BS + 1);
  PrimVar kb("kb");
  Stmt key_loop = for_loop(kb, 0, key_blocks, ForKind::Serial,
                           let_stmt(col0, kb * BS, seq({load_keys, scores, update})));

  // --- per task: init, key blocks, normalise and store.
  Stmt init = serial("r", BL, [&](PrimExpr r) {
    return seq({store(m, r, neg_inf), store(l, r, zero),
                vector_loop("d", Ev, lanes, [&](PrimExpr d) { return store(acc, r * Ev + d, zero); })});
  });
  Stmt finish = serial("r", BL, [&](PrimExpr r) {
    Stmt st = vector_loop("d", Ev, lanes, [&](PrimExpr d) {
      return store(out, (b * L + row0 + r) * Ev + d, at(acc, r * Ev + d) / at(l, r));
    });
    return L % BL == 0 ? st : if_then_else(row0 + r < PrimExpr(L), st);
  });
  Stmt body = seq({init, key_loop, finish});
  for (const Buffer& buf : {red, l, m, acc, kt, s}) body = allocate(buf, body);
  body = let_stmt(row0, PrimExpr(task) % num_qb * BL, body);
  body = let_stmt(b, PrimExpr(task) / num_qb, body);
  f.body = for_loop(task, 0, B * num_qb, ForKind::Parallel, body);
  verify(f);
  return f;
}

}  // namespace ember::passes
