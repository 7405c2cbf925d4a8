// Kernel work from the loop nest, and the cycles it is estimated to take.
//
// The count walks the lowered loop IR, so it sees exactly what the schedule made of a group:
// a GEMM recomputed per element of a reduction is a reduction loop around the GEMM's loops,
// a producer recomputed per tap of a window is its arithmetic inside the window's loops.
// Every expression counts the product of the extents of the loops around it; a loop whose
// extent is not a constant (a causal mask's triangle) counts its largest extent. Index
// arithmetic (Int64) is not counted: it is a few scalar instructions per loop, not per
// element; a vector load or store counts by its access pattern (contiguous, strided, gather).
// A subexpression repeated within one statement counts once (LLVM's CSE keeps one
// copy). The cycle estimate is deliberately simple: the busiest execution port (FMA, load,
// store), or the latency of the dependency chains where the out-of-order window cannot
// overlap enough of them (two transcendental functions fused into one chain take longer per
// element than the two apart: the window holds half the elements), phase by phase: the
// statements of a sequence that are each too long for the window to overlap with their
// neighbours (a layer norm's statistics, then its normalize pass) add up, so one phase's
// accumulation chain does not hide another's epilogue. Then the longer of that and the
// kernel's inputs and outputs streamed once from memory (the prefetcher overlaps them with
// the arithmetic), plus a fixed cost per kernel. Fusion saves the fixed cost, and the
// transfers of a kernel that memory bounds. It ranks alternatives; it does not predict
// milliseconds.
#include "ember/passes/fusion_cost.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "ember/ir/loop_sums.h"
#include "ember/ir/simplify.h"
#include "ember/ir/transposed_loads.h"
#include "ember/passes/annotate_loops.h"

namespace ember::passes {

using namespace ir;

namespace {

// Work under this runs serially: split over two threads it would save half of itself, no
// more than the dispatch costs (MachineModel::dispatch_cycles), with the estimate's slack
// (calibration: parallel grain).
constexpr double kParallelGrainCycles = 3000;

class Counter {
 public:
  explicit Counter(const MachineModel& m) : m_(m) {}
  KernelWork work;

  // Ends the phase `p`: its busiest resource, plus its own inner phases, runs after the
  // phases before it.
  void end_phase(const KernelWork& p) {
    double ports = busiest(p);
    phase_.cycles += p.cycles + ports;
    if (ports > costliest_phase_) {
      costliest_phase_ = ports;
      work.latency_bound = p.latency_cycles >= ports && ports > 0;
    }
  }

  // The kernel's time: what is left outside the phases is one more phase.
  void finish() {
    KernelWork rest = phase_;
    phase_ = KernelWork{};
    end_phase(rest);
    work.cycles = phase_.cycles;
  }

  double busiest(const KernelWork& p) const {
    return std::max({p.instructions / m_.fma_ports, p.loads / m_.load_ports, p.stores,
                     p.chain_cycles, p.latency_cycles});
  }

  // `runs`: how often `s` runs; `width`: the lanes of the vector loop around it (1 outside).
  void stmt(const Stmt& s, double runs, int64_t width) {
    if (!s) return;
    switch (s.kind()) {
      case StmtKind::For:
        return for_stmt(*s.as<ForNode>(), runs, width);
      case StmtKind::Store:
        return store_stmt(*s.as<StoreNode>(), runs, width);
      case StmtKind::Allocate:
        return stmt(s.as<AllocateNode>()->body, runs, width);
      case StmtKind::LetStmt: {
        auto* l = s.as<LetStmtNode>();
        expr(l->value, runs, width);
        if (auto b = const_bound(l->value, ranges_)) ranges_[l->var.get()] = *b;
        std::map<const PrimExprNode*, double> memo;
        var_depth_[l->var.get()] = depth(l->value, memo);
        return stmt(l->body, runs, width);
      }
      case StmtKind::IfThenElse:
        return if_stmt(*s.as<IfThenElseNode>(), runs, width);
      case StmtKind::Seq:
        return seq_stmt(s.as<SeqNode>()->seq, runs, width);
      case StmtKind::Evaluate:
        return expr(s.as<EvaluateNode>()->value, runs, width);
    }
  }

 private:
  void for_stmt(const ForNode& f, double runs, int64_t width) {
    int64_t extent = extent_of(f.extent);
    work.parallel |= f.for_kind == ForKind::Parallel;
    if (int64_t lo; as_int(f.min, &lo)) ranges_[f.var.get()] = {lo, lo + extent - 1};
    double unroll = unroll_;
    if (f.for_kind == ForKind::Vectorized) {
      const PrimVarNode* outer = lane_;
      lane_ = f.var.get();
      stmt(f.body, runs, width * extent);
      lane_ = outer;
    } else if (width == 1 && f.annotations.sum_accumulators) {
      // The code generator keeps it rolled and LLVM vectorizes it into the annotated number
      // of independent vector accumulators: priced as one vector loop whose chain is
      // extent / (lanes x accumulators) dependent steps, not one per element.
      const int64_t lanes = m_.lanes(f.body.as<StoreNode>()->buffer->dtype);
      const double accumulators = static_cast<double>(lanes * f.annotations.sum_accumulators);
      const double steps = std::ceil(static_cast<double>(extent) / accumulators);
      const PrimVarNode* outer = lane_;
      lane_ = f.var.get();
      unroll_ = 1.0 / steps;  // store_stmt charges runs / unroll_ latencies
      stmt(f.body, runs, extent);
      lane_ = outer;
      // Then the accumulators' lanes are added up: log2(lanes x chains) dependent adds.
      add(&KernelWork::chain_cycles, runs * std::log2(accumulators) * m_.fma_latency);
    } else {
      // Unrolled copies of an accumulation are independent chains; a loop that is not
      // unrolled runs its iterations' chains one after another.
      unroll_ = f.for_kind == ForKind::Unrolled ? unroll_ * static_cast<double>(extent) : 1;
      auto transposed = f.annotations.transposed_blocks ? transposed_loads(&f) : TransposedLoads{};
      for (const TransposedLoad& t : transposed.loads) transposed_.insert(t.load);
      stmt(f.body, runs * static_cast<double>(extent), width);
      for (const TransposedLoad& t : transposed.loads) transposed_.erase(t.load);
    }
    unroll_ = unroll;
  }

  void store_stmt(const StoreNode& st, double runs, int64_t width) {
    double before = work.instructions + work.loads + work.stores;
    expr(st.value, runs, width);
    expr(st.index, runs, width);
    if (accumulates(st)) add(&KernelWork::chain_cycles, runs / unroll_ * m_.fma_latency);
    if (st.buffer->scope == BufferScope::Global)
      add(&KernelWork::stores, memory_instructions(st.index, runs, width, st.buffer->dtype));
    // Every run's value is a dependency chain `depth` cycles long. Independent runs
    // overlap as far as the window holds them: the window (MachineModel::window_instructions) /
    // (instructions per run) at a time, so the statement takes at least depth x instructions /
    // window.
    std::map<const PrimExprNode*, double> memo;
    double issued = work.instructions + work.loads + work.stores - before;
    add(&KernelWork::latency_cycles, depth(st.value, memo) * issued / m_.window_instructions);
  }

  void if_stmt(const IfThenElseNode& i, double runs, int64_t width) {
    expr(i.cond, runs, width);
    if (uses_lane(i.cond)) {
      // A guard that differs between lanes: the vector body runs one lane at a time.
      const PrimVarNode* lane = lane_;
      lane_ = nullptr;
      stmt(i.then_case, runs * static_cast<double>(width), 1);
      stmt(i.else_case, runs * static_cast<double>(width), 1);
      lane_ = lane;
    } else {
      stmt(i.then_case, runs, width);
      stmt(i.else_case, runs, width);
    }
  }

  // A statement runs alone (its neighbours wait for it) when it is too long for the window
  // to overlap with them, or when it reads what an earlier one accumulated: it waits for
  // those sums (a layer norm's normalize pass and the activation fused after it, on rows of
  // 16: measured after the statistics, not hidden under their chains).
  void seq_stmt(const std::vector<Stmt>& seq, double runs, int64_t width) {
    std::set<const BufferNode*> accumulated;
    for (auto& x : seq) {
      KernelWork outer = phase_;
      phase_ = KernelWork{};
      stmt(x, runs, width);
      KernelWork inner = phase_;
      phase_ = outer;
      double issued = inner.instructions + inner.loads + inner.stores;
      bool waits = false;  // on the sums of the statements before it (not its own)
      visit_prim(
          x,
          [&](const PrimExpr& e) {
            if (auto* l = e.as<LoadNode>()) waits |= accumulated.count(l->buffer.get()) > 0;
          },
          [](const Stmt&) {});
      visit_prim(
          x, [](const PrimExpr&) {},
          [&](const Stmt& t) {
            if (auto* st = t.as<StoreNode>(); st && accumulates(*st))
              accumulated.insert(st->buffer.get());
          });
      if (seq.size() > 1 && (issued > m_.window_instructions * runs || waits))
        end_phase(inner);
      else
        merge(inner);
    }
  }

  int64_t extent_of(const PrimExpr& e) {
    int64_t v = 1;
    if (as_int(e, &v)) return v;
    auto b = const_bound(e, ranges_);
    return b ? std::max<int64_t>(b->max, 0) : 1;
  }

  // Instructions for `width` lanes of `t`: LLVM splits a vector wider than a register.
  double instructions(double runs, int64_t width, DType t) const {
    return runs * std::ceil(static_cast<double>(width) / static_cast<double>(m_.lanes(t)));
  }

  // acc[i] = f(acc[i], ...): each run waits for the previous one's result.
  static bool accumulates(const StoreNode& st) {
    bool found = false;
    visit_prim(st.value, [&](const PrimExpr& e) {
      auto* l = e.as<LoadNode>();
      found |= l && l->buffer == st.buffer && structural_equal(l->index, st.index);
    });
    return found;
  }

  // The latency of the longest dependency chain in `e`, in cycles (a DAG: shared
  // subexpressions once).
  double depth(const PrimExpr& x, std::map<const PrimExprNode*, double>& memo) {
    if (!x) return 0;
    auto it = memo.find(x.get());
    if (it != memo.end()) return it->second;
    if (auto* l = x.as<LetNode>()) {  // the body's uses of the variable wait for its value
      var_depth_[l->var.get()] = depth(l->value, memo);
      return memo[x.get()] = depth(l->body, memo);
    }
    if (x.kind() == PrimKind::Var) {
      auto v = var_depth_.find(static_cast<const PrimVarNode*>(x.get()));
      return v == var_depth_.end() ? 0 : v->second;
    }
    double longest = 0;
    for (const PrimExpr& c : children(x)) longest = std::max(longest, depth(c, memo));
    double own = 0;
    bool fp = is_float(x.dtype());
    switch (x.kind()) {
      case PrimKind::Load:
        own = m_.load_latency;
        break;
      case PrimKind::Binary: {
        BinaryOp op = x.as<BinaryNode>()->op;
        if (!fp)
          own = x.dtype() == DType::Int64 ? 0 : 1;  // index arithmetic is hoisted
        else if (op == BinaryOp::Div)
          own = m_.divide_latency;
        else if (op == BinaryOp::Add || op == BinaryOp::Sub || op == BinaryOp::Mul)
          own = m_.fma_latency;
        else
          own = 1;
        break;
      }
      case PrimKind::Call: {
        Intrinsic op = x.as<PrimCallNode>()->op;
        own = op == Intrinsic::Sqrt ? m_.divide_latency : fp ? m_.fma_latency : 1;
        break;
      }
      case PrimKind::Cast:
        own = x.dtype() == DType::Int64 ? 0 : m_.fma_latency;
        break;
      case PrimKind::Compare:
      case PrimKind::Select:
      case PrimKind::Reinterpret:
      case PrimKind::Not:
        own = 1;
        break;
      default:
        break;
    }
    return memo[x.get()] = longest + own;
  }

  bool uses_lane(const PrimExpr& e) const {
    bool found = false;
    if (lane_) visit_prim(e, [&](const PrimExpr& x) { found |= x.get() == lane_; });
    return found;
  }

  // Vector memory instructions for `width` lanes at `index`: contiguous (or the same
  // element in every lane) one per register; strides 2 to 4 one per register per stride (a
  // wider load and a shuffle); otherwise a gather, which costs about two instructions per
  // lane (its address and its load), as does an index that is not affine in the lane
  // (a reshape's division and remainder inside a vector loop).
  double memory_instructions(const PrimExpr& index, double runs, int64_t width, DType t) const {
    double vectors = instructions(runs, width, t);
    if (width == 1 || !lane_) return vectors;
    auto form = linear_form(index);
    if (!form) {
      // Each integer division or remainder of the lane is a scalar 64-bit division per lane
      // (AVX2 and AVX-512 have no vector one): tens of cycles each.
      int divisions = 0;
      visit_prim(index, [&](const PrimExpr& e) {
        auto* b = e.as<BinaryNode>();
        divisions += b && (b->op == BinaryOp::Div || b->op == BinaryOp::Mod) && uses_lane(e);
      });
      return (2 + m_.integer_division_cycles * divisions) * runs * static_cast<double>(width);
    }
    auto it = form->coeff.find(lane_);
    int64_t stride = it == form->coeff.end() ? 0 : std::abs(it->second);
    if (stride <= 1) return vectors;
    if (stride <= 4) return static_cast<double>(stride) * vectors;
    return 2 * runs * static_cast<double>(width);
  }

  // Counts each distinct subexpression of `e` once, as LLVM's common-subexpression
  // elimination will: an inlined producer that a consumer reads four times (x - mean in a
  // layer norm's epilogue) is computed once.
  void expr(const PrimExpr& e, double runs, int64_t width) {
    std::map<const PrimExprNode*, size_t> hashes;
    std::set<size_t> seen;
    count(e, runs, width, hashes, seen);
  }

  void count(const PrimExpr& x, double runs, int64_t width,
             std::map<const PrimExprNode*, size_t>& hashes, std::set<size_t>& seen) {
    if (!x || !seen.insert(structural_hash(x, hashes)).second) return;
    for (const PrimExpr& c : children(x)) count(c, runs, width, hashes, seen);
    DType t = x.dtype();
    switch (x.kind()) {
      case PrimKind::Load:
        if (auto* l = x.as<LoadNode>(); transposed_.count(l)) {
          // A row of a block transposed in registers: one vector load, log2 V shuffles.
          add(&KernelWork::loads, instructions(runs, width, t));
          add(&KernelWork::instructions, instructions(runs, width, t) * std::log2(width));
        } else if (l->buffer->scope == BufferScope::Global) {
          add(&KernelWork::loads, memory_instructions(l->index, runs, width, t));
        }
        return;
      case PrimKind::Compare:
        t = x.as<CompareNode>()->a.dtype();
        break;
      case PrimKind::Binary:
      case PrimKind::Select:
      case PrimKind::Cast:
      case PrimKind::Reinterpret:
      case PrimKind::Not:
        break;
      case PrimKind::Call:
        if (x.as<PrimCallNode>()->op == Intrinsic::Fma) {
          work.fmas += runs * static_cast<double>(width);
          work.flops += runs * static_cast<double>(width);  // and one more below
        }
        break;
      default:
        return;
    }
    if (t == DType::Int64) return;  // index arithmetic
    add(&KernelWork::instructions, instructions(runs, width, t));
    if (is_float(t)) work.flops += runs * static_cast<double>(width);
  }

  // A prefetch computes its address but loads nothing.
  static std::vector<PrimExpr> children(const PrimExpr& x) {
    auto* call = x.as<PrimCallNode>();
    if (call && call->op == Intrinsic::Prefetch) return {call->args[0].as<LoadNode>()->index};
    return operands(x);
  }

  // Equal for structurally equal expressions (variables and buffers by identity).
  static size_t structural_hash(const PrimExpr& x, std::map<const PrimExprNode*, size_t>& memo) {
    auto it = memo.find(x.get());
    if (it != memo.end()) return it->second;
    auto mix = [](size_t h, size_t v) {
      return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
    };
    size_t h = mix(static_cast<size_t>(x.kind()), static_cast<size_t>(x.dtype()));
    if (auto* i = x.as<IntImmNode>()) h = mix(h, std::hash<int64_t>()(i->value));
    if (auto* f = x.as<FloatImmNode>()) h = mix(h, std::hash<double>()(f->value));
    if (x.kind() == PrimKind::Var) h = mix(h, std::hash<const void*>()(x.get()));
    if (auto* b = x.as<BinaryNode>()) h = mix(h, static_cast<size_t>(b->op));
    if (auto* c = x.as<CompareNode>()) h = mix(h, static_cast<size_t>(c->op));
    if (auto* c = x.as<PrimCallNode>()) h = mix(h, static_cast<size_t>(c->op));
    if (auto* l = x.as<LoadNode>()) h = mix(h, std::hash<const void*>()(l->buffer.get()));
    if (auto* l = x.as<LetNode>()) h = mix(h, std::hash<const void*>()(l->var.get()));
    for (const PrimExpr& c : children(x)) h = mix(h, structural_hash(c, memo));
    return memo[x.get()] = h;
  }

  // Counts `v` in the kernel's totals and in the phase being counted.
  void add(double KernelWork::* field, double v) {
    work.*field += v;
    phase_.*field += v;
  }

  void merge(const KernelWork& inner) {
    phase_.instructions += inner.instructions;
    phase_.loads += inner.loads;
    phase_.stores += inner.stores;
    phase_.chain_cycles += inner.chain_cycles;
    phase_.latency_cycles += inner.latency_cycles;
    phase_.cycles += inner.cycles;
  }

  const MachineModel& m_;
  KernelWork phase_;  // the phase being counted (`cycles`: the phases that ended inside it)
  double costliest_phase_ = -1;  // cycles of the costliest phase so far
  VarRanges ranges_;
  const PrimVarNode* lane_ = nullptr;     // the variable of the vector loop around, if any
  std::set<const LoadNode*> transposed_;  // loads read as transposed blocks (transposed_loads)
  double unroll_ = 1;                     // copies of the body that unrolled loops make
  std::map<const PrimVarNode*, double> var_depth_;  // latency of a let variable's value
};

}  // namespace

KernelWork kernel_work(const PrimFunc& f, const MachineModel& m) {
  Counter c(m);
  c.stmt(f.body, 1, 1);
  c.finish();
  for (auto& p : f.params)
    c.work.io_bytes += static_cast<double>(p->numel() * dtype_bytes(p->dtype));
  return c.work;
}

double work_cycles(const KernelWork& w, const MachineModel& m) {
  // The hardware prefetcher streams the inputs and outputs while the cores compute: a kernel
  // takes the longer of the two, not their sum. Inputs and outputs that fit half the L3
  // stream from the caches (a layer norm over 128 x 768 at the memory rate was estimated as
  // costly as the activation fused after it).
  const double rate = static_cast<double>(w.io_bytes) <= static_cast<double>(m.l3_bytes) / 2
                          ? m.cached_bytes_per_cycle
                          : m.memory_bytes_per_cycle;
  return std::max(w.cycles, w.io_bytes / rate);
}

double estimated_cycles(const KernelWork& w, const MachineModel& m) {
  // A parallel kernel on more than one thread: dispatched, then its work shared out (so a
  // fused kernel whose work crosses the grain is not charged the dispatch without the split).
  if (w.parallel && m.threads > 1)
    return m.call_cycles + m.dispatch_cycles + work_cycles(w, m) / m.threads;
  return m.call_cycles + work_cycles(w, m);
}

namespace {
class SerialLoops : public PrimMutator {
  Stmt visit_for(const Stmt& s, const ForNode* op) override {
    if (op->for_kind != ForKind::Parallel) return PrimMutator::visit_for(s, op);
    return for_loop(op->var, op->min, op->extent, ForKind::Serial, mutate(op->body));
  }
};
}  // namespace

PrimFunc serial_below_parallel_grain(const PrimFunc& f, const MachineModel& m) {
  // `f` comes annotated (AnnotateLoops runs first), so it is priced as the code generator
  // will emit it; a kernel made serial is annotated again, its loops no longer parallel.
  KernelWork w = kernel_work(f, m);
  if (!w.parallel || work_cycles(w, m) >= kParallelGrainCycles) return f;
  PrimFunc out = f;
  out.body = SerialLoops().mutate(f.body);
  return annotate_loops(out, m);
}

}  // namespace ember::passes
