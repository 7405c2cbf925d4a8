// AnnotateLoops: the emission decisions of every loop, in program order, as the code
// generator used to take them while emitting (it now only reads them).
#include "ember/passes/annotate_loops.h"

#include "ember/ir/chains.h"
#include "ember/ir/loop_sums.h"
#include "ember/ir/transposed_loads.h"

namespace ember::passes {

using namespace ir;

namespace {

class Annotator : public PrimMutator {
 public:
  explicit Annotator(const MachineModel& m) : machine_(m) {}

 protected:
  // In order, the first that applies: a serial or unrolled loop whose column loads are read
  // as transposed blocks (not inside another such loop, whose blocks are the ones in
  // registers; not where the vector loop's lanes collide, which then runs serially); a
  // long-chain loop once the kernel has accumulated (its registers are the accumulators'); a
  // serial loop that is a rolled sum.
  Stmt visit_for(const Stmt& s, const ForNode* op) override {
    LoopAnnotations a;
    if (op->for_kind == ForKind::Serial || op->for_kind == ForKind::Unrolled ||
        op->for_kind == ForKind::WarpMma) {
      TransposedLoads t = transposed_loads(op);
      if (!t.loads.empty() && !in_transposed_ && !lanes_collide(t.vector_loop))
        a.transposed_blocks = true;
      else if (accumulated_ && is_long_chain_loop(op))
        a.rolled_call = true;
      else if (op->for_kind == ForKind::Serial && is_rolled_scalar_sum(op))
        a.sum_accumulators = accumulators(op);
    }
    const bool outer = in_transposed_;
    in_transposed_ |= a.transposed_blocks;
    Stmt body = mutate(op->body);
    in_transposed_ = outer;
    if (body.same_as(op->body) && a == op->annotations) return s;
    return for_loop(op->var, op->min, op->extent, op->for_kind, body, a);
  }

  Stmt visit_store(const Stmt& s, const StoreNode* op) override {
    accumulated_ |= accumulation_of(op) != Accumulation::None;
    return s;
  }

 private:
  int accumulators(const ForNode* loop) const {
    int64_t extent = 0;
    as_int(loop->extent, &extent);
    return rolled_sum_interleave(extent, machine_.lanes(loop->body.as<StoreNode>()->buffer->dtype));
  }

  const MachineModel& machine_;
  bool in_transposed_ = false;
  bool accumulated_ = false;  // an accumulation comes earlier in program order
};

}  // namespace

PrimFunc annotate_loops(const PrimFunc& f, const MachineModel& machine) {
  PrimFunc out = f;
  out.body = Annotator(machine).mutate(f.body);
  return out;
}

}  // namespace ember::passes
