// The GPU schedule's tensor-core template and the rewrites that give it its instructions.
//
// A build that allows a lower matmul precision (PassContext config
// "cuda.matmul_precision": "tf32", "bf16" or "fp16") tries this template first on a group
// whose anchor is a GEMM (dense, matmul, batch_matmul: one sum of products over one
// reduction axis) or a convolution (over input channels and a window). Each warp computes
// m16n8 tiles with mma.sync (m16n8k8 for TF32, m16n8k16 for FP16/BF16), accumulating in
// float32:
//
//   blockIdx.x = (batch, BM x BN output tile)          BM x BN: 128x128 (8 warps, 2 x 4),
//     for ko:                                            64x64 or 32x32 (4 warps, 2 x 2)
//       A_tile, B_tile (shared, float32) = the operands over reduction chunk ko
//       threadIdx (warp, lane): [for each window tap:] for ki in chunk (warp_mma): for each
//         of the warp's m16n8 tiles: ACC[tile][4] += A x B   (one mma.sync per tile, k step)
//     threadIdx: O = epilogue(ACC) (fused, from each lane's own accumulators; global store)
//
// For a GEMM, M is `a`'s side and N `b`'s. For a convolution, M is the output channels and
// N the pixels, as a strip of 8 columns (one mma's columns) by BN / 8 rows; the chunk runs
// along the input channels, and the window's taps are loops around it.
//
// The schedule splits the output so that a lane owns exactly the accumulator elements PTX
// gives it: in a 16 x 8 tile, rows g and g + 8 and columns 2t and 2t + 1, where g = lane / 4
// and t = lane % 4. Each warp's tiles are interleaved with the other warps' at 16 rows and 8
// columns, so that every thread axis is an inner split of a fixed size. The loop nest this
// schedule lowers to is an ordinary per-thread register tile: the chunk loop is marked
// ForKind::WarpMma and runs serially everywhere except in the NVPTX build, so the GPU
// emulation checks the template's indexing on the CPU. For the GPU, lower_warp_mma (below,
// after lower_gpu_phases) replaces each WarpMma loop by mma_sync calls whose fragment values
// it reads from the same shared tiles at the lanes PTX assigns: the loop body's own load
// indices, with the chunk index, the register-tile indices and (for B, whose fragment column
// is g rather than 2t + c) the lane substituted. pipeline_shared_tiles (at the end) then
// overlaps each chunk's global-to-shared copies (cp.async) with the mma of the chunk before,
// where the staged operands are plain loads (not a convolution's padded input).
//
// The template applies where M and N hold at least one block tile (a convolution: its
// output channels one block, its rows one block's rows; an image narrower than a strip of
// 8 columns gets one strip past its edge, guarded in the epilogue) and the mma's K divides
// the outermost reduction axis; a block tile that does not divide its axis is shifted back
// at the edge, overlapping the one before, since no lane may skip an mma (a warp
// instruction needs all 32). Elsewhere the FMA templates run. Operands stay float32 in
// shared memory and are rounded as each lane builds its fragment (one cvt per value). Not
// yet: 16-bit shared tiles and ldmatrix, wgmma/TMA, split-K for small grids, 16-bit
// tensors between kernels.
#include <algorithm>
#include <iterator>
#include <set>
#include <sstream>

#include "analysis.h"
#include "ember/ir/simplify.h"
#include "ember/support/error.h"
#include "gpu_common.h"

namespace ember::passes {

using namespace ir;
using gpu::kMaxSharedBytes;
using gpu::kMinBlocks;

namespace {

constexpr int64_t kMaxRowPad = 8;  // the most pad_rows adds below

struct WarpTiling {
  int64_t block_m, block_n, warps_m, warps_n;
};
// Largest first: 128 x 128 blocks of 8 warps (64 float accumulators per lane), then 64 x 64
// and 32 x 32 blocks of 4 warps for grids that would otherwise leave most SMs idle.
constexpr WarpTiling kTilings[] = {{128, 128, 2, 4}, {64, 64, 2, 2}, {32, 32, 2, 2}};

// Where the output's axes go. M is one axis (a side of several tiles its innermost one and
// runs the others as blocks, so that every block's operand tiles are exact boxes: a dense
// over [batch, tokens, K] has two M axes). N is one axis too (`n`), or for a convolution the
// pixels' rows and columns (`rows`, `n`): a column strip of 8 (one mma's columns) by rows.
struct Layout {
  int m = -1, n = -1, rows = -1;
  std::vector<size_t> blocks;  // a block per index
};

// The non-unit axes only `a` indexes, only `b` indexes, and the rest (batch, size 1).
void sides(const Stage& r, const ProducerLoadNode* a, const ProducerLoadNode* b,
           std::vector<size_t>& only_a, std::vector<size_t>& only_b, std::vector<size_t>& rest) {
  for (size_t d = 0; d < r.axes().size(); ++d) {
    const PrimVarNode* v = r.axes()[d]->var.get();
    bool in_a = false, in_b = false;
    for (auto& i : a->indices) in_a |= uses_var(i, v);
    for (auto& i : b->indices) in_b |= uses_var(i, v);
    (in_a == in_b || r.axes()[d]->extent == 1 ? rest : in_a ? only_a : only_b).push_back(d);
  }
}

// A GEMM (one reduction axis): M from `a`'s side, N from `b`'s. A convolution (several:
// channels, then the window): M is the side of one axis (output channels), N the pixels.
Layout plan_layout(const Stage& r, const ProducerLoadNode* a, const ProducerLoadNode* b) {
  std::vector<size_t> side_a, side_b, rest;
  sides(r, a, b, side_a, side_b, rest);
  if (side_a.empty() || side_b.empty()) return {};
  Layout out;
  out.blocks = rest;
  std::vector<size_t>* m = &side_a;
  std::vector<size_t>* n = &side_b;
  if (r.reduce_axes().size() > 1) {
    if (side_b.size() == 1) std::swap(m, n);
    if (m->size() != 1) return {};
    if (n->size() >= 2) {
      out.rows = static_cast<int>((*n)[n->size() - 2]);
      n->erase(n->end() - 2);
    }
  }
  out.m = static_cast<int>(m->back());
  out.n = static_cast<int>(n->back());
  out.blocks.insert(out.blocks.end(), m->begin(), m->end() - 1);
  out.blocks.insert(out.blocks.end(), n->begin(), n->end() - 1);
  std::sort(out.blocks.begin(), out.blocks.end());
  return out;
}

// The N tile of a tiling: block_n columns of one axis, or (rows, 8) of two.
int64_t tile_rows(const WarpTiling& t) { return t.block_n / 8; }

// The first tiling from kTilings[first] that fits in the output and gives at least kMinBlocks
// blocks, else the smallest that fits; null when none does (M or N under a tile). A block tile that
// does not divide its axis is shifted back at the edge (SplitTail::Shift): every block computes a
// whole tile, since a lane may not skip a warp's mma, and the last ones overlap.
const WarpTiling* choose_tiling(const Stage& o, const Layout& l, size_t first) {
  auto ext = [&](int d) { return o.axes()[d]->extent; };
  auto tiles = [](int64_t e, int64_t b) { return (e + b - 1) / b; };
  int64_t blocks = 1;
  for (size_t d : l.blocks) blocks *= o.axes()[d]->extent;
  const WarpTiling* chosen = nullptr;
  for (size_t i = first; i < std::size(kTilings); ++i) {
    const WarpTiling& t = kTilings[i];
    int64_t n_tiles = 0;
    if (l.rows < 0 && ext(l.n) >= t.block_n)
      n_tiles = tiles(ext(l.n), t.block_n);
    else if (l.rows >= 0 && ext(l.rows) >= tile_rows(t))  // a strip may pass the edge
      n_tiles = tiles(ext(l.n), 8) * tiles(ext(l.rows), tile_rows(t));
    if (ext(l.m) < t.block_m || n_tiles == 0) continue;
    chosen = &t;
    if (blocks * tiles(ext(l.m), t.block_m) * n_tiles >= kMinBlocks) break;
  }
  return chosen;
}

struct LaneAxes {
  std::vector<IterVar> threads;  // (warp_m, warp_n, g, t): the lane is g * 4 + t
  std::vector<IterVar> tiles;    // (mt, h, nt, c): the lane's accumulators
};

// Splits a block tile's M and N axes as the mma's fragments own them (see the top): N is
// `n` alone, or a strip of 8 columns `n` by `rows` (a convolution's pixels).
LaneAxes split_lanes(Stage& s, const IterVar& m, const IterVar* rows, const IterVar& n,
                     const WarpTiling& t, SplitTail n_tail = SplitTail::Guard) {
  auto [m1, g] = s.split(m, 8);
  auto [m2, h] = s.split(m1, 2);
  auto [mt, wm] = s.split(m2, t.warps_m);
  auto [n1, c] = s.split(n, 2, n_tail);
  if (rows) {
    auto [nt, wn] = s.split(*rows, t.warps_n);
    return {{wm, wn, g, n1}, {mt, h, nt, c}};
  }
  auto [n2, tn] = s.split(n1, 4);
  auto [nt, wn] = s.split(n2, t.warps_n);
  return {{wm, wn, g, tn}, {mt, h, nt, c}};
}

// Orders `s`'s leaf axes as `outer`, then the lanes' thread axes (bound to threadIdx.x),
// then `middle`, then the unrolled register tile; returns the thread axis.
IterVar order_lanes(Stage& s, const std::vector<IterVar>& outer, const LaneAxes& lanes,
                    const std::vector<IterVar>& middle) {
  std::vector<IterVar> order = outer;
  order.insert(order.end(), lanes.threads.begin(), lanes.threads.end());
  order.insert(order.end(), middle.begin(), middle.end());
  order.insert(order.end(), lanes.tiles.begin(), lanes.tiles.end());
  s.reorder(order);
  IterVar tx = s.fuse(lanes.threads);
  s.bind(tx, ForKind::GpuThreadX);
  for (auto& x : lanes.tiles) s.unroll(x);
  return tx;
}

}  // namespace

namespace gpu {

bool schedule_tensor_core(Schedule& sch, MmaPrecision precision, int64_t max_chunk,
                          size_t first_tiling) {
  if (precision == MmaPrecision::Highest) return false;
  Stage* o = prepare(sch);
  if (!o || o->axes().empty() || o->tensor().dtype() != DType::Float32) return false;
  PrimExpr body = sch.expanded_body(*o);
  std::vector<Stage*> reds = reductions_read(sch, body);
  if (reds.size() != 1) return false;
  Stage& r = *reds[0];
  auto [a, b] = product_operands(r);
  if (!a || r.tensor().dtype() != DType::Float32 ||
      !reductions_read(sch, sch.expanded_body(r)).empty() || !reads_at_own_index(body, *o, r))
    return false;
  for (const TensorRef& p : {a->producer, b->producer})
    if (Tensor(p).dtype() != DType::Float32) return false;
  const Layout layout = plan_layout(r, a, b);
  if (layout.m < 0) return false;
  // The chunk runs along the outermost reduction axis (a convolution's input channels; its
  // window's taps are loops around each chunk's mma).
  const int64_t k = r.reduce_axes()[0]->extent, step = mma_k(precision);
  const WarpTiling* tiling = choose_tiling(*o, layout, first_tiling);
  if (k % step || !tiling || k % std::min(max_chunk, k) != 0 || max_chunk < step) return false;
  const int64_t threads = tiling->warps_m * tiling->warps_n * 32;
  const bool conv = layout.rows >= 0;
  // A GEMM's two operand tiles must fit twice (pipeline_shared_tiles keeps two chunks: 16
  // for the 128 x 128 blocks); a convolution's padded input is staged synchronously, and
  // apply_gpu_schedule's fit check measures its tiles.
  const int64_t tile_bytes =
      (tiling->block_m + tiling->block_n) * (std::min(max_chunk, k) + kMaxRowPad) * 4;
  if (!conv && 2 * tile_bytes > kMaxSharedBytes) return false;

  // Output: a block per tile; each lane's epilogue reads its accumulators.
  std::vector<IterVar> outer;
  for (size_t d : layout.blocks) outer.push_back(o->axes()[d]);
  auto [mo, mi] = o->split(o->axes()[layout.m], tiling->block_m, SplitTail::Shift);
  outer.push_back(mo);
  IterVar rows_i;
  if (conv) {
    auto [ro, ri] = o->split(o->axes()[layout.rows], tile_rows(*tiling), SplitTail::Shift);
    outer.push_back(ro);
    rows_i = ri;
  }
  // An image narrower than a strip (ResNet's 7 x 7) has one strip past its edge: the
  // epilogue's stores are guarded there, and the anchor computes the padded columns from
  // its inputs at the edge (SplitTail::Pad), so that no lane skips an mma.
  const bool narrow = conv && o->axes()[layout.n]->extent < 8;
  auto [no, ni] = o->split(o->axes()[layout.n], conv ? 8 : tiling->block_n,
                           narrow ? SplitTail::Guard : SplitTail::Shift);
  outer.push_back(no);
  LaneAxes out_lanes = split_lanes(*o, mi, conv ? &rows_i : nullptr, ni, *tiling);
  order_lanes(*o, outer, out_lanes, {});
  IterVar bx = o->fuse(outer);
  o->bind(bx, ForKind::GpuBlockX);

  // Operands staged per chunk by all threads; rows padded so that the lanes of a fragment
  // load (8 rows x 4 columns, or 4 rows x 8 columns) hit 32 different banks.
  const PrimVarNode* kvar = r.reduce_axes()[0]->var.get();
  const bool k_inner[2] = {a->indices.back().get() == kvar, b->indices.back().get() == kvar};
  std::vector<Tensor> copies;
  for (const TensorRef& p : {a->producer, b->producer})
    copies.push_back(sch.cache_read(Tensor(p), {r.tensor()}));  // `a` and `b` now dangle

  // The anchor: computed at the block, a chunk at a time (the window's taps inside it),
  // each lane's tiles unrolled.
  r.compute_at(*o, bx);
  std::vector<IterVar> raxes = r.reduce_axes();
  auto [ko, ki] = r.split(raxes[0], std::min(max_chunk, k));
  std::vector<IterVar> rest;  // the block axes: 1 inside the block
  for (size_t d : layout.blocks) rest.push_back(r.axes()[d]);
  IterVar rrows = conv ? r.axes()[layout.rows] : IterVar();
  LaneAxes lanes = split_lanes(r, r.axes()[layout.m], conv ? &rrows : nullptr, r.axes()[layout.n],
                               *tiling, narrow ? SplitTail::Pad : SplitTail::Guard);
  rest.push_back(ko);
  std::vector<IterVar> middle(raxes.begin() + 1, raxes.end());
  middle.push_back(ki);
  order_lanes(r, rest, lanes, middle);
  r.warp_mma(ki);
  r.keep_per_thread();

  for (size_t i = 0; i < copies.size(); ++i) {
    Stage& c = sch[copies[i]];
    c.compute_at(r, ko);
    bind_strided(c, c.axes(), threads);
    if (!conv) c.pad_rows(k_inner[i] ? 4 : 8);  // a window's tile would pad its taps
  }
  return true;
}

}  // namespace gpu

// ----------------------------------------------------------------------- lower_warp_mma

namespace {

// What a WarpMma loop's body holds: the register-tile loops (mt, h, nt, c) around one store
// ACC[i] = ACC[i] + A[ia] * B[ib].
struct MmaBody {
  std::vector<const ForNode*> tiles;
  const StoreNode* store = nullptr;
  PrimExpr a, b;  // the loads of A and B
  VarMap lets;    // between the loops (lowering splits a fused index there), resolved in order
};

[[noreturn]] void bad_body(const Stmt& body, const std::string& why) {
  std::ostringstream os;
  os << body;
  throw InternalError(
      "internal error: a warp_mma loop's body is not the tensor-core "
      "template's register tile (" +
      why + "):\n" + os.str());
}

MmaBody read_body(const Stmt& body) {
  MmaBody out;
  Stmt s = body;
  for (;;) {
    if (auto* l = s.as<LetStmtNode>()) {
      out.lets.emplace_back(l->var.get(), substitute(l->value, out.lets));
      s = l->body;
      continue;
    }
    auto* f = s.as<ForNode>();
    if (!f) break;
    int64_t ext = 0;
    int64_t min = -1;
    if (!as_int(f->extent, &ext) || !as_int(f->min, &min) || min != 0)
      bad_body(body, "a loop of variable extent");
    out.tiles.push_back(f);
    s = f->body;
  }
  out.store = s.as<StoreNode>();
  if (!out.store || out.tiles.size() != 4) bad_body(body, "not four loops around one store");
  // ACC + A * B, or fma(A, B, ACC) once the simplifier has fused it.
  auto is_acc = [&](const PrimExpr& e) {
    auto* l = e.as<LoadNode>();
    return l && l->buffer.get() == out.store->buffer.get();
  };
  const PrimExpr& v = out.store->value;
  if (auto* call = v.as<PrimCallNode>();
      call && call->op == Intrinsic::Fma && is_acc(call->args[2])) {
    out.a = call->args[0];
    out.b = call->args[1];
    return out;
  }
  auto* add = v.as<BinaryNode>();
  if (!add || add->op != BinaryOp::Add) bad_body(body, "not an accumulation");
  auto* mul = (is_acc(add->a) ? add->b : add->a).as<BinaryNode>();
  if (!(is_acc(add->a) || is_acc(add->b)) || !mul || mul->op != BinaryOp::Mul)
    bad_body(body, "not ACC + A * B");
  out.a = mul->a;
  out.b = mul->b;
  return out;
}

int64_t extent_of(const ForNode* f) {
  int64_t e = 0;
  as_int(f->extent, &e);
  return e;
}

// Lets inside the thread loop (the fused thread index split back into warp and lane parts)
// are substituted into the fragment indices (lets_), so that the lane can be replaced.
class LowerWarpMma : public gpu::LetScopeMutator {
 public:
  explicit LowerWarpMma(MmaPrecision p) : precision_(p) {}

 protected:
  Stmt visit_for(const Stmt& s, const ForNode* op) override {
    if (op->for_kind == ForKind::WarpMma) return rewrite(op);
    if (!gpu::is_thread_kind(op->for_kind) || thread_.get()) return PrimMutator::visit_for(s, op);
    thread_ = op->var;
    Stmt out = PrimMutator::visit_for(s, op);
    thread_ = PrimVar();
    return out;
  }

 private:
  // The loop becomes `for kstep (unrolled): one mma per (mt, nt) tile of the lane's warp`.
  Stmt rewrite(const ForNode* loop) {
    EMBER_CHECK(thread_.get(), "a warp_mma loop outside a thread loop");
    EMBER_CHECK(precision_ != MmaPrecision::Highest,
                "a warp_mma loop in a build of matmul precision highest");
    MmaBody body = read_body(loop->body);
    // A is the operand of the rows (it reads the row half h, not the column pair c): the
    // product's own order is its op's (a convolution multiplies data by weights).
    auto reads = [&](const PrimExpr& e, const ForNode* f) {
      return uses_var(substitute(substitute(e, body.lets), lets_), f->var.get());
    };
    if (reads(body.a, body.tiles[3]) && !reads(body.a, body.tiles[1])) std::swap(body.a, body.b);
    EMBER_CHECK(!reads(body.a, body.tiles[3]) && !reads(body.b, body.tiles[1]),
                "warp_mma operands that read both the row half and the column pair");
    const int64_t step = mma_k(precision_), chunk = extent_of(loop);
    EMBER_CHECK(chunk % step == 0, "a warp_mma chunk of ", chunk, " is not a multiple of ", step);
    EMBER_CHECK(extent_of(body.tiles[1]) == 2 && extent_of(body.tiles[3]) == 2,
                "warp_mma tiles are not split in halves of 8 rows and pairs of columns");
    PrimVar kstep("kstep", loop->var.dtype());
    std::vector<Stmt> out;
    for (int64_t i = 0; i < extent_of(body.tiles[0]); ++i)
      for (int64_t j = 0; j < extent_of(body.tiles[2]); ++j)
        out.push_back(one_mma(loop, body, PrimExpr(kstep) * step, i, j));
    return for_loop(kstep, PrimExpr(int64_t{0}), PrimExpr(chunk / step), ForKind::Unrolled,
                    seq(out));
  }

  // One mma.sync of tile (mt = i, nt = j) at reduction offset `k0` of the chunk: each
  // fragment value is the body's own load with the chunk index, the tile indices and (for
  // B) the lane substituted as PTX's fragment layout places it.
  Stmt one_mma(const ForNode* loop, const MmaBody& body, const PrimExpr& k0, int64_t i, int64_t j) {
    const ForNode *mt = body.tiles[0], *h = body.tiles[1], *nt = body.tiles[2], *c = body.tiles[3];
    const PrimExpr tx = thread_, t = tx % 4, g = (tx / 4) % 8;
    const bool tf32 = precision_ == MmaPrecision::TF32;
    auto at = [&](const PrimExpr& e, PrimExpr k, PrimExpr half, PrimExpr col, PrimExpr lane) {
      VarMap map{{loop->var.get(), k0 + k},       {mt->var.get(), PrimExpr(i)},
                 {h->var.get(), std::move(half)}, {nt->var.get(), PrimExpr(j)},
                 {c->var.get(), std::move(col)},  {thread_.get(), std::move(lane)}};
      return simplify(substitute(substitute(substitute(e, body.lets), lets_), map));
    };
    std::vector<PrimExpr> a, b, acc;
    const PrimExpr zero(int64_t{0});
    for (int e = 0; e < (tf32 ? 4 : 8); ++e) {  // rows g (+8), columns as PTX lists them
      PrimExpr half = tf32 ? PrimExpr(int64_t{e & 1}) : PrimExpr(int64_t{(e >> 1) & 1});
      PrimExpr k = tf32 ? t + 4 * (e >> 1) : t * 2 + (e & 1) + 8 * (e >> 2);
      a.push_back(at(body.a, k, half, zero, tx));
    }
    // B's fragment column is g: read it where lane (g, t = g / 2) keeps column pair c = g % 2.
    const PrimExpr b_lane = tx - t + g / 2;
    for (int e = 0; e < (tf32 ? 2 : 4); ++e) {
      PrimExpr k = tf32 ? t + 4 * e : t * 2 + (e & 1) + 8 * (e >> 1);
      b.push_back(at(body.b, k, zero, g % 2, b_lane));
    }
    std::vector<PrimExpr> index;  // C and D: rows g, g + 8 by columns 2t, 2t + 1
    for (int e = 0; e < 4; ++e) {
      index.push_back(
          at(body.store->index, zero, PrimExpr(int64_t{e >> 1}), PrimExpr(int64_t{e & 1}), tx));
      acc.push_back(load(body.store->buffer, index.back()));
    }
    std::vector<PrimVar> d;
    std::vector<Stmt> stores;
    for (int e = 0; e < 4; ++e) {
      d.emplace_back("d" + std::to_string(e), DType::Float32);
      stores.push_back(store(body.store->buffer, index[e], d.back()));
    }
    Stmt out = seq(stores);  // every element is read before any is written
    for (int e = 3; e >= 0; --e) out = let_stmt(d[e], mma_sync(e, precision_, acc, a, b), out);
    return out;
  }

  MmaPrecision precision_;
  PrimVar thread_;
};

}  // namespace

PrimFunc lower_warp_mma(const PrimFunc& f, MmaPrecision precision) {
  PrimFunc out = f;
  out.body = LowerWarpMma(precision).mutate(f.body);
  return out;
}

}  // namespace ember::passes

// ------------------------------------------------------------------ pipeline_shared_tiles

namespace ember::passes {

namespace {

bool is_barrier(const Stmt& s) {
  auto* e = s.as<EvaluateNode>();
  auto* c = e ? e->value.as<PrimCallNode>() : nullptr;
  return c && c->op == Intrinsic::Barrier;
}

bool has_mma(const Stmt& s) {
  bool found = false;
  visit_prim(
      s,
      [&](const PrimExpr& e) {
        auto* c = e.as<PrimCallNode>();
        found |= c && c->op == Intrinsic::MmaSync;
      },
      [&](const Stmt& x) {
        auto* f = x.as<ForNode>();
        found |= f && f->for_kind == ForKind::WarpMma;
      });
  return found;
}

// A staging phase: a thread loop whose only stores copy a global element into one of
// `tiles` (a plain load: a clamped or computed operand stays synchronous).
bool is_staging(const Stmt& s, const std::set<const BufferNode*>& tiles) {
  auto* f = s.as<ForNode>();
  if (!f || !gpu::is_thread_kind(f->for_kind)) return false;
  bool ok = true, any = false;
  visit_prim(
      f->body, [](const PrimExpr&) {},
      [&](const Stmt& x) {
        auto* st = x.as<StoreNode>();
        if (!st) return;
        auto* l = st->value.as<LoadNode>();
        any = true;
        ok &= tiles.count(st->buffer.get()) && l && l->buffer->scope == BufferScope::Global;
      });
  return ok && any;
}

// Points loads and stores of the tiles at their doubled buffers, at half `half`.
class UseHalf : public PrimMutator {
 public:
  UseHalf(const std::map<const BufferNode*, Buffer>& doubled, PrimExpr half, bool async)
      : doubled_(doubled), half_(std::move(half)), async_(async) {}

 protected:
  PrimExpr visit_load(const PrimExpr& e, const LoadNode* op) override {
    auto it = doubled_.find(op->buffer.get());
    if (it == doubled_.end()) return PrimMutator::visit_load(e, op);
    return load(it->second, offset(op->buffer, mutate(op->index)));
  }
  Stmt visit_store(const Stmt& s, const StoreNode* op) override {
    auto it = doubled_.find(op->buffer.get());
    if (it == doubled_.end()) return PrimMutator::visit_store(s, op);
    PrimExpr index = offset(op->buffer, mutate(op->index));
    auto* src = op->value.as<LoadNode>();
    if (!async_ || !src) return store(it->second, index, mutate(op->value));
    return evaluate(async_copy(it->second, index, src->buffer, mutate(src->index)));
  }

 private:
  PrimExpr offset(const Buffer& b, const PrimExpr& index) const {
    return index + half_ * b->numel();
  }
  const std::map<const BufferNode*, Buffer>& doubled_;
  PrimExpr half_;
  bool async_;
};

// The reduction chunk loop of a tensor-core kernel, software-pipelined: each shared tile
// gets two halves; chunk 0 is copied before the loop (cp.async), and each iteration first
// starts the copy of the next chunk into the other half, then waits for its own chunk's
// copies, so the global loads of one chunk overlap the mma of the one before.
class PipelineSharedTiles : public PrimMutator {
 public:
  explicit PipelineSharedTiles(const Stmt& body) {
    visit_prim(
        body, [](const PrimExpr&) {},
        [&](const Stmt& s) {
          auto* a = s.as<AllocateNode>();
          if (a && a->buffer->scope == BufferScope::Shared)
            shared_bytes_ += a->buffer->numel() * dtype_bytes(a->buffer->dtype);
        });
  }

 protected:
  Stmt visit_for(const Stmt& s, const ForNode* op) override {
    int64_t count = 0;
    if (op->for_kind != ForKind::Serial || !as_int(op->extent, &count) || count < 2)
      return PrimMutator::visit_for(s, op);
    std::vector<Buffer> tiles;
    Stmt body = op->body;
    while (auto* a = body.as<AllocateNode>()) {
      if (a->buffer->scope != BufferScope::Shared) break;
      tiles.push_back(a->buffer);
      body = a->body;
    }
    auto* phases = body.as<SeqNode>();
    if (tiles.empty() || !phases || !has_mma(body)) return PrimMutator::visit_for(s, op);
    std::set<const BufferNode*> tile_set;
    for (auto& t : tiles) tile_set.insert(t.get());
    std::vector<Stmt> staging, rest;
    for (const Stmt& x : phases->seq) {
      if (rest.empty() && is_staging(x, tile_set))
        staging.push_back(x);
      else if (!(rest.empty() && is_barrier(x)))  // the barriers between stagings go
        rest.push_back(x);
    }
    bool tiles_written_later = false;
    for (const Stmt& x : rest)
      visit_prim(
          x, [](const PrimExpr&) {},
          [&](const Stmt& y) {
            auto* st = y.as<StoreNode>();
            tiles_written_later |= st && tile_set.count(st->buffer.get());
          });
    int64_t bytes = 0;  // the tiles doubled, with the kernel's other shared buffers
    for (auto& t : tiles) bytes += t->numel() * dtype_bytes(t->dtype);
    if (staging.empty() || tiles_written_later || shared_bytes_ + bytes > kMaxSharedBytes)
      return PrimMutator::visit_for(s, op);

    std::map<const BufferNode*, Buffer> doubled;
    for (auto& t : tiles)
      doubled[t.get()] = make_buffer(t->name, t->dtype, {2 * t->numel()}, BufferScope::Shared);
    const PrimExpr k = op->var;
    auto stage = [&](const PrimExpr& chunk) {
      std::vector<Stmt> out;
      UseHalf to(doubled, (chunk - op->min) % 2, true);
      for (const Stmt& x : staging)
        out.push_back(to.mutate(substitute(x, {{op->var.get(), chunk}})));
      return seq(out);
    };
    UseHalf from(doubled, (k - op->min) % 2, false);
    std::vector<Stmt> loop_body{if_then_else(k + 1 < op->min + PrimExpr(count), stage(k + 1)),
                                evaluate(async_commit()), evaluate(async_wait(1)),
                                evaluate(barrier())};
    for (const Stmt& x : rest) loop_body.push_back(from.mutate(x));
    Stmt loop = for_loop(op->var, op->min, op->extent, op->for_kind, seq(loop_body));
    Stmt out = seq({stage(op->min), evaluate(async_commit()), loop});
    shared_bytes_ += bytes;
    for (auto it = tiles.rbegin(); it != tiles.rend(); ++it)
      out = allocate(doubled.at(it->get()), out);
    return out;
  }

 private:
  int64_t shared_bytes_ = 0;
};

}  // namespace

PrimFunc pipeline_shared_tiles(const PrimFunc& f) {
  PrimFunc out = f;
  out.body = PipelineSharedTiles(f.body).mutate(f.body);
  return out;
}

}  // namespace ember::passes
