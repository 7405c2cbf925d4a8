// The default GPU schedule template (see schedule.h). A kernel is one launch, so nothing in
// it may depend on what another block wrote: every value is either inlined, or computed by
// the thread that needs it, into registers.
//
//   output stage O (spatial axes a0..an-1):  blockIdx.x, threadIdx.x = split(fuse(a0..), T)
//                                                [reductions computed here, per thread]
//                                                O[...] = epilogue            (guarded)
//   reduction R read by O (conv, dense, pool, the sums of softmax and layer norm):
//                                            computed at threadIdx.x over the element (or
//                                            row) that the thread's output reads, its
//                                            reduction loop serial inside the thread.
//
// As on the CPU, when O reads its reductions without its innermost axis (softmax reads the
// row max and sum once per row) that axis stays a serial loop inside the thread, so a row's
// reductions are computed once per row rather than once per element.
//
// T is 256 threads. The tail of a non-dividing split is guarded at O's store, but a
// reduction attached at threadIdx.x runs before that guard, and a thread past the end would
// read past its inputs; kernels with attached reductions therefore pick the largest T <= 256
// that divides the work exactly. Elementwise and injective intermediates (a conv's padded
// input included) are inlined: their clamped, guarded reads cost a few integer instructions,
// and a separate pass over memory would need a second launch.
//
// Not yet here (see the GPU issue): block-level reductions through shared memory (one block
// per row with a tree reduction and Stage::bind on the reduction split) and register or
// shared-memory tiles for conv and dense.
#include <algorithm>

#include "ember/passes/schedule.h"

namespace ember::passes {

using namespace ir;

namespace {

constexpr int64_t kThreads = 256;

bool is_reduction(const Stage& s) { return s.body().as<ReduceNode>() != nullptr; }

bool is_output(const Schedule& sch, const Stage& s) {
  for (auto& o : sch.outputs())
    if (o.ref() == s.tensor().ref()) return true;
  return false;
}

// Root reduction stages that `body` reads directly.
std::vector<Stage*> reductions_read(const Schedule& sch, const PrimExpr& body) {
  std::vector<Stage*> out;
  for (auto& s : sch.stages()) {
    if (!is_reduction(*s) || s->attach_kind() != AttachKind::Root) continue;
    bool reads = false;
    visit_prim(body, [&](const PrimExpr& e) {
      if (auto* p = e.as<ProducerLoadNode>()) reads |= p->producer == s->tensor().ref();
    });
    if (reads) out.push_back(s.get());
  }
  return out;
}

// Does `body` read `producer` at an index that uses `axis_var`?
bool reads_along(const PrimExpr& body, const TensorNode* producer, const PrimVarNode* axis_var) {
  bool found = false;
  visit_prim(body, [&](const PrimExpr& e) {
    auto* p = e.as<ProducerLoadNode>();
    if (!p || p->producer.get() != producer) return;
    for (auto& idx : p->indices)
      visit_prim(idx, [&](const PrimExpr& x) { found |= x.get() == axis_var; });
  });
  return found;
}

// Threads per block for `n` work items; `exact` asks for a divisor of n (no tail).
int64_t threads_for(int64_t n, bool exact) {
  if (n <= kThreads) return std::max<int64_t>(n, 1);
  if (!exact) return kThreads;
  for (int64_t t = kThreads; t > 1; --t)
    if (n % t == 0) return t;
  return 1;
}

// Fuses `axes` (adjacent leaves, outermost first) and spreads them over blocks and threads.
// Returns the thread axis, where per-thread work is attached.
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

// Computes `r` at `parent`'s loop `axis`, then the reductions `r` itself reads inside r's
// innermost spatial loop (a reduction of a reduction), recursively.
void attach_reduction(Schedule& sch, Stage& r, Stage& parent, const IterVar& axis) {
  r.compute_at(parent, axis);
  std::vector<Stage*> inner = reductions_read(sch, sch.expanded_body(r));
  if (inner.empty() || r.axes().empty()) return;  // none, or r is a scalar: inner stay root
  IterVar at = r.axes().back();
  for (Stage* c : inner) attach_reduction(sch, *c, r, at);
}

void schedule_output(Schedule& sch, Stage& o) {
  std::vector<IterVar> axes = o.axes();
  if (axes.empty()) return;  // a scalar: one thread computes it (and its reductions)
  PrimExpr body = sch.expanded_body(o);
  std::vector<Stage*> reds = reductions_read(sch, body);
  bool along = true;
  for (Stage* r : reds)
    along &= reads_along(body, r->tensor().operator->(), axes.back()->var.get());
  std::vector<IterVar> thread_axes = axes;
  if (!along && axes.size() >= 2) thread_axes.pop_back();  // serial inside the thread
  IterVar tx = bind_flat(o, thread_axes, !reds.empty());
  for (Stage* r : reds) attach_reduction(sch, *r, o, tx);
}

}  // namespace

void apply_gpu_schedule(Schedule& sch) {
  for (auto& s : sch.stages())
    if (!is_output(sch, *s) && !is_reduction(*s)) s->compute_inline();
  // An output that is itself a reduction accumulates in a register (cache_write), so its
  // stage becomes the per-thread loop like any epilogue.
  for (auto& o : sch.outputs())
    if (is_reduction(sch[o])) sch.cache_write(o);
  for (auto& o : sch.outputs()) schedule_output(sch, sch[o]);
  // Anything left at the root (a reduction only a scalar reads) runs, serially, in every
  // thread into that thread's own buffer before the bound nest: correct, if slow, and
  // only reached by reductions to a scalar.
}

}  // namespace ember::passes
