#pragma once
// GPU emulation for the tests: a GPU kernel's loop IR run serially on the CPU.
#include <algorithm>
#include <map>

#include "ember/ir/loop.h"

namespace ember::test_util {

using namespace ember::ir;  // the loop IR throughout

// The GPU kernel's loop IR (after lower_gpu_phases) with every block/thread loop made
// serial and its barriers dropped: run on the CPU, it computes what the GPU would, because
// the schedules run a block's threads in phases (thread loops one after the other, a
// barrier between them). A Local buffer allocated at block level is one copy per thread on
// the GPU (each thread runs the block-level code): here it gets a copy per thread index,
// so what one thread keeps in registers across phases is exactly what it sees again. The
// GPU indexing, guards, tiles, register tiles and tree reductions are thus checked
// without a GPU.
class SerializeGpuLoops : public PrimMutator {
 public:
  using PrimMutator::mutate;
  Stmt mutate(const Stmt& s) override {
    if (auto* e = s.as<EvaluateNode>()) {
      auto* c = e->value.as<PrimCallNode>();
      if (c && c->op == Intrinsic::Barrier) return evaluate(PrimExpr(int64_t{0}));
    }
    auto* a = s.as<AllocateNode>();
    if (!a || a->buffer->scope != BufferScope::Local || thread_) return PrimMutator::mutate(s);
    // Thread loops that write it (a buffer only read there is the same for every thread).
    int64_t threads = 0;
    visit_prim(
        a->body, [](const PrimExpr&) {},
        [&](const Stmt& x) {
          auto* f = x.as<ForNode>();
          int64_t n = 0;
          if (!f || f->for_kind != ForKind::GpuThreadX || !as_int(f->extent, &n)) return;
          bool writes = false;
          visit_prim(
              f->body, [](const PrimExpr&) {},
              [&](const Stmt& y) {
                auto* st = y.as<StoreNode>();
                writes |= st && st->buffer == a->buffer;
              });
          if (writes) threads = std::max(threads, n);
        });
    if (threads == 0) return PrimMutator::mutate(s);
    const Buffer& b = a->buffer;
    Buffer copies = make_buffer(b->name, b->dtype, {threads * b->numel()}, BufferScope::Local);
    per_thread_[b.get()] = copies;
    return allocate(copies, mutate(a->body));
  }

 protected:
  Stmt visit_for(const Stmt& s, const ForNode* op) override {
    PrimExpr outer = thread_;
    if (op->for_kind == ForKind::GpuThreadX) thread_ = op->var;
    Stmt body = mutate(op->body);
    thread_ = outer;
    if (!is_gpu_kind(op->for_kind) && body.same_as(op->body)) return s;
    ForKind k = is_gpu_kind(op->for_kind) ? ForKind::Serial : op->for_kind;
    return for_loop(op->var, op->min, op->extent, k, body);
  }
  PrimExpr visit_load(const PrimExpr& e, const LoadNode* op) override {
    PrimExpr base = PrimMutator::visit_load(e, op);
    auto* l = base.as<LoadNode>();
    auto it = per_thread_.find(l->buffer.get());
    return it == per_thread_.end() ? base : load(it->second, copy_index(l->buffer, l->index));
  }
  Stmt visit_store(const Stmt& s, const StoreNode* op) override {
    Stmt base = PrimMutator::visit_store(s, op);
    auto* st = base.as<StoreNode>();
    auto it = per_thread_.find(st->buffer.get());
    if (it == per_thread_.end()) return base;
    return store(it->second, copy_index(st->buffer, st->index), st->value);
  }

 private:
  // The element of the current thread's copy; block-level code (outside thread loops)
  // runs as thread 0 would.
  PrimExpr copy_index(const Buffer& b, const PrimExpr& index) const {
    return (thread_ ? thread_ : PrimExpr(int64_t{0})) * b->numel() + index;
  }

  PrimExpr thread_;  // the enclosing thread loop's index, if any
  std::map<const BufferNode*, Buffer> per_thread_;
};

}  // namespace ember::test_util
