// The default GPU schedule (see schedule.h): three templates, tried in order, each checked
// by lowering it once and measuring the memory its kernel needs.
//
// A kernel is one launch; inside it, a block's threads run in *phases*: a phase is a loop
// bound to threadIdx at block level, and lower_gpu_phases puts a barrier after each one and
// makes the buffers those loops write shared by the block (or, for a PerThread buffer, one
// copy per thread). A value one phase writes is seen by every thread in the next, and
// running the phases one after the other on a CPU (the emulation in the tests) computes
// exactly what the GPU computes.
//
// 1. Tiled (conv2d, dense, matmul, batch_matmul: one output read at its own index from a
//    sum of products of two tensors). One block per output tile:
//
//      blockIdx.x = tile                       tile sizes: a per-axis block tile b_d (volume
//        ACC (per thread) = 0                  up to 128 x 128) and a register tile r_d
//        for ko:                               (8 x 8, or 4 x 4 in small tiles) per thread;
//          A_tile, B_tile (shared) = operands over the reduction chunk ko
//          threadIdx: for ki, ...: ACC[r_d tile] += A_tile * B_tile
//        threadIdx: O = epilogue(ACC[r_d tile]) (fused epilogue, then the only global store)
//
//    Operands are staged with cache_read (a conv's padded input reads its clamped input
//    there); the register tile loops are unrolled and each thread reuses each operand value
//    r_d times. The accumulator is allocated at block level but is PerThread: the epilogue
//    splits the tile as the anchor does, so each thread reads back only its own register
//    tile, and lower_gpu_phases keeps it in that thread's registers across the phases.
//    While the grid is small, groups of threads split the reduction inside the block
//    (split-K, reduction_groups): each group sums every groups-th chunk into its own
//    register tiles, copies them to shared memory, and the epilogue adds the groups'.
// 2. Block reduction (softmax, log_softmax, layer norm, sum, mean, global pooling: an
//    output reading row reductions with at least kMinBlockReduce elements). One block per
//    row: Schedule::tree_reduce gives each reduction a partial stage (thread f reduces
//    elements f, f + F, ...) and log2(F) tree levels in shared memory, then the threads
//    stride over the row for the epilogue. A reduction that reads another (layer norm's
//    variance reads the mean) computes it first in the same block.
// 3. Simple (everything else, and the fallback when a tile needs more memory than a block
//    has): one thread per output element (or row, when the output reads its reductions
//    once per row), reductions computed serially by that thread into registers.
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "analysis.h"
#include "ember/ir/simplify.h"
#include "ember/passes/schedule.h"
#include "ember/support/error.h"
#include "gpu_common.h"

namespace ember::passes {

using namespace ir;

namespace gpu {

bool is_output(const Schedule& sch, const Stage& s) {
  for (auto& o : sch.outputs())
    if (o.ref() == s.tensor().ref()) return true;
  return false;
}

bool is_thread_kind(ForKind k) {
  return k == ForKind::GpuThreadX || k == ForKind::GpuThreadY || k == ForKind::GpuThreadZ;
}

Stmt LetScopeMutator::visit_let_stmt(const Stmt& s, const LetStmtNode* op) {
  lets_.emplace_back(op->var.get(), substitute(op->value, lets_));
  Stmt out = PrimMutator::visit_let_stmt(s, op);
  lets_.pop_back();
  return out;
}

// Root reduction stages that `body` reads directly.
std::vector<Stage*> reductions_read(const Schedule& sch, const PrimExpr& body) {
  std::vector<Stage*> out;
  for (auto& s : sch.stages())
    if (is_reduction(*s) && s->attach_kind() == AttachKind::Root &&
        reads(body, s->tensor().operator->()))
      out.push_back(s.get());
  return out;
}

// Elementwise and injective intermediates are inlined (their clamped, guarded reads cost a
// few integer instructions; a pass over memory would need a second launch), and an output
// that is itself a reduction accumulates in a cache, so its stage is a plain epilogue.
// Returns the single output's stage, or null for a kernel with several outputs.
Stage* prepare(Schedule& sch) {
  for (auto& s : sch.stages())
    if (!is_output(sch, *s) && !is_reduction(*s)) s->compute_inline();
  for (auto& o : sch.outputs())
    if (is_reduction(sch[o])) sch.cache_write(o);
  return sch.outputs().size() == 1 ? &sch[sch.outputs()[0]] : nullptr;
}

// Fuses `axes`, splits the result by `threads` and binds (threads, serial rest) in that
// order, so consecutive threads touch consecutive elements.
void bind_strided(Stage& s, const std::vector<IterVar>& axes, int64_t threads) {
  IterVar f = s.fuse(axes);
  auto [outer, inner] = s.split(f, std::max<int64_t>(1, std::min(threads, f->extent)));
  s.reorder({inner, outer});
  s.bind(inner, ForKind::GpuThreadX);
}

// The two operands of a sum of products `a * b` of different tensors, or null.
std::pair<const ProducerLoadNode*, const ProducerLoadNode*> product_operands(const Stage& r) {
  auto* red = r.body().as<ReduceNode>();
  if (!red || red->op != ReduceOp::Sum) return {nullptr, nullptr};
  auto* mul = red->source.as<BinaryNode>();
  if (!mul || mul->op != BinaryOp::Mul) return {nullptr, nullptr};
  auto* a = mul->a.as<ProducerLoadNode>();
  auto* b = mul->b.as<ProducerLoadNode>();
  if (!a || !b || a->producer == b->producer) return {nullptr, nullptr};
  return {a, b};
}

// Does `o` read the anchor `r` at its own index (0 on a dimension of size 1, as
// broadcasting reads it)? Then the tile of one is the tile of the other.
bool reads_at_own_index(const PrimExpr& body, const Stage& o, const Stage& r) {
  const size_t n = o.axes().size();
  if (r.axes().size() != n) return false;
  bool identity = true;
  visit_prim(body, [&](const PrimExpr& e) {
    auto* p = e.as<ProducerLoadNode>();
    if (!p || p->producer != r.tensor().ref()) return;
    for (size_t d = 0; d < n; ++d) {
      int64_t c = -1;
      identity &= p->indices[d].get() == o.axes()[d]->var.get() ||
                  (o.axes()[d]->extent == 1 && as_int(p->indices[d], &c) && c == 0);
    }
  });
  return identity;
}

}  // namespace gpu

namespace {

using namespace gpu;

constexpr int64_t kThreads = 256;
constexpr int64_t kMaxLocalBytes = 1024;     // per-thread arrays beyond this spill
constexpr int64_t kMinBlockReduce = 32;      // shorter rows: one thread per row
constexpr int64_t kTileVolume = 128 * 128;   // outputs per block in the tiled template
constexpr int64_t kMinTileVolume = 32 * 32;  // ... at least, with 64 threads of 4 x 4
// Outputs per thread: 8 x 8 in tiles of at least 128 x 64 (16 operand loads from shared
// memory per 64 FMAs), 4 x 4 in smaller ones (8 per 16) so that they still have 64 threads.
constexpr int64_t kBigRegisterTile = 64, kRegisterTile = 16;
constexpr int64_t kBigTileVolume = 128 * 64;
constexpr int64_t kReduceChunk = 32;  // reduction elements staged per step
// A sum this long over fewer than kMinBlocks / 4 tiles runs a block per output instead.
constexpr int64_t kLongReduction = 256;
// Split-K inside a block (reduction_groups): each group sums at least this many products.
constexpr int64_t kSplitReduction = 128;

int64_t pow2_ceil(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

// --------------------------------------------------------------------- simple template

int64_t threads_for(int64_t n, bool exact) {
  if (n <= kThreads) return std::max<int64_t>(n, 1);
  if (!exact) return kThreads;
  for (int64_t t = kThreads; t > 1; --t)
    if (n % t == 0) return t;
  return 1;
}

IterVar bind_flat(Stage& s, const std::vector<IterVar>& axes, bool exact) {
  IterVar fused = s.fuse(axes);
  int64_t t = threads_for(fused->extent, exact);
  if (fused->extent <= t) {
    s.bind(fused, ForKind::GpuThreadX);
    return fused;
  }
  auto [bx, tx] = s.split(fused, t);
  s.bind(bx, ForKind::GpuBlockX);
  s.bind(tx, ForKind::GpuThreadX);
  return tx;
}

void attach_reduction(Schedule& sch, Stage& r, Stage& parent, const IterVar& axis) {
  r.compute_at(parent, axis);
  std::vector<Stage*> inner = reductions_read(sch, sch.expanded_body(r));
  if (inner.empty() || r.axes().empty()) return;
  IterVar at = r.axes().back();
  for (Stage* c : inner) attach_reduction(sch, *c, r, at);
}

// One thread per output element; reductions computed at the thread's loop into registers.
// When the output reads its reductions without its innermost axis (softmax reads the row
// max and sum once per row), that axis stays serial inside the thread, so a row's
// reductions are computed once. A reduction attached at threadIdx.x runs before the tail
// guard of a non-dividing split, so such kernels use a thread count that divides exactly.
bool schedule_simple(Schedule& sch) {
  prepare(sch);
  for (auto& out : sch.outputs()) {
    Stage& o = sch[out];
    std::vector<IterVar> axes = o.axes();
    if (axes.empty()) continue;  // a scalar: one thread computes it (and its reductions)
    PrimExpr body = sch.expanded_body(o);
    std::vector<Stage*> reds = reductions_read(sch, body);
    bool along = true;
    for (Stage* r : reds)
      along &= reads_along(body, r->tensor().operator->(), axes.back()->var.get());
    std::vector<IterVar> thread_axes = axes;
    if (!along && axes.size() >= 2) thread_axes.pop_back();
    IterVar tx = bind_flat(o, thread_axes, !reds.empty());
    for (Stage* r : reds) attach_reduction(sch, *r, o, tx);
  }
  return true;
}

// --------------------------------------------------------------------- tiled template

// The block's tile (`tile`, per axis of `o`) and each thread's register tile (`reg`) for
// the product `a * b` that `r` sums; returns the threads per block.
//
// Axes only `a` depends on form one side of the tile, axes only `b` depends on the
// other; axes both depend on (batch) get a tile of 1. Each side's volume goes to its
// innermost axes first, and so does its register tile.
int64_t size_block_tile(const Stage& o, const Stage& r, const ProducerLoadNode* a,
                        const ProducerLoadNode* b, int64_t volume, std::vector<int64_t>& tile,
                        std::vector<int64_t>& reg) {
  const size_t n = o.axes().size();
  tile.assign(n, 1);
  reg.assign(n, 1);
  std::vector<size_t> side[2];
  for (size_t d = 0; d < n; ++d) {
    const PrimVarNode* v = r.axes()[d]->var.get();
    bool in_a = false, in_b = false;
    for (auto& i : a->indices) in_a |= uses_var(i, v);
    for (auto& i : b->indices) in_b |= uses_var(i, v);
    if (in_a != in_b) side[in_a ? 0 : 1].push_back(d);
  }
  int64_t ext[2] = {1, 1};
  for (int s = 0; s < 2; ++s)
    for (size_t d : side[s]) ext[s] *= o.axes()[d]->extent;
  int64_t want[2];
  int64_t side_cap = 64;  // square tiles in the biggest volume (128 x 128)
  while (side_cap * side_cap * 4 <= volume) side_cap *= 2;
  want[0] = std::min(pow2_ceil(ext[0]), side_cap);
  want[1] = std::min({pow2_ceil(ext[1]), volume / want[0], kThreads});
  want[0] = std::min(want[0], volume / want[1]);
  int64_t reg_side = 1;
  int64_t reg_volume = volume >= kBigTileVolume ? kBigRegisterTile : kRegisterTile;
  while (reg_side * reg_side < reg_volume) reg_side *= 2;
  for (int s = 0; s < 2; ++s) {
    int64_t left = want[s], reg_left = std::min(reg_side, want[s]);
    for (auto it = side[s].rbegin(); it != side[s].rend(); ++it) {
      tile[*it] = std::min(left, pow2_ceil(o.axes()[*it]->extent));
      left /= tile[*it];
      reg[*it] = std::min(reg_left, tile[*it]);
      reg_left /= reg[*it];
    }
  }
  int64_t threads = 1;
  for (size_t d = 0; d < n; ++d) threads *= tile[d] / reg[d];
  return threads;
}

// Output: one block per tile; each thread applies the epilogue to its own register tile,
// split as the anchor's (accumulate_in_block), so it reads the accumulator it computed.
// Returns the block loop.
IterVar bind_output_tiles(Stage& o, const std::vector<int64_t>& tile,
                          const std::vector<int64_t>& reg) {
  std::vector<IterVar> outer, threads, regs;
  for (size_t d = 0; d < tile.size(); ++d) {
    auto [xo, xi] = o.split(o.axes()[d], tile[d]);
    auto [x, t] = o.split(xi, tile[d] / reg[d]);
    outer.push_back(xo);
    threads.push_back(t);
    regs.push_back(x);
  }
  std::vector<IterVar> order = outer;
  order.insert(order.end(), threads.begin(), threads.end());
  order.insert(order.end(), regs.begin(), regs.end());
  o.reorder(order);
  IterVar bx = o.fuse(outer);
  o.bind(bx, ForKind::GpuBlockX);
  o.bind(o.fuse(threads), ForKind::GpuThreadX);
  for (auto& x : regs)
    if (x->extent > 1) o.unroll(x);
  return bx;
}

// Products summed per element of the outermost reduction axis (a conv's 3x3 taps per channel).
int64_t inner_reduction(const Stage& r) {
  std::vector<IterVar> raxes = r.reduce_axes();
  int64_t rest = 1;
  for (size_t k = 1; k < raxes.size(); ++k) rest *= raxes[k]->extent;
  return rest;
}

// Reduction elements of the outermost reduction axis (of `extent`) staged per step: about
// `target`, a divisor of the extent where one is at least half of it. A chunk that does not
// divide leaves a guard in the register tile's loop, which keeps LLVM from sharing the
// tile's operand loads between its FMAs (a 3x3 conv over 128 channels in chunks of 3
// loaded twice per FMA).
int64_t reduce_chunk(int64_t extent, int64_t target) {
  target = std::clamp<int64_t>(target, 1, extent);
  for (int64_t c = target; c * 2 >= target; --c)
    if (extent % c == 0) return c;
  return target;
}

// Splits each axis of `s` by its threads (tile / reg), the register tile strided by the
// threads; returns the thread and register loops.
std::pair<std::vector<IterVar>, std::vector<IterVar>> split_by_threads(
    Stage& s, const std::vector<int64_t>& tile, const std::vector<int64_t>& reg, SplitTail tail) {
  std::vector<IterVar> thread_axes, reg_axes;
  for (size_t d = 0; d < reg.size(); ++d) {
    auto [x, t] = s.split(s.axes()[d], tile[d] / reg[d], tail);
    thread_axes.push_back(t);
    reg_axes.push_back(x);
  }
  return {thread_axes, reg_axes};
}

// The anchor: accumulated in the block's `tile` at `bx`, a reduction chunk at a time, each
// thread's `reg` register tile unrolled. A split anchor (`chunked`: split_reduction's
// partials) has its chunk loops already; otherwise the outermost reduction axis is split
// here. Returns the chunk loop.
IterVar accumulate_in_block(Stage& r, Stage& o, const IterVar& bx, const std::vector<int64_t>& tile,
                            const std::vector<int64_t>& reg, bool chunked) {
  r.compute_at(o, bx);
  std::vector<IterVar> raxes = r.reduce_axes();
  IterVar ko, ki;
  if (chunked) {
    ko = raxes[0];
    ki = raxes[1];
    raxes.erase(raxes.begin());
  } else {
    int64_t rest = inner_reduction(r);
    int64_t chunk = reduce_chunk(raxes[0]->extent, (kReduceChunk + rest - 1) / rest);
    std::tie(ko, ki) = r.split(raxes[0], chunk);
  }
  // A thread's register tile is strided by the threads along each axis (thread t of T owns
  // t, t + T, ...): neighbouring threads read neighbouring rows of an operand tile, which
  // the tiles' row pad puts in different banks. The register tile's split is padded
  // (SplitTail::Pad), so no guard reaches the tile's loop, where it made LLVM load both
  // operands once per FMA; a tile clipped at the output's edge keeps a guard that depends on
  // the thread alone, which lower_schedule tests once per thread outside the chunk's loops
  // (calibration: GPU register tile guards). Padding did not pay while the accumulator was
  // block-shared. Reading the edge's inputs instead of that last guard made bound inference
  // widen a strided conv's operand tile past shared memory (a block per output then).
  auto [thread_axes, reg_axes] = split_by_threads(r, tile, reg, SplitTail::Pad);
  std::vector<IterVar> rorder{ko};
  rorder.insert(rorder.end(), thread_axes.begin(), thread_axes.end());
  rorder.push_back(ki);
  for (size_t k = 1; k < raxes.size(); ++k) rorder.push_back(raxes[k]);
  rorder.insert(rorder.end(), reg_axes.begin(), reg_axes.end());
  r.reorder(rorder);
  r.bind(r.fuse(thread_axes), ForKind::GpuThreadX);
  for (auto& x : reg_axes)
    if (x->extent > 1) r.unroll(x);
  r.keep_per_thread();
  return ko;
}

// Groups of threads that split the anchor's reduction inside a block (split-K), and the
// chunk each group stages per step; {1, 0} for none. While even the smallest tiles leave
// most multiprocessors idle (a batch-1 conv of 7x7 pixels, M = 32 rows of a dense), a block
// of 64 threads has two warps to hide every load's latency: the groups give it up to
// kThreads threads, each group summing every groups-th chunk into its own register tiles,
// added in the epilogue. Only where the outermost reduction axis divides into the groups.
// The groups together stage about `staged` reduction elements a step.
std::pair<int64_t, int64_t> reduction_groups(const Stage& r, int64_t blocks, int64_t threads,
                                             int64_t staged) {
  if (blocks >= kMinBlocks) return {1, 0};
  const int64_t outer = r.reduce_axes()[0]->extent, rest = inner_reduction(r);
  for (int64_t groups = kThreads / threads; groups > 1; groups /= 2) {
    if (outer % groups != 0 || outer * rest / groups < kSplitReduction) continue;
    int64_t per_group = outer / groups;
    int64_t chunk = reduce_chunk(per_group, (staged / groups + rest - 1) / rest);
    if (per_group % chunk == 0) return {groups, chunk};
  }
  return {1, 0};
}

// Do both operands run along the sum's outermost reduction axis in memory (their last
// index is it: a dense's x[i, k] and w[j, k])? Only then do the split's groups stage twice
// the unsplit chunk a step: that pays on a dense's rows, not on ResNet-50's 1x1 convs at
// batch 1, whose operands are channel planes 16 KB apart (calibration: GPU split-K
// staging).
bool reduction_innermost(const Stage& r, const ProducerLoadNode* a, const ProducerLoadNode* b) {
  const PrimVarNode* k = r.reduce_axes()[0]->var.get();
  for (const ProducerLoadNode* p : {a, b})
    if (p->indices.empty() || p->indices.back().get() != k) return false;
  return true;
}

// The groups' partial tiles, copied from each thread's registers into the block's shared
// memory at `bx`, split as the accumulators were (the thread owns the same elements) but
// guarded at the output's edge, as the epilogue is.
void share_partials(Stage& p, Stage& o, const IterVar& bx, const std::vector<int64_t>& tile,
                    const std::vector<int64_t>& reg) {
  p.compute_at(o, bx);
  auto [thread_axes, reg_axes] = split_by_threads(p, tile, reg, SplitTail::Guard);
  std::vector<IterVar> order = thread_axes;
  order.insert(order.end(), reg_axes.begin(), reg_axes.end());
  p.reorder(order);
  p.bind(p.fuse(thread_axes), ForKind::GpuThreadX);
  for (auto& x : reg_axes)
    if (x->extent > 1) p.unroll(x);
}

bool schedule_tiled(Schedule& sch, int64_t volume, int64_t split_staged) {
  const bool split = split_staged > 0;
  Stage* o = prepare(sch);
  if (!o || o->axes().empty()) return false;
  PrimExpr body = sch.expanded_body(*o);
  std::vector<Stage*> reds = reductions_read(sch, body);
  if (reds.size() != 1) return false;
  Stage& r = *reds[0];
  auto [a, b] = product_operands(r);
  if (!a || !reductions_read(sch, sch.expanded_body(r)).empty()) return false;
  if (!reads_at_own_index(body, *o, r)) return false;

  // Smaller tiles while the grid would leave most multiprocessors idle (an H100 has 132).
  int64_t outputs = 1;
  for (const IterVar& x : o->axes()) outputs *= x->extent;
  while (volume > kMinTileVolume && outputs / volume < kMinBlocks) volume /= 2;
  std::vector<int64_t> tile, reg;
  int64_t threads = size_block_tile(*o, r, a, b, volume, tile, reg);
  if (threads < 32) return false;  // too small a tile to be worth a block
  // Split-K inside the block while the grid is small (reduction_groups), staging about
  // `split_staged` reduction elements a step; 0: no split.
  if (split_staged > kReduceChunk && !reduction_innermost(r, a, b)) return false;
  auto [groups, chunk] = reduction_groups(r, outputs / volume, threads, split_staged);
  if (split && groups == 1) return false;
  // Few outputs over a long reduction (a batch-1 dense, a 7x7 conv of 512 channels): the
  // smallest tiles leave most of the GPU idle, each block summing thousands of products;
  // a block per output, its threads sharing the sum (schedule_block_reduce), fills it better
  // below 32 tiles, or below 8 where groups of threads split the sum (ResNet-50's 3x3 convs
  // of 7 x 7 pixels at batch 1, 24 tiles, run faster split; calibration: GPU block reduce).
  int64_t summed = 1;
  for (const IterVar& k : r.reduce_axes()) summed *= k->extent;
  if (outputs / volume < kMinBlocks / (split ? 16 : 4) && summed >= kLongReduction) return false;

  IterVar bx = bind_output_tiles(*o, tile, reg);
  Stage* acc = &r;
  if (split) {
    // The groups' partials get a leading axis of `groups` threads with a register tile of
    // 1; `r` becomes their sum, read by the epilogue.
    Tensor part = sch.split_reduction(r.tensor(), groups, chunk);
    r.compute_inline();
    acc = &sch[sch.cache_write(part)];
    tile.insert(tile.begin(), groups);
    reg.insert(reg.begin(), 1);
    share_partials(sch[part], *o, bx, tile, reg);
    threads *= groups;
  }

  // Operands: staged per chunk by all threads (cache_read of a computed operand, such as
  // a conv's padded input, computes it there from its inlined producers).
  std::vector<Tensor> copies;
  for (const TensorRef& p : {a->producer, b->producer})
    copies.push_back(sch.cache_read(Tensor(p), {acc->tensor()}));  // `a`, `b` now dangle

  IterVar ko = accumulate_in_block(*acc, *o, bx, tile, reg, split);
  for (const Tensor& copy : copies) {
    Stage& c = sch[copy];
    c.compute_at(*acc, ko);
    bind_strided(c, c.axes(), threads);
    c.pad_rows(1);  // rows of kReduceChunk (32) words would all start in one bank
  }
  return true;
}

// ------------------------------------------------------------ block reduction template

// Reductions reachable from `body` through reductions, producers first.
void collect_reductions(Schedule& sch, const PrimExpr& body, std::vector<Stage*>& out) {
  for (Stage* r : reductions_read(sch, body)) {
    if (std::find(out.begin(), out.end(), r) != out.end()) continue;
    collect_reductions(sch, sch.expanded_body(*r), out);
    if (std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
  }
}

// Is the longest of `reds` (all with output axes) long enough for a block of threads? A
// sum of products qualifies alone (the tiled template declined it: too few outputs), not
// beside another reduction (a conv feeding a pooling: the tree would recompute it per
// element; the simple template computes it once per thread).
bool worth_block_reduce(const std::vector<Stage*>& reds) {
  int64_t longest = 0;
  for (Stage* r : reds) {
    if (r->axes().empty() || (reds.size() > 1 && product_operands(*r).first)) return false;
    int64_t total = 1;
    for (auto& k : r->reduce_axes()) total *= k->extent;
    longest = std::max(longest, total);
  }
  return longest >= kMinBlockReduce;
}

// Each reduction as partials and a tree, keyed by the tree's last level, with the rank of
// the reduction's output.
struct ReductionTrees {
  std::map<const TensorNode*, std::vector<Tensor>> tree_of_top;
  std::map<const TensorNode*, size_t> rank;
};

// One block per row (the fused `rows`), its threads strided over the row's elements
// (`in_row`). Returns the block loop.
IterVar bind_rows(Stage& o, std::vector<IterVar> rows, const std::vector<IterVar>& in_row) {
  std::vector<IterVar> order = rows;
  order.insert(order.end(), in_row.begin(), in_row.end());
  o.reorder(order);
  IterVar bx;
  if (in_row.empty()) {
    // One element per row, stored by one thread: a loop of one thread split off the last
    // row axis before the fuse, so the row stays affine in the block index (and the trees
    // computed at the block loop cover one row).
    auto [r, t] = o.split(rows.back(), 1);
    rows.back() = r;
    bx = o.fuse(rows);
    o.bind(bx, ForKind::GpuBlockX);
    o.bind(t, ForKind::GpuThreadX);
  } else {
    bx = o.fuse(rows);
    o.bind(bx, ForKind::GpuBlockX);
    int64_t row = 1;
    for (auto& ax : in_row) row *= ax->extent;
    bind_strided(o, in_row, std::min(pow2_ceil(row), kThreads));
  }
  return bx;
}

// A tree's last level is computed at `axis` of `parent`, each level inside the next one's
// row loop, and the reductions its partials read inside the partials' row loop.
void attach_tree(Schedule& sch, const ReductionTrees& trees, const TensorNode* top, Stage& parent,
                 const IterVar& axis) {
  const std::vector<Tensor>& tree = trees.tree_of_top.at(top);
  size_t n = trees.rank.at(top);
  Stage* at = &parent;
  IterVar at_axis = axis;
  for (auto it = tree.rbegin(); it != tree.rend(); ++it) {
    Stage& s = sch[*it];
    s.compute_at(*at, at_axis);
    s.bind(s.axes()[n], ForKind::GpuThreadX);
    at = &s;
    at_axis = s.axes()[n - 1];
  }
  PrimExpr partial = sch.expanded_body(*at);
  for (auto& [t, inner] : trees.tree_of_top)
    if (sch[inner.back()].attach_kind() == AttachKind::Root && reads(partial, t))
      attach_tree(sch, trees, t, *at, at_axis);
}

bool schedule_block_reduce(Schedule& sch) {
  Stage* o = prepare(sch);
  if (!o || o->axes().empty()) return false;
  PrimExpr body = sch.expanded_body(*o);
  std::vector<Stage*> reds;
  collect_reductions(sch, body, reds);
  if (reds.empty() || !worth_block_reduce(reds)) return false;

  // The output's row axes are those at which it reads a reduction; the rest (the row's
  // elements) are strided over by the block's threads.
  std::vector<IterVar> rows, in_row;
  for (auto& ax : o->axes()) {
    bool row = false;
    for (Stage* r : reds) row |= reads_along(body, r->tensor().operator->(), ax->var.get());
    (row ? rows : in_row).push_back(ax);
  }
  if (rows.empty()) return false;

  // Each reduction as partials and a tree; the reduction itself becomes a read of the
  // tree's last level, inlined into its readers.
  ReductionTrees trees;
  for (Stage* r : reds) {
    int64_t total = 1;
    for (auto& k : r->reduce_axes()) total *= k->extent;
    std::vector<Tensor> tree = sch.tree_reduce(r->tensor(), std::min(pow2_ceil(total), kThreads));
    trees.tree_of_top[tree.back().operator->()] = tree;
    trees.rank[tree.back().operator->()] = r->axes().size();
    r->compute_inline();
  }

  IterVar bx = bind_rows(*o, rows, in_row);
  body = sch.expanded_body(*o);  // now reads the trees
  for (auto& s : sch.stages()) {
    const TensorNode* t = s->tensor().operator->();
    if (trees.tree_of_top.count(t) && s->attach_kind() == AttachKind::Root && reads(body, t))
      attach_tree(sch, trees, t, *o, bx);
  }
  for (auto& [t, tree] : trees.tree_of_top)
    if (sch[tree.back()].attach_kind() == AttachKind::Root) return false;  // read elsewhere
  return true;
}

// ---------------------------------------------------------------------------- checking

// Shared bytes per block and the largest per-thread array of a lowered kernel.
struct Footprint {
  int64_t shared = 0, local = 0;
};

class Measure : public PrimVisitor {
 public:
  Footprint fp;

  using PrimVisitor::visit;
  void visit(const PrimExpr&) override {}  // expressions allocate nothing

 protected:
  void visit_for(const ForNode* op) override {
    bool outer = in_thread_;
    in_thread_ |= is_thread_kind(op->for_kind);
    PrimVisitor::visit_for(op);
    in_thread_ = outer;
  }
  void visit_allocate(const AllocateNode* op) override {
    int64_t bytes = op->buffer->numel() * dtype_bytes(op->buffer->dtype);
    if (op->buffer->scope == BufferScope::PerThread)
      ;  // each thread's register tile (at most kBigRegisterTile values)
    else if (in_thread_)
      fp.local = std::max(fp.local, bytes);
    else
      fp.shared += bytes;  // an upper bound: buffers only one thread writes stay local
    PrimVisitor::visit_allocate(op);
  }

 private:
  bool in_thread_ = false;
};

// Lowers a template on a scratch schedule of the same outputs; true when it applies and
// its kernel fits in a block.
bool fits(const std::vector<Tensor>& outputs, const std::function<bool(Schedule&)>& tmpl) {
  Schedule trial(outputs);
  if (!tmpl(trial)) return false;
  std::vector<Tensor> inputs;
  for (auto& t : topo_order(outputs))
    if (t->is_placeholder()) inputs.push_back(t);
  Measure m;
  m.visit(lower_schedule(trial, "probe", inputs).body);
  return m.fp.shared <= kMaxSharedBytes && m.fp.local <= kMaxLocalBytes;
}

}  // namespace

void apply_gpu_schedule(Schedule& sch, MmaPrecision precision) {
  // (name, template): the name the reports show, with the tiling it tried.
  std::vector<std::pair<std::string, std::function<bool(Schedule&)>>> templates;
  // Tensor cores where the precision allows: the largest blocks, then the largest chunk,
  // whose tiles fit.
  if (precision != MmaPrecision::Highest)
    for (size_t tiling : {0, 1, 2})
      for (int64_t chunk : {32, 16, 8})
        templates.emplace_back(
            "tensor_core(tiling=" + std::to_string(tiling) + ",chunk=" + std::to_string(chunk) +
                ")",
            [=](Schedule& s) { return schedule_tensor_core(s, precision, chunk, tiling); });
  // Split-K staging twice the unsplit tile's chunk first (GEMM panels only:
  // reduction_innermost), then one chunk, then no split (a stride-2 conv's wide operand
  // tiles did not fit split).
  for (int64_t volume : {kTileVolume, kTileVolume / 4, kTileVolume / 16})
    for (int64_t staged : {2 * kReduceChunk, kReduceChunk, int64_t{0}})
      templates.emplace_back(
          "tiled(volume=" + std::to_string(volume) + ",staged=" + std::to_string(staged) + ")",
          [=](Schedule& s) { return schedule_tiled(s, volume, staged); });
  templates.emplace_back("block_reduce", schedule_block_reduce);
  for (auto& [name, tmpl] : templates)
    if (fits(sch.outputs(), tmpl)) {
      tmpl(sch);
      sch.set_template(name);
      return;
    }
  schedule_simple(sch);
  sch.set_template("simple");
}

// ------------------------------------------------------------------------ phases on GPU

namespace {

// Gives each thread its own elements of a PerThread allocation at block level. Inside a
// thread loop, an access's index with the thread index set to 0 (lets substituted) is the
// thread's offset into its own copy; what the thread index added to it must be the same
// expression of the thread index in every access, so that a thread owns the same elements
// in every phase (the schedule strides the register tile and its epilogue alike). The
// buffer becomes Local: one copy per thread, which the unrolled register tile keeps in
// registers.
class PrivatizePerThread : public LetScopeMutator {
 public:
  using PrimMutator::mutate;
  Stmt mutate(const Stmt& s) override {
    auto* op = s.as<AllocateNode>();
    if (!op || op->buffer->scope != BufferScope::PerThread) return PrimMutator::mutate(s);
    const Buffer& b = op->buffer;
    Buffer local = make_buffer(b->name, b->dtype, b->shape, BufferScope::Local);
    // Inside a thread loop it is one thread's anyway: its indices stay.
    targets_[b.get()] = Target{local, thread_ == nullptr, PrimExpr(), ""};
    Stmt body = mutate(op->body);
    targets_.erase(b.get());
    return allocate(local, body);
  }

 protected:
  // Lets and loops of one iteration are substituted into the indices (a grid of one block
  // along an axis leaves its block index in the epilogue's index but not in the anchor's).
  Stmt visit_for(const Stmt& s, const ForNode* op) override {
    int64_t extent = 0;
    bool single = as_int(op->extent, &extent) && extent == 1;
    if (single) lets_.emplace_back(op->var.get(), op->min);
    const PrimVarNode* outer = thread_;
    if (is_thread_kind(op->for_kind) && !thread_) thread_ = op->var.get();
    Stmt out = PrimMutator::visit_for(s, op);
    thread_ = outer;
    if (single) lets_.pop_back();
    return out;
  }
  PrimExpr visit_load(const PrimExpr& e, const LoadNode* op) override {
    PrimExpr base = PrimMutator::visit_load(e, op);
    auto* l = base.as<LoadNode>();
    auto it = targets_.find(l->buffer.get());
    return it == targets_.end() ? base : load(it->second.to, own_index(it, l->index));
  }
  Stmt visit_store(const Stmt& s, const StoreNode* op) override {
    Stmt base = PrimMutator::visit_store(s, op);
    auto* st = base.as<StoreNode>();
    auto it = targets_.find(st->buffer.get());
    if (it == targets_.end()) return base;
    return store(it->second.to, own_index(it, st->index), st->value);
  }

 private:
  struct Target {
    Buffer to;
    bool rewrite = false;  // allocated at block level
    PrimExpr thread_part;  // of the first access, in terms of `tid_`
    std::string first;
  };
  using Targets = std::map<const BufferNode*, Target>;

  PrimExpr own_index(Targets::iterator it, const PrimExpr& index) {
    Target& target = it->second;
    if (!target.rewrite) return index;
    const std::string& name = it->first->name;
    EMBER_CHECK(thread_, "buffer ", name, " is kept per thread but accessed outside a thread loop");
    PrimExpr full = substitute(index, lets_);
    PrimExpr own = simplify(substitute(full, {{thread_, PrimExpr(int64_t{0})}}));
    PrimExpr part = simplify(substitute(full - own, {{thread_, PrimExpr(tid_)}}));
    bool only_tid = true;
    visit_prim(part, [&](const PrimExpr& x) {
      if (auto* v = x.as<PrimVarNode>()) only_tid &= v == tid_.get();
    });
    std::ostringstream at;
    at << index;
    EMBER_CHECK(only_tid, "buffer ", name, " is kept per thread, but its index ", at.str(),
                " does not separate into the thread's part and the rest");
    if (!target.thread_part) {
      target.thread_part = part;
      target.first = at.str();
    }
    EMBER_CHECK(structural_equal(part, target.thread_part), "buffer ", name,
                " is kept per thread, but its accesses ", target.first, " and ", at.str(),
                " give a thread different elements");
    return own;
  }

  const PrimVarNode* thread_ = nullptr;
  Targets targets_;
  PrimVar tid_{"tid"};
};

// Allocations outside every thread loop that a thread loop writes become shared: the
// block's threads compute them together. (One written outside thread loops is computed by
// every thread for itself and stays local.)
class PromoteShared : public PrimMutator {
 public:
  bool any_shared = false;

  Stmt mutate(const Stmt& s) override {
    if (!s) return s;
    auto* op = s.as<AllocateNode>();
    if (!op || depth_ > 0) return PrimMutator::mutate(s);
    std::set<const BufferNode*> outer;
    outer.swap(written_in_thread_);
    Stmt body = mutate(op->body);
    bool shared = written_in_thread_.count(op->buffer.get()) > 0 &&
                  op->buffer->scope != BufferScope::PerThread;  // PrivatizePerThread's
    written_in_thread_.insert(outer.begin(), outer.end());
    any_shared |= shared || op->buffer->scope == BufferScope::Shared;
    if (!shared) return body.same_as(op->body) ? s : allocate(op->buffer, body);
    check_no_block_level_store(body, op->buffer.get());
    Buffer sh =
        make_buffer(op->buffer->name, op->buffer->dtype, op->buffer->shape, BufferScope::Shared);
    return allocate(sh, swap_buffers(body, {{op->buffer.get(), sh}}));
  }

 protected:
  Stmt visit_for(const Stmt& s, const ForNode* op) override {
    if (!is_thread_kind(op->for_kind)) return PrimMutator::visit_for(s, op);
    visit_prim(
        op->body, [](const PrimExpr&) {},
        [&](const Stmt& x) {
          if (auto* st = x.as<StoreNode>()) written_in_thread_.insert(st->buffer.get());
        });
    ++depth_;
    Stmt out = PrimMutator::visit_for(s, op);
    --depth_;
    return out;
  }

 private:
  // Every thread runs block-level code: a store there to a shared buffer would race.
  static void check_no_block_level_store(const Stmt& s, const BufferNode* buf) {
    struct Check : PrimVisitor {
      const BufferNode* buf;
      explicit Check(const BufferNode* b) : buf(b) {}
      using PrimVisitor::visit;
      void visit(const PrimExpr&) override {}
      void visit_for(const ForNode* op) override {
        if (!is_thread_kind(op->for_kind)) PrimVisitor::visit_for(op);
      }
      void visit_store(const StoreNode* op) override {
        EMBER_CHECK(op->buffer.get() != buf, "buffer ", buf->name,
                    " is shared by a block's threads but also written outside a thread loop");
      }
    };
    Check(buf).visit(s);
  }

  int depth_ = 0;  // enclosing thread loops
  std::set<const BufferNode*> written_in_thread_;
};

// A barrier after each thread loop at block level: what follows may read what the loop
// wrote, or (in the next iteration of an enclosing loop) overwrite what it read. Block-level
// code depends only on block indices and serial loops, so every thread of a block reaches
// the same barriers.
class InsertBarriers : public PrimMutator {
 protected:
  Stmt visit_for(const Stmt& s, const ForNode* op) override {
    if (!is_thread_kind(op->for_kind)) return PrimMutator::visit_for(s, op);
    return seq({s, evaluate(barrier())});  // nothing inside a thread loop changes
  }
};

}  // namespace

PrimFunc lower_gpu_phases(const PrimFunc& f) {
  PrimFunc out = f;
  PromoteShared promote;
  out.body = PrivatizePerThread().mutate(promote.mutate(f.body));
  // Without shared memory, threads never read each other's values: no barrier is needed.
  if (promote.any_shared) out.body = InsertBarriers().mutate(out.body);
  return out;
}

}  // namespace ember::passes
