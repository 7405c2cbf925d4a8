// roll_long_epilogues (rolled_epilogues.h). A small matmul (3 x 8 by 8 x 6) -> celu whose
// unrolled celu chains spill constants to the stack runs slower fused than its two kernels,
// whose celu kernel loops over the rows; rolled, it runs as fast. Only a tile computed once
// per call is rolled: in a kernel of many tiles, the unrolled epilogue overlaps the next
// tile's accumulation and its spills cost less than a call per tile; at real sizes (matmul
// -> celu over 128 x 3072, conv -> elu over 56 x 56) the two forms run the same
// (calibration: rolled epilogues). A tile that fills the registers and rounds its epilogue to
// bfloat16 is rolled however many tiles the kernel has: the rounding's vector constants
// outgrow the four registers the tile leaves free, and LLVM spilled accumulators inside the
// reduction loop (calibration: bfloat16 rounding epilogues).
#include "ember/passes/rolled_epilogues.h"

#include <map>
#include <set>

#include "ember/ir/chains.h"

namespace ember::passes {

using namespace ir;

namespace {

// The loops from an unrolled loop down to a vector loop through unrolled loops only, and
// that vector loop's single store; empty when the nest is not of that form.
struct EpilogueNest {
  std::vector<const ForNode*> loops;  // outermost first; the last is the vector loop
  const StoreNode* store = nullptr;
};

EpilogueNest nest_under(const ForNode* outer) {
  EpilogueNest n;
  int64_t extent = 0;
  for (const ForNode* f = outer; f; f = f->body.as<ForNode>()) {
    if (!as_int(f->extent, &extent) || extent < 1) return {};
    n.loops.push_back(f);
    if (f->for_kind == ForKind::Vectorized) {
      n.store = f->body.as<StoreNode>();
      return n.store ? n : EpilogueNest{};
    }
    if (f->for_kind != ForKind::Unrolled) return {};
  }
  return {};
}

// The loop nest `n` again around `body`, its unrolled loops made `kind`.
Stmt rebuild(const EpilogueNest& n, Stmt body, ForKind kind) {
  for (auto it = n.loops.rbegin(); it != n.loops.rend(); ++it) {
    const ForNode* f = *it;
    ForKind k = f->for_kind == ForKind::Unrolled ? kind : f->for_kind;
    body = for_loop(f->var, f->min, f->extent, k, body);
  }
  return body;
}

// The vector registers of the register tiles the epilogue nest `n` reads (local buffers
// other than the one it stores): a row of `extent` lanes takes ceil(extent / lanes).
int64_t tile_registers(const EpilogueNest& n, const std::set<const BufferNode*>& local,
                       const MachineModel& m) {
  int64_t extent = 1, registers = 0;
  as_int(n.loops.back()->extent, &extent);
  std::set<const BufferNode*> tiles;
  visit_prim(n.store->value, [&](const PrimExpr& e) {
    auto* l = e.as<LoadNode>();
    if (l && local.count(l->buffer.get()) && l->buffer != n.store->buffer)
      tiles.insert(l->buffer.get());
  });
  for (const BufferNode* b : tiles) {
    int64_t numel = 1, d = 0;
    for (const PrimExpr& x : b->shape) numel *= as_int(x, &d) ? d : 1;
    const int64_t lanes = m.lanes(b->dtype);
    registers += numel / std::max<int64_t>(extent, 1) * ((extent + lanes - 1) / lanes);
  }
  return registers;
}

class RollEpilogues : public PrimMutator {
 public:
  explicit RollEpilogues(const MachineModel& m) : machine_(m) {}

 protected:
  Stmt visit_allocate(const Stmt& s, const AllocateNode* op) override {
    local_.insert(op->buffer.get());
    Stmt out = PrimMutator::visit_allocate(s, op);
    local_.erase(op->buffer.get());
    return out;
  }

  Stmt visit_for(const Stmt& s, const ForNode* op) override {
    int64_t rows = 0;
    const bool repeats = !as_int(op->extent, &rows) || rows > 1;
    auto descend = [&] {
      repeated_ += repeats;
      Stmt out = PrimMutator::visit_for(s, op);
      repeated_ -= repeats;
      return out;
    };
    if (op->for_kind != ForKind::Unrolled || rows < 2) return descend();
    EpilogueNest n = nest_under(op);
    const bool long_once = n.store && repeated_ == 0 && chain_length(n.store->value) >= kLongChain;
    const bool rounds_full_tile = n.store && n.store->buffer->dtype == DType::BFloat16 &&
                                  fills_accumulators(machine_, tile_registers(n, local_, machine_));
    if (!long_once && !rounds_full_tile) return repeated_ > 0 ? descend() : s;
    // The register tiles it reads, and each distinct element index of them it reads (an
    // index through a variable the value binds itself cannot be copied outside it).
    std::set<const PrimVarNode*> lets;
    visit_prim(n.store->value, [&](const PrimExpr& e) {
      if (auto* let = e.as<LetNode>()) lets.insert(let->var.get());
    });
    BufferMap copies;
    std::vector<Stmt> copy_stores;
    std::vector<PrimExpr> seen;
    bool copyable = true;
    visit_prim(n.store->value, [&](const PrimExpr& e) {
      auto* l = e.as<LoadNode>();
      if (!l || !local_.count(l->buffer.get()) || l->buffer == n.store->buffer) return;
      visit_prim(l->index, [&](const PrimExpr& x) {
        copyable &= !(x.as<PrimVarNode>() && lets.count(x.as<PrimVarNode>()));
      });
      for (const PrimExpr& x : seen)
        if (structural_equal(x, e)) return;
      seen.push_back(e);
      Buffer& copy = copies[l->buffer.get()];
      if (!copy)
        copy = make_buffer(l->buffer->name + ".out", l->buffer->dtype, l->buffer->shape,
                           BufferScope::Local);
      copy_stores.push_back(store(copy, l->index, e));
    });
    if (copies.empty() || !copyable) return s;
    Stmt epilogue = store(n.store->buffer, n.store->index, swap_buffers(n.store->value, copies));
    Stmt out = seq(
        {rebuild(n, seq(copy_stores), ForKind::Unrolled), rebuild(n, epilogue, ForKind::Serial)});
    for (auto& [_, copy] : copies) out = allocate(copy, out);
    return out;
  }

 private:
  const MachineModel& machine_;
  std::set<const BufferNode*> local_;
  int repeated_ = 0;  // loops of more than one iteration around the statement visited
};

}  // namespace

PrimFunc roll_long_epilogues(const PrimFunc& f, const MachineModel& machine) {
  PrimFunc out = f;
  out.body = RollEpilogues(machine).mutate(f.body);
  return out;
}

}  // namespace ember::passes
