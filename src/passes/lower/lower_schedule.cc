// Lowering a schedule to one loop-IR function.
//
// Every stage that is neither inlined nor attached gets a root loop nest over its whole
// output; an attached stage's nest is emitted inside its consumer's loop `axis`, over the
// region the consumer reads below that loop (bound inference on affine index expressions),
// into a local buffer of that region's size. This is how the epilogue of a fused group sits
// in the anchor's loop nest: the anchor (a conv's accumulation, say) is a local tile computed
// at the epilogue stage's tile loop, and the epilogue reads the tile while it is hot.
//
// Loop structure of one stage: leaf loops in schedule order; values of the root axes are
// rebuilt from the leaves through the split/fuse relations (fuse-derived values are bound
// with `let` because they are not affine); a non-dividing split or a clipped region adds a
// guard around the innermost statement, unless the bounds prove it is always true. A
// reduction stores its identity in an init nest placed just outside the first reduction loop.
#include <algorithm>
#include <map>
#include <set>

#include "ember/ir/range_dispatch.h"
#include "ember/ir/simplify.h"
#include "ember/passes/schedule.h"
#include "ember/support/error.h"

namespace ember::passes {

using namespace ir;

namespace {

// acc + src, with a float product in src rounded once with the addition (an FMA): a sum of
// products (conv, dense, matmul) is then one FMA per term, which is what the CPU's peak
// counts. Ember's code generator never contracts a multiply and an add on its own.
PrimExpr multiply_add(const PrimExpr& src, const PrimExpr& acc) {
  auto* mul = src.as<BinaryNode>();
  if (mul && mul->op == BinaryOp::Mul && is_float(src.dtype()))
    return prim_call(Intrinsic::Fma, {mul->a, mul->b, acc});
  // An int8 product's step takes the running sum as its accumulator (one vpdpbusd).
  auto* dot = src.as<PrimCallNode>();
  int64_t start = 1;
  if (dot && (dot->op == Intrinsic::DotU8S8 || dot->op == Intrinsic::DotU7S8) &&
      as_int(dot->args[0], &start) && start == 0)
    return prim_call(dot->op, {acc, dot->args[1], dot->args[2]});
  auto* zero = dot ? dot->args[0].as<FloatImmNode>() : nullptr;  // a bfloat16 pair's step
  if (dot && dot->op == Intrinsic::DotBF16 && zero && zero->value == 0.0)
    return prim_call(Intrinsic::DotBF16, {acc, dot->args[1], dot->args[2]});
  return acc + src;
}

bool is_gpu_thread(ForKind k) {
  return k == ForKind::GpuThreadX || k == ForKind::GpuThreadY || k == ForKind::GpuThreadZ;
}

// Root axis `d` of `st` over `extent` values, rounded up to whole tiles when a padded split
// (SplitTail::Pad) divides it.
int64_t padded_extent(const Stage& st, size_t d, int64_t extent) {
  for (auto& r : st.relations())
    if (r.kind == IterRelation::Split && r.tail == SplitTail::Pad && r.parent == st.root_axes()[d])
      return (extent + r.factor - 1) / r.factor * r.factor;
  return extent;
}

// Stage::pad_rows: the innermost axis longer than 1 grows by `pad` when the outermost axis's
// stride is even (an odd stride already puts neighbouring rows in different banks);
// flat_index then strides by the padded shape.
void pad_rows(std::vector<int64_t>& shape, int64_t pad) {
  if (pad == 0 || shape.size() < 2) return;
  int64_t stride = 1;
  for (size_t d = 1; d < shape.size(); ++d) stride *= shape[d];
  for (size_t d = shape.size() - 1; d >= 1; --d)
    if (shape[d] > 1) {
      if (stride % 2 == 0) shape[d] += pad;
      return;
    }
}

// Where a tensor's values live during lowering.
struct Realized {
  Buffer buffer;
  std::vector<PrimExpr> mins;  // region origin (empty = 0 everywhere)
  std::vector<PrimExpr> live;  // a kernel parameter's run-time shape (empty: static)
  // The flat offset of `indices`: row-major over the run's shape where it has one (a
  // parameter stored compactly at the run's shape), else over the buffer's static shape.
  PrimExpr flat(const std::vector<PrimExpr>& indices) const {
    if (live.empty()) return flat_index(buffer, indices);
    std::vector<PrimExpr> shape = live;
    for (size_t i = 0; i < shape.size(); ++i)
      if (!shape[i].get()) shape[i] = PrimExpr(buffer->shape[i]);
    return flat_index(shape, indices);
  }
};

class ScheduleLowering {
 public:
  ScheduleLowering(const Schedule& sch, const std::vector<Tensor>& inputs) : sch_(sch) {
    for (auto& t : inputs) {
      Buffer b = make_buffer(t->name, t.dtype(), t->shape);
      params_.push_back(b);
      realized_[t.ref().get()] = {b, {}, live_dims(t)};
    }
    const LiveExtents& live = sch.live();
    if (!live.empty()) {  // the symbols' values, read once at the kernel's start
      std::vector<PrimVar> vars;
      for (const LiveExtents::Symbol& s : live.symbols) vars.push_back(s.var);
      symbols_read_ = KernelSymbols(vars);
      params_.push_back(symbols_read_.shape_args);
      for (const LiveExtents::Symbol& s : live.symbols) {
        EMBER_CHECK(s.min >= 1 && s.min <= s.max, "symbol ", s.var.name(), " has range [", s.min,
                    ", ", s.max, "]");
        symbols_[s.var.get()] = {s.min, s.max};
      }
    }
    num_inputs_ = static_cast<int>(params_.size());
    for (auto& t : sch.outputs()) {
      EMBER_CHECK(!realized_.count(t.ref().get()), "output ", t->name, " is also an input");
      Buffer b = make_buffer(t->name, t.dtype(), t->shape);
      params_.push_back(b);
      realized_[t.ref().get()] = {b, {}, live_dims(t)};
      outputs_.insert(t.ref().get());
    }
    for (auto& s : sch.stages()) stage_of_[s->tensor().ref().get()] = s.get();
    inline_bodies();
  }

  PrimFunc run(const std::string& name) {
    std::vector<Buffer> allocs;
    Stmt body = emit_root_nests(allocs);
    // Where every run long enough has whole tiles, a second copy of the nests for those runs
    // shifts its last tiles back instead of guarding them (no guard in a register tile's
    // accumulation); shorter runs take the guarded copy.
    const std::vector<std::pair<PrimVar, int64_t>> minimums = whole_tile_minimums();
    if (!minimums.empty()) {
      const VarRanges all = symbols_;
      PrimExpr long_run = make_const(DType::Bool, 1);
      for (auto& [v, whole] : minimums) {
        symbols_[v.get()].min = whole;
        long_run = logical_and(long_run, v >= PrimExpr(whole));
      }
      body = if_then_else(long_run, emit_root_nests(allocs), body);
      symbols_ = all;
    }
    for (auto it = allocs.rbegin(); it != allocs.rend(); ++it) body = allocate(*it, body);
    PrimFunc f{name, params_, num_inputs_, simplify(symbols_read_.bind(body))};
    try {
      verify(f);
    } catch (const InternalError& e) {
      // A lowering bug: show the loop IR it produced.
      std::string text = to_string(f);
      if (text.size() > 6000) text = text.substr(0, 6000) + "\n...";
      throw InternalError(std::string(e.what()) + "\nwhile lowering:\n" + text);
    }
    return f;
  }

  // The loop nests of the root stages (allocating, once, those that are not parameters).
  Stmt emit_root_nests(std::vector<Buffer>& allocs) {
    std::vector<Stmt> nests;
    for (auto& s : sch_.stages()) {
      const Stage* st = s.get();
      if (st->attach_kind() != AttachKind::Root) continue;
      const TensorNode* t = st->tensor().operator->();
      if (!realized_.count(t)) {
        Buffer b = make_buffer(t->name, t->dtype, t->shape, BufferScope::Local);
        realized_[t] = {b, {}};
        allocs.push_back(b);
      }
      const std::vector<PrimExpr> live = live_dims(st->tensor());
      if (live.empty()) check_reads_static(st);
      std::vector<Region> region;
      for (size_t d = 0; d < t->shape.size(); ++d)
        region.push_back(
            {PrimExpr(int64_t{0}), t->shape[d], false, live.empty() ? PrimExpr() : live[d]});
      nests.push_back(emit_stage(st, region, symbols_));
    }
    return seq(nests);
  }

  // For each symbol that is the run's extent of a root axis split with its last tile
  // shifted back (SplitTail::Shift), the largest such tile: runs at least that long have
  // whole tiles. Only where that exceeds the symbol's minimum.
  std::vector<std::pair<PrimVar, int64_t>> whole_tile_minimums() const {
    std::vector<std::pair<PrimVar, int64_t>> out;
    for (const LiveExtents::Symbol& sym : sch_.live().symbols) {
      int64_t whole = 0;
      for (auto& s : sch_.stages())
        for (const IterRelation& r : s->relations()) {
          if (s->attach_kind() != AttachKind::Root || r.kind != IterRelation::Split ||
              r.tail != SplitTail::Shift || r.factor <= sym.min || r.factor > sym.max)
            continue;
          const std::vector<IterVar>& root = s->root_axes();
          if (std::find(root.begin(), root.end(), r.parent) != root.end() &&
              sch_.run_extent(*s, r.parent).get() == sym.var.get())
            whole = std::max(whole, r.factor);
        }
      if (whole) out.emplace_back(sym.var, whole);
    }
    return out;
  }

 private:
  struct Region {
    PrimExpr min;
    int64_t extent;
    bool clipped;   // may exceed the tensor's bounds: guard it
    PrimExpr live;  // the run's extent where it is known only then (from 0: min is 0)
    PrimExpr clip;  // the tensor's run-time extent, which the region may pass: guard it
  };

  // The run-time shape of `t` where sch.live() has one, else that of its stage's axes
  // (Schedule::run_extent: a stage inside an op's compute rule takes what its axes index);
  // empty: static.
  std::vector<PrimExpr> live_dims(const Tensor& t) const {
    auto it = sch_.live().dims.find(t.operator->());
    if (it == sch_.live().dims.end()) {
      std::vector<PrimExpr> dims;
      bool any = false;
      for (auto& s : sch_.stages()) {
        if (s->tensor().operator->() != t.operator->()) continue;
        for (const IterVar& a : s->root_axes())
          if (!a->reduce) {
            dims.push_back(sch_.run_extent(*s, a));
            any = any || dims.back().get();
          }
      }
      return any ? dims : std::vector<PrimExpr>{};
    }
    EMBER_CHECK(it->second.size() == t->shape.size(), "run-time shape of ", t->name, " has rank ",
                it->second.size(), ", its tensor ", t->shape.size());
    return it->second;
  }

  void inline_bodies() {
    for (auto& s : sch_.stages()) {
      bodies_[s.get()] = sch_.expanded_body(*s);
      if (s->attach_kind() == AttachKind::Inline && outputs_.count(s->tensor().operator->()))
        throw InternalError("internal error: cannot inline " + s->tensor()->name +
                            ": it is an output of the kernel");
    }
  }

  // Replaces tensor reads with buffer loads, relative to each tensor's region origin.
  PrimExpr realize(const PrimExpr& e) {
    struct Realizer : PrimMutator {
      ScheduleLowering* self;
      PrimExpr visit_producer_load(const PrimExpr& e, const ProducerLoadNode* op) override {
        PrimExpr base = PrimMutator::visit_producer_load(e, op);
        auto* p = base.as<ProducerLoadNode>();
        auto it = self->realized_.find(p->producer.get());
        EMBER_CHECK(it != self->realized_.end(), "tensor ", p->producer->name,
                    " is read but has no buffer here (is it computed at a loop that does not "
                    "enclose this read?)");
        std::vector<PrimExpr> idx = p->indices;
        for (size_t d = 0; d < it->second.mins.size(); ++d) idx[d] = idx[d] - it->second.mins[d];
        return load(it->second.buffer, simplify(it->second.flat(idx)));
      }
    } r;
    r.self = this;
    return r.mutate(e);
  }

  // Emits the loop nest of `st` over `region` (one entry per spatial axis).
  Stmt emit_stage(const Stage* st, const std::vector<Region>& region, VarRanges known) {
    Nest nest(*this, st, region, std::move(known));
    nest.compute_extents();
    nest.bind_axis_values();
    nest.compute_root_values();
    nest.infer_child_regions();
    nest.build_innermost();
    return nest.wrap_loops();
  }

  // An expression that reads tensors, and the ranges of the variables that vary in it.
  struct Read {
    PrimExpr expr;
    VarRanges ranges;
  };

  // One stage's loop nest while emit_stage builds it; each phase (a method, in the order
  // emit_stage calls them) fills the fields that the later ones read.
  struct Nest {
    Nest(ScheduleLowering& self, const Stage* st, const std::vector<Region>& region,
         VarRanges known)
        : self(self),
          st(st),
          region(region),
          known(std::move(known)),
          t(st->tensor().operator->()),
          leaf(st->leaf_axes()),
          n_spatial(st->axes().size()) {}

    ScheduleLowering& self;
    const Stage* st;
    const std::vector<Region>& region;
    VarRanges known;  // ranges of the variables in scope, growing with the lets made here
    const TensorNode* t;
    const std::vector<IterVar>& leaf;
    const size_t n_spatial;
    // compute_extents
    std::map<const IterVarNode*, int64_t> ext;    // static (the largest) extents
    std::map<const IterVarNode*, PrimExpr> live;  // the run's extents, where known only then
    std::set<const IterVarNode*> partial;         // values may pass the run's extent (guarded)
    std::vector<std::pair<const IterVarNode*, PrimExpr>> split_guards;  // value < extent
    // bind_axis_values
    std::vector<PrimVar> loop_var;
    std::map<const IterVarNode*, size_t> pos_of;
    std::map<const IterVarNode*, PrimExpr> value;
    std::vector<std::vector<std::pair<PrimVar, PrimExpr>>> lets;
    // compute_root_values
    VarMap root_map;
    std::vector<PrimExpr> out_index;
    PrimExpr guard, reduce_guard;
    // infer_child_regions
    std::vector<std::vector<const Stage*>> attached;
    std::map<const Stage*, std::vector<Region>> child_region;
    PrimExpr body_expr;
    // build_innermost
    size_t first_reduce = 0;
    std::vector<std::vector<PrimExpr>> hoisted;  // [i + 1]: inside loop i
    Stmt update, init;

    // Extents of every axis, root first, then through the relations: the static one, and
    // the run's where it is known only then (a split's outer loop runs ceil(run / factor)
    // tiles, a fused loop the product).
    void compute_extents() {
      for (size_t i = 0; i < st->root_axes().size(); ++i) {
        auto& a = st->root_axes()[i];
        ext[a.get()] = i < n_spatial ? region[i].extent : a->extent;
        PrimExpr l = i < n_spatial ? region[i].live : self.sch_.run_extent(*st, a);
        if (l) live[a.get()] = l;
      }
      for (auto& r : st->relations()) {
        if (r.kind == IterRelation::Split) {
          int64_t e = ext.at(r.parent.get());
          ext[r.outer.get()] = (e + r.factor - 1) / r.factor;
          ext[r.inner.get()] = r.factor;
          auto l = live.find(r.parent.get());
          if (partial.count(r.parent.get())) {
            partial.insert(r.outer.get());
            partial.insert(r.inner.get());
          }
          if (l != live.end()) {
            live[r.outer.get()] = simplify((l->second + PrimExpr(r.factor - 1)) / r.factor);
            if (r.tail == SplitTail::Pad)
              fail("a padded split of ", r.parent->var.name(), " in ", t->name,
                   ", whose extent is known only at run time: not supported yet");
            if (!shifts(r)) {
              split_guards.emplace_back(r.parent.get(), l->second);
              partial.insert(r.inner.get());
            }
          } else if (e % r.factor && r.tail == SplitTail::Guard) {
            split_guards.emplace_back(r.parent.get(), PrimExpr(e));
          }
        } else {
          ext[r.fused.get()] = ext.at(r.outer.get()) * ext.at(r.inner.get());
          if (live.count(r.outer.get()) || live.count(r.inner.get()))
            live[r.fused.get()] = simplify(run_extent(r.outer.get()) * run_extent(r.inner.get()));
          if (partial.count(r.outer.get()) || partial.count(r.inner.get()))
            partial.insert(r.fused.get());
        }
      }
    }

    // The run's extent of `a`: static, or an expression of the symbols.
    PrimExpr run_extent(const IterVarNode* a) const {
      auto l = live.find(a);
      return l != live.end() ? l->second : PrimExpr(ext.at(a));
    }

    // Does split `r` of an axis whose extent is known only at run time shift its last tile
    // back (SplitTail::Shift)? Only where every run has a whole tile; else it is guarded.
    bool shifts(const IterRelation& r) const {
      if (r.tail != SplitTail::Shift) return false;
      auto b = const_bound(live.at(r.parent.get()), known);
      return b && b->min >= r.factor;
    }

    // Loop variables, the position of each leaf, and the values of every axis in terms of
    // the leaves; fuse-derived ones are let-bound at the loop that defines them.
    void bind_axis_values() {
      // An attached stage's loops are named after it, so printed nests stay unambiguous.
      std::string prefix = st->attach_kind() == AttachKind::At ? t->name + "." : "";
      for (size_t i = 0; i < leaf.size(); ++i) {
        loop_var.push_back(PrimVar(prefix + leaf[i]->var.name()));
        pos_of[leaf[i].get()] = i;
      }

      std::map<const IterVarNode*, size_t> depth;  // deepest leaf position a value uses
      for (size_t i = 0; i < leaf.size(); ++i) {
        value[leaf[i].get()] = loop_var[i];
        depth[leaf[i].get()] = i;
      }
      lets.resize(leaf.size());
      for (auto it = st->relations().rbegin(); it != st->relations().rend(); ++it) {
        if (it->kind == IterRelation::Split) {
          PrimExpr start = value.at(it->outer.get()) * it->factor;
          int64_t e = ext.at(it->parent.get());
          if (live.count(it->parent.get()) && shifts(*it)) {
            // The last tile shifted back from the run's extent (at least one tile long).
            PrimVar s(it->parent->var.name() + ".start");
            size_t d = depth.at(it->outer.get());
            lets[d].emplace_back(s, min(start, live.at(it->parent.get()) - PrimExpr(it->factor)));
            known[s.get()] = {0, e - it->factor};
            start = s;
          } else if (!live.count(it->parent.get()) && it->tail == SplitTail::Shift &&
                     e % it->factor) {
            // The tile's first value, let-bound with its range so that regions stay affine.
            PrimVar s(it->parent->var.name() + ".start");
            size_t d = depth.at(it->outer.get());
            lets[d].emplace_back(s, min(start, PrimExpr(e - it->factor)));
            known[s.get()] = {0, e - it->factor};
            start = s;
          }
          value[it->parent.get()] = start + value.at(it->inner.get());
          depth[it->parent.get()] = std::max(depth.at(it->outer.get()), depth.at(it->inner.get()));
        } else {
          PrimExpr f = value.at(it->fused.get());
          size_t d = depth.at(it->fused.get());
          int64_t inner_ext = ext.at(it->inner.get());
          const PrimExpr inner_run = run_extent(it->inner.get());
          PrimVar vo(it->outer->var.name()), vi(it->inner->var.name());
          lets[d].emplace_back(vo, f / inner_run);
          lets[d].emplace_back(vi, f % inner_run);
          value[it->outer.get()] = vo;
          value[it->inner.get()] = vi;
          depth[it->outer.get()] = depth[it->inner.get()] = d;
          known[vo.get()] = {0, ext.at(it->outer.get()) - 1};
          known[vi.get()] = {0, inner_ext - 1};
        }
      }
      for (size_t i = 0; i < leaf.size(); ++i)
        known[loop_var[i].get()] = {0, ext.at(leaf[i].get()) - 1};
    }

    // Root values (absolute indices) and the guard. A value in the padding of a padded
    // split (SplitTail::Pad) is stored past the region, in the rounded-up buffer, and reads
    // its inputs at the region's last index.
    void compute_root_values() {
      guard = make_const(DType::Bool, 1);
      for (size_t i = 0; i < st->root_axes().size(); ++i) {
        auto& a = st->root_axes()[i];
        PrimExpr v = value.at(a.get());
        if (i < n_spatial) {
          PrimExpr abs_v = simplify(region[i].min + v), read_v = abs_v;
          if (padded_extent(*st, i, region[i].extent) != region[i].extent) {
            EMBER_CHECK(st->attach_kind() == AttachKind::At, "a padded split of ", a->var.name(),
                        " in ", t->name, " needs a stage computed at another stage's loop");
            read_v = simplify(region[i].min + min(v, PrimExpr(region[i].extent - 1)));
          }
          if (region[i].clipped) guard = logical_and(guard, in_bounds(read_v, t->shape[i], known));
          if (region[i].clip) guard = logical_and(guard, abs_v < region[i].clip);
          root_map.emplace_back(a->var.get(), read_v);
          out_index.push_back(abs_v);
        } else {
          root_map.emplace_back(a->var.get(), v);
        }
      }
      // Guards of split reduction axes apply to the update only, not to the init.
      reduce_guard = make_const(DType::Bool, 1);
      for (auto& [iv, e] : split_guards) {
        PrimExpr v = simplify(value.at(iv));
        auto b = const_bound(v, known), bound = const_bound(e, known);
        if (b && bound && b->max < bound->min) continue;
        if (iv->reduce)
          reduce_guard = logical_and(reduce_guard, v < e);
        else
          guard = logical_and(guard, v < e);
      }
    }

    // Children computed at one of this stage's loops: their regions and buffers.
    void infer_child_regions() {
      attached.resize(leaf.size());
      for (auto& s : self.sch_.stages())
        if (s->attach_kind() == AttachKind::At && s->attach_stage() == st)
          attached[pos_of.at(s->attach_axis().get())].push_back(s.get());
      body_expr = substitute(self.bodies_.at(st), root_map);
      // Consumers first: a child may be read by this stage or by a child attached at the
      // same or a deeper loop (a conv computed at the tile loop that a pooling tile reads),
      // whose region must be known before the producer's can be inferred.
      std::vector<std::pair<size_t, const Stage*>> order;
      for (size_t p = 0; p < leaf.size(); ++p)
        for (const Stage* c : attached[p]) order.emplace_back(p, c);
      for (auto it = order.rbegin(); it != order.rend(); ++it) {
        auto [p, c] = *it;
        VarRanges inner;
        for (size_t q = p + 1; q < leaf.size(); ++q)
          inner[loop_var[q].get()] = {0, ext.at(leaf[q].get()) - 1};
        for (size_t q = p + 1; q < leaf.size(); ++q)
          for (auto& [v, e] : lets[q]) inner[v.get()] = known.at(v.get());
        // Region origins are expressions of the loops outside the attach point, which
        // enclose both the child's nest and this stage's reads of it.
        std::vector<Read> reads{{body_expr, inner}};
        for (auto& [q, r] : order)
          if (q >= p && r != c && child_region.count(r))
            reads.push_back(self.reads_of(r, child_region.at(r), inner));
        const bool past_run = reads_past_run(p, c, reads);
        std::vector<Region> reg = self.infer_region(c, reads, known);
        if (past_run && reads_indirectly(c)) clip_to_run(c, reg);
        std::vector<int64_t> shape;
        std::vector<PrimExpr> mins;
        for (size_t d = 0; d < reg.size(); ++d) {
          shape.push_back(padded_extent(*c, d, reg[d].extent));
          mins.push_back(reg[d].min);
        }
        pad_rows(shape, c->row_pad());
        child_region[c] = reg;
        Buffer b = make_buffer(c->tensor()->name, c->tensor()->dtype, shape,
                               c->per_thread() ? BufferScope::PerThread : BufferScope::Local);
        self.realized_[c->tensor().operator->()] = {b, mins};
      }
    }

    // Do `reads` index child `c` (attached at loop `p`) by a loop inside it that runs to an
    // extent known only at run time, or whose values may pass one (under a guard)? The
    // child's region, sized from those loops' static extents, may then pass the run's.
    bool reads_past_run(size_t p, const Stage* c, const std::vector<Read>& reads) const {
      std::set<const PrimVarNode*> vars;
      for (size_t q = p + 1; q < leaf.size(); ++q) {
        if (!live.count(leaf[q].get()) && !partial.count(leaf[q].get())) continue;
        vars.insert(loop_var[q].get());
        for (auto& [v, e] : lets[q]) vars.insert(v.get());
      }
      bool uses = false;
      for (const Read& r : reads)
        visit_prim(r.expr, [&](const PrimExpr& e) {
          auto* load = e.as<ProducerLoadNode>();
          if (!load || load->producer.get() != c->tensor().operator->()) return;
          for (const PrimExpr& i : load->indices)
            visit_prim(i, [&](const PrimExpr& x) { uses |= vars.count(x.as<PrimVarNode>()) > 0; });
        });
      return uses;
    }

    // A child computed past the run's extent (a register tile of 8 rows for a run of 7)
    // reads its inputs past the run's data, inside their buffers (allocated at the maximum
    // shape; a compact run's offsets stay below the maximum's), and what it computes there
    // is never stored: the stage that reads it is guarded. So the tile's accumulation needs
    // no guard, unless the child reads through loaded indices (an embedding lookup), which
    // past the run could point anywhere.
    bool reads_indirectly(const Stage* c) const {
      bool indirect = false;
      visit_prim(self.bodies_.at(c), [&](const PrimExpr& e) {
        if (auto* load = e.as<ProducerLoadNode>())
          for (const PrimExpr& i : load->indices)
            visit_prim(i,
                       [&](const PrimExpr& x) { indirect |= x.as<ProducerLoadNode>() != nullptr; });
      });
      return indirect;
    }

    // A child's region that may pass the run's extent is guarded by the run's shape of the
    // child's tensor (Schedule::live().dims); without one it cannot be (a clear error, not a
    // child computed past the run's inputs).
    void clip_to_run(const Stage* c, std::vector<Region>& reg) const {
      const std::vector<PrimExpr> dims = self.live_dims(c->tensor());
      if (dims.empty())
        fail("stage ", c->tensor()->name, " is computed inside ", t->name,
             "'s loops whose extent is known only at run time, but has no run-time shape "
             "(Schedule::live().dims) to keep it within the run's");
      for (size_t d = 0; d < reg.size(); ++d) reg[d].clip = dims[d];
    }

    // Each part of the guard is tested just inside the deepest loop it depends on, when
    // that loop is outside the reduction loops: a clipped row of a tile is then skipped
    // whole, and the accumulation inside stays unconditional (so it can live in registers).
    void hoist_guards() {
      hoisted.resize(leaf.size() + 1);
      if (leaf.empty()) return;
      // A loop of one iteration (a register tile of one row) is 0 in the guard, which then
      // need not stay inside it: a GPU conv tile's row guard inside the unrolled register
      // tile kept LLVM from sharing the tile's operand loads between its FMAs.
      std::map<const PrimVarNode*, int> depth_of;
      VarMap single;
      for (size_t i = 0; i < leaf.size(); ++i) {
        if (ext.at(leaf[i].get()) == 1) single.emplace_back(loop_var[i].get(), int64_t{0});
        depth_of[loop_var[i].get()] = static_cast<int>(i);
        for (auto& [v, e] : lets[i]) depth_of[v.get()] = static_cast<int>(i);
      }
      PrimExpr kept = make_const(DType::Bool, 1);
      for (PrimExpr part : conjuncts(guard)) {
        if (!single.empty()) part = simplify(substitute(part, single));
        int depth = -1;
        visit_prim(part, [&](const PrimExpr& x) {
          auto it = depth_of.find(x.as<PrimVarNode>());
          if (it != depth_of.end()) depth = std::max(depth, it->second);
        });
        // Inside a reduction loop, a GPU thread loop (a phase inside the reduction chunk
        // loop) still takes the guard: it holds for the thread's whole register tile.
        bool outside = depth < static_cast<int>(first_reduce) ||
                       (depth >= 0 && is_gpu_thread(st->kind_of(leaf[depth])));
        if (outside && depth + 1 < static_cast<int>(leaf.size()))
          hoisted[depth + 1].push_back(part);
        else
          kept = logical_and(kept, part);
      }
      guard = kept;
    }

    // The innermost statement(s): the update, and a reduction's init.
    void build_innermost() {
      const Realized& out = self.realized_.at(t);
      std::vector<PrimExpr> rel_index = out_index;
      for (size_t d = 0; d < out.mins.size(); ++d)
        rel_index[d] = simplify(rel_index[d] - out.mins[d]);
      PrimExpr flat = simplify(out.flat(rel_index));
      first_reduce = leaf.size();
      for (size_t i = 0; i < leaf.size(); ++i)
        if (leaf[i]->reduce) {
          first_reduce = i;
          break;
        }
      hoist_guards();
      if (auto* red = body_expr.as<ReduceNode>()) {
        PrimExpr src = self.realize(red->source);
        PrimExpr acc = load(out.buffer, flat);
        PrimExpr combined = red->op == ReduceOp::Sum   ? multiply_add(src, acc)
                            : red->op == ReduceOp::Max ? max(acc, src)
                                                       : min(acc, src);
        update = if_then_else(logical_and(guard, reduce_guard), store(out.buffer, flat, combined));
        init = if_then_else(guard, store(out.buffer, flat, reduce_identity(red->op, t->dtype)));
      } else {
        EMBER_CHECK(!contains_reduce(body_expr), "a reduction must be the whole body of ", t->name);
        update = if_then_else(guard, store(out.buffer, flat, self.realize(body_expr)));
      }
    }

    // `body` under the guards hoisted to `level`.
    Stmt guarded(size_t level, Stmt body) const {
      PrimExpr cond = make_const(DType::Bool, 1);
      for (auto& part : hoisted[level]) cond = logical_and(cond, part);
      return hoisted[level].empty() ? body : if_then_else(cond, body);
    }

    // The prefetches (Stage::prefetch) at the start of leaf loop `i`: its iteration's share
    // of lines from the element of the input read first in the next iteration of the loop
    // ahead (the loops inside that one at 0).
    std::vector<Stmt> prefetches_at(size_t i) const {
      std::vector<Stmt> out;
      for (const Stage::Prefetch& p : st->prefetches()) {
        if (p.at != leaf[i]) continue;
        auto a = pos_of.find(p.ahead.get());
        EMBER_CHECK(a != pos_of.end() && a->second < i, "prefetch in ", t->name,
                    ": the loop ahead is not a loop outside ", leaf[i]->var.name());
        VarMap next;
        for (size_t q = a->second; q < leaf.size(); ++q) {
          next.emplace_back(loop_var[q].get(), q == a->second ? loop_var[q] + 1 : PrimExpr(0));
          for (auto& [v, e] : lets[q]) next.emplace_back(v.get(), PrimExpr(0));
        }
        const ProducerLoadNode* read = nullptr;
        visit_prim(body_expr, [&](const PrimExpr& e) {
          auto* l = e.as<ProducerLoadNode>();
          if (l && !read && l->producer == p.input.ref()) read = l;
        });
        EMBER_CHECK(read, "prefetch in ", t->name, " of ", p.input->name,
                    ", which it does not read");
        const Realized& in = self.realized_.at(p.input.operator->());
        std::vector<PrimExpr> index;
        for (size_t d = 0; d < read->indices.size(); ++d)
          index.push_back(substitute(read->indices[d], next) -
                          (in.mins.empty() ? PrimExpr(0) : in.mins[d]));
        const int64_t line = 64 / dtype_bytes(p.input.dtype()), n = ext.at(leaf[i].get());
        const int64_t lines = (p.bytes / 64 + n - 1) / n;
        PrimExpr first = in.flat(index) + loop_var[i] * PrimExpr(lines * line);
        for (int64_t l = 0; l < lines; ++l)
          out.push_back(evaluate(prefetch(in.buffer, simplify(first + PrimExpr(l * line)))));
      }
      return out;
    }

    // Leaf loop `i` around `body`, with its lets, its guards, its prefetches and
    // (`with_children`) the stages attached at it.
    Stmt wrap(size_t i, Stmt body, bool with_children) {
      Stmt inner = guarded(i + 1, body);
      if (with_children) {
        std::vector<Stmt> parts = prefetches_at(i);
        if (!parts.empty()) {
          parts.push_back(inner);
          inner = seq(parts);
        }
      }
      if (with_children && !attached[i].empty()) {
        // Allocate the tiles, compute each child, then the rest of this loop's body.
        std::vector<Stmt> parts;
        for (const Stage* c : attached[i])
          parts.push_back(self.emit_stage(c, child_region.at(c), known));
        parts.push_back(inner);
        inner = seq(parts);
        for (auto c = attached[i].rbegin(); c != attached[i].rend(); ++c)
          inner = allocate(self.realized_.at((*c)->tensor().operator->()).buffer, inner);
      }
      if (leaf[i]->reduce && inner.as<StoreNode>()) {
        // A reduction loop around one update (a row sum over fused trailing dimensions):
        // its lets (r0 = f / W, r1 = f % W) substituted, the update stays the loop's whole
        // body (the code generator's rolled sum) and the final simplify folds
        // (f / W) * W + f % W back into f, a contiguous read.
        for (auto it = lets[i].rbegin(); it != lets[i].rend(); ++it)
          inner = substitute(inner, VarMap{{it->first.get(), it->second}});
      } else {
        for (auto it = lets[i].rbegin(); it != lets[i].rend(); ++it)
          inner = let_stmt(it->first, it->second, inner);
      }
      // A vector whose length is the run's (a run-time axis no longer than one vector: the
      // scores' columns of a short range) runs as a scalar loop: vectors have fixed lengths.
      const PrimExpr extent = run_extent(leaf[i].get());
      ForKind kind = st->kind_of(leaf[i]);
      int64_t fixed;
      if (kind == ForKind::Vectorized && !as_int(extent, &fixed)) kind = ForKind::Serial;
      return for_loop(loop_var[i], PrimExpr(int64_t{0}), extent, kind, inner);
    }

    // Wraps the loops from the inside out, the init nest before the reduction loops.
    Stmt wrap_loops() {
      Stmt body = update;
      for (size_t i = leaf.size(); i-- > 0;) {
        body = wrap(i, body, true);
        if (i == first_reduce) {
          Stmt init_nest = init;
          for (size_t j = leaf.size(); j-- > i + 1;)
            if (!leaf[j]->reduce) init_nest = wrap(j, init_nest, false);
          body = seq({init_nest, body});
        }
      }
      if (leaf.empty() && init) body = seq({init, body});
      body = guarded(0, body);
      return body;
    }
  };

  // What child `r`, computed over `region`, reads: its body at absolute indices
  // region.min + v for each of its axes v, with its reduction variables over their extents.
  Read reads_of(const Stage* r, const std::vector<Region>& region, VarRanges ranges) {
    VarMap at;
    for (size_t i = 0; i < r->root_axes().size(); ++i) {
      const auto& a = r->root_axes()[i];
      if (i < region.size()) {
        PrimVar v(a->var.name());
        ranges[v.get()] = {0, region[i].extent - 1};
        at.emplace_back(a->var.get(), simplify(region[i].min + v));
      } else {
        ranges[a->var.get()] = {0, a->extent - 1};
      }
    }
    return {substitute(bodies_.at(r), at), ranges};
  }

  // Region of `c` that the `reads` read while their variables vary.
  std::vector<Region> infer_region(const Stage* c, const std::vector<Read>& reads,
                                   const VarRanges& known) {
    const TensorNode* t = c->tensor().operator->();
    std::vector<std::optional<std::pair<PrimExpr, int64_t>>> acc(t->shape.size());
    std::vector<bool> full(t->shape.size(), false);
    bool any = false;
    for (const Read& read : reads)
      visit_prim(read.expr, [&](const PrimExpr& e) {
        auto* p = e.as<ProducerLoadNode>();
        if (!p || p->producer.get() != t) return;
        any = true;
        for (size_t d = 0; d < p->indices.size(); ++d) {
          if (full[d]) continue;
          auto b = bound(simplify(unclamped(p->indices[d])), read.ranges);
          if (!b) {
            full[d] = true;
          } else if (!acc[d]) {
            acc[d] = b;
          } else if (structural_equal(acc[d]->first, b->first)) {
            acc[d]->second = std::max(acc[d]->second, b->second);
          } else {
            full[d] = true;  // different origins: take the whole axis
          }
        }
      });
    EMBER_CHECK(any, "stage ", t->name, " is computed at a stage that does not read it");
    std::vector<Region> reg;
    for (size_t d = 0; d < t->shape.size(); ++d) {
      int64_t shape = t->shape[d];
      if (full[d] || !acc[d] || acc[d]->second >= shape) {
        reg.push_back({PrimExpr(int64_t{0}), shape, false});
        continue;
      }
      PrimExpr mn = simplify(acc[d]->first);
      int64_t e = acc[d]->second;
      auto b = const_bound(mn, known);
      bool safe = b && b->min >= 0 && b->max + e - 1 < shape;
      reg.push_back({mn, e, !safe});
    }
    return reg;
  }

  static PrimExpr in_bounds(const PrimExpr& v, int64_t shape, const VarRanges& known) {
    auto b = const_bound(v, known);
    PrimExpr g = make_const(DType::Bool, 1);
    if (!b || b->min < 0) g = logical_and(g, v >= PrimExpr(int64_t{0}));
    if (!b || b->max >= shape) g = logical_and(g, v < PrimExpr(shape));
    return g;
  }

  // The parts of a chain of logical ands.
  static std::vector<PrimExpr> conjuncts(const PrimExpr& e) {
    auto* b = e.as<BinaryNode>();
    if (!b || b->op != BinaryOp::BitAnd || e.dtype() != DType::Bool) return {e};
    std::vector<PrimExpr> out = conjuncts(b->a);
    for (auto& x : conjuncts(b->b)) out.push_back(x);
    return out;
  }

  static bool contains_reduce(const PrimExpr& e) {
    bool found = false;
    visit_prim(e, [&](const PrimExpr& x) { found |= x.kind() == PrimKind::Reduce; });
    return found;
  }

  // A root stage over its whole static shape must not index a run-time dimension of a
  // tensor by its own axes: past the run's extent it would read beyond that input.
  void check_reads_static(const Stage* st) const {
    std::set<const PrimVarNode*> own;
    for (const IterVar& a : st->axes()) own.insert(a->var.get());
    visit_prim(bodies_.at(st), [&](const PrimExpr& e) {
      auto* p = e.as<ProducerLoadNode>();
      auto it = p ? sch_.live().dims.find(p->producer.get()) : sch_.live().dims.end();
      if (it == sch_.live().dims.end()) return;
      for (size_t d = 0; d < p->indices.size(); ++d)
        visit_prim(p->indices[d], [&](const PrimExpr& x) {
          if (it->second[d].get() && own.count(x.as<PrimVarNode>()))
            fail("stage ", st->tensor()->name, " reads dimension ", d, " of ", p->producer->name,
                 ", whose extent is known only at run time, over its own static shape: give "
                 "it a run-time shape (Schedule::live().dims)");
        });
    });
  }

  const Schedule& sch_;
  std::vector<Buffer> params_;
  KernelSymbols symbols_read_;  // the shape_args input and its lets (none when static)
  VarRanges symbols_;           // the symbols' ranges
  int num_inputs_ = 0;
  std::set<const TensorNode*> outputs_;
  std::map<const TensorNode*, const Stage*> stage_of_;
  std::map<const TensorNode*, Realized> realized_;
  std::map<const Stage*, PrimExpr> bodies_;
};

}  // namespace

PrimFunc lower_schedule(const Schedule& sch, const std::string& name,
                        const std::vector<Tensor>& inputs) {
  return ScheduleLowering(sch, inputs).run(name);
}

}  // namespace ember::passes
