#include "ember/passes/schedule.h"

#include <algorithm>

#include "ember/support/error.h"

namespace ember::passes {

using namespace ir;

namespace {
std::vector<IterVar> reduce_axes_of(const PrimExpr& body) {
  if (auto* r = body.as<ReduceNode>()) return r->axes;
  return {};
}
}  // namespace

Stage::Stage(Tensor tensor, Schedule* schedule)
    : tensor_(std::move(tensor)), schedule_(schedule), body_(tensor_->body) {
  root_axes_ = tensor_->axes;
  for (auto& r : reduce_axes_of(body_)) root_axes_.push_back(r);
  leaf_ = root_axes_;
}

std::vector<IterVar> Stage::reduce_axes() const { return reduce_axes_of(body_); }

size_t Stage::leaf_pos(const IterVar& axis, const char* what) const {
  for (size_t i = 0; i < leaf_.size(); ++i)
    if (leaf_[i] == axis) return i;
  throw InternalError("internal error: schedule of " + tensor_->name + ": " + what + " on axis " +
                      (axis ? axis->var.name() : "<null>") +
                      " which is not a current loop of this stage");
}

std::pair<IterVar, IterVar> Stage::split(const IterVar& axis, int64_t factor, SplitTail tail) {
  EMBER_CHECK(factor > 0, "split factor must be positive");
  size_t pos = leaf_pos(axis, "split");
  if (tail == SplitTail::Shift)
    EMBER_CHECK(!axis->reduce && factor <= axis->extent, "a shifted split of ", axis->var.name(),
                " needs a data axis of at least ", factor, " values");
  if (tail == SplitTail::Pad)
    EMBER_CHECK(!axis->reduce, "a padded split of ", axis->var.name(), " needs a data axis");
  const std::string& n = axis->var.name();
  IterVar outer = iter_var(n + ".o", (axis->extent + factor - 1) / factor, axis->reduce);
  IterVar inner = iter_var(n + ".i", factor, axis->reduce);
  relations_.push_back({IterRelation::Split, axis, outer, inner, nullptr, factor, tail});
  leaf_[pos] = inner;
  leaf_.insert(leaf_.begin() + pos, outer);
  return {outer, inner};
}

IterVar Stage::fuse(const IterVar& outer, const IterVar& inner) {
  size_t po = leaf_pos(outer, "fuse"), pi = leaf_pos(inner, "fuse");
  EMBER_CHECK(pi == po + 1, "fuse needs adjacent loops, outer first");
  EMBER_CHECK(outer->reduce == inner->reduce, "cannot fuse a reduction loop with a data loop");
  IterVar fused = iter_var(outer->var.name() + "." + inner->var.name() + ".f",
                           outer->extent * inner->extent, outer->reduce);
  relations_.push_back({IterRelation::Fuse, nullptr, outer, inner, fused, 0});
  leaf_[po] = fused;
  leaf_.erase(leaf_.begin() + pi);
  return fused;
}

IterVar Stage::fuse(const std::vector<IterVar>& axes) {
  EMBER_CHECK(!axes.empty(), "fuse of no axes");
  IterVar f = axes[0];
  for (size_t i = 1; i < axes.size(); ++i) f = fuse(f, axes[i]);
  return f;
}

void Stage::reorder(const std::vector<IterVar>& order) {
  std::vector<size_t> positions;
  for (auto& a : order) positions.push_back(leaf_pos(a, "reorder"));
  std::vector<size_t> sorted = positions;
  std::sort(sorted.begin(), sorted.end());
  EMBER_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(),
              "reorder names an axis twice");
  std::vector<IterVar> leaf = leaf_;
  for (size_t i = 0; i < order.size(); ++i) leaf[sorted[i]] = order[i];
  leaf_ = leaf;
}

std::vector<IterVar> Stage::tile(const IterVar& x, const IterVar& y, int64_t fx, int64_t fy) {
  auto [xo, xi] = split(x, fx);
  auto [yo, yi] = split(y, fy);
  reorder({xo, yo, xi, yi});
  return {xo, yo, xi, yi};
}

void Stage::annotate(const IterVar& axis, ForKind kind) {
  leaf_pos(axis, for_kind_name(kind));
  kinds_[axis.get()] = kind;
}

void Stage::bind(const IterVar& axis, ForKind thread_tag) {
  EMBER_CHECK(is_gpu_kind(thread_tag), "bind needs a GPU block or thread kind, got ",
              for_kind_name(thread_tag));
  EMBER_CHECK(!axis->reduce, "cannot bind reduction axis ", axis->var.name(), " of ", tensor_->name,
              " to ", for_kind_name(thread_tag));
  for (auto& [a, k] : kinds_)
    EMBER_CHECK(k != thread_tag || a == axis.get(), "schedule of ", tensor_->name, ": ",
                for_kind_name(thread_tag), " is bound twice");
  annotate(axis, thread_tag);
}

ForKind Stage::kind_of(const IterVar& axis) const {
  auto it = kinds_.find(axis.get());
  return it == kinds_.end() ? ForKind::Serial : it->second;
}

void Stage::compute_at(Stage& parent, const IterVar& axis) {
  parent.leaf_pos(axis, "compute_at");
  EMBER_CHECK(&parent != this, "a stage cannot be computed at itself");
  attach_ = AttachKind::At;
  attach_stage_ = &parent;
  attach_axis_ = axis;
}

void Stage::prefetch(const IterVar& at, const Tensor& input, const IterVar& ahead, int64_t bytes) {
  EMBER_CHECK(leaf_pos(ahead, "prefetch") < leaf_pos(at, "prefetch"), "prefetch at ",
              at->var.name(), " for the next ", ahead->var.name(), " in ", tensor_->name,
              ": the loop ahead must enclose it");
  prefetches_.push_back({at, ahead, input, bytes});
}

void Stage::pad_rows(int64_t pad) {
  EMBER_CHECK(pad >= 0, "pad_rows(", pad, ") of ", tensor_->name, ": the pad cannot be negative");
  row_pad_ = pad;
}

void Stage::compute_inline() {
  EMBER_CHECK(!body_.as<ReduceNode>(), "cannot inline the reduction ", tensor_->name);
  attach_ = AttachKind::Inline;
  attach_stage_ = nullptr;
}

Schedule::Schedule(std::vector<Tensor> outputs) : outputs_(std::move(outputs)) {
  for (auto& t : topo_order(outputs_))
    if (!t->is_placeholder()) stages_.push_back(std::make_unique<Stage>(t, this));
}

bool Schedule::has_stage(const Tensor& t) const {
  for (auto& s : stages_)
    if (s->tensor().ref() == t.ref()) return true;
  return false;
}

Stage& Schedule::operator[](const Tensor& t) {
  for (auto& s : stages_)
    if (s->tensor().ref() == t.ref()) return *s;
  throw InternalError("internal error: no stage for tensor " + t->name +
                      " (placeholders have no stage)");
}

PrimExpr Schedule::expanded_body(const Stage& s) const {
  struct Inliner : PrimMutator {
    const Schedule* sch;
    PrimExpr visit_producer_load(const PrimExpr& e, const ProducerLoadNode* op) override {
      PrimExpr base = PrimMutator::visit_producer_load(e, op);
      auto* p = base.as<ProducerLoadNode>();
      for (auto& st : sch->stages_) {
        if (st->tensor().ref() != p->producer) continue;
        if (st->attach_kind() != AttachKind::Inline) return base;
        VarMap map;
        for (size_t d = 0; d < st->axes().size(); ++d)
          map.emplace_back(st->axes()[d]->var.get(), p->indices[d]);
        return mutate(substitute(st->body(), map));
      }
      return base;
    }
  } inliner;
  inliner.sch = this;
  return inliner.mutate(s.body());
}

Tensor Schedule::cache_write(const Tensor& t, const std::string& suffix) {
  Stage& s = (*this)[t];
  EMBER_CHECK(s.relations_.empty(), "cache_write must come before splits of ", t->name);
  // The cache gets fresh spatial axes; the reduction axes move into it.
  auto cache = std::make_shared<TensorNode>();
  cache->name = t->name + "." + suffix;
  cache->dtype = t->dtype;
  cache->shape = t->shape;
  VarMap map;
  std::vector<PrimExpr> index;
  for (auto& a : t->axes) {
    cache->axes.push_back(iter_var(a->var.name(), a->extent));
    map.emplace_back(a->var.get(), cache->axes.back()->var);
    index.push_back(a->var);
  }
  cache->body = substitute(s.body_, map);
  Tensor cache_t(cache);
  s.body_ = cache_t(index);
  s.root_axes_ = t->axes;
  s.leaf_ = s.root_axes_;
  s.kinds_.clear();
  if (auto d = live_.dims.find(t.operator->()); d != live_.dims.end())
    live_.dims[cache.get()] = d->second;
  auto stage = std::make_unique<Stage>(cache_t, this);
  stage->local_ = true;
  for (size_t i = 0; i < stages_.size(); ++i) {
    if (stages_[i].get() == &s) {
      stages_.insert(stages_.begin() + i, std::move(stage));
      break;
    }
  }
  return cache_t;
}

namespace {

Tensor make_tensor(const std::string& name, DType dtype, std::vector<IterVar> axes, PrimExpr body) {
  auto t = std::make_shared<TensorNode>();
  t->name = name;
  t->dtype = dtype;
  for (auto& a : axes) t->shape.push_back(a->extent);
  t->axes = std::move(axes);
  t->body = std::move(body);
  return Tensor(t);
}

// Replaces reads of `from` with reads of `to` at the same indices.
PrimExpr redirect_reads(const PrimExpr& e, const TensorNode* from, const Tensor& to) {
  struct Redirect : PrimMutator {
    const TensorNode* from;
    Tensor to;
    PrimExpr visit_producer_load(const PrimExpr& e, const ProducerLoadNode* op) override {
      PrimExpr base = PrimMutator::visit_producer_load(e, op);
      auto* p = base.as<ProducerLoadNode>();
      return p->producer.get() == from ? to(p->indices) : base;
    }
  } r;
  r.from = from;
  r.to = to;
  return r.mutate(e);
}

PrimExpr reduce(ReduceOp op, PrimExpr source, std::vector<IterVar> axes) {
  switch (op) {
    case ReduceOp::Sum:
      return sum(std::move(source), std::move(axes));
    case ReduceOp::Max:
      return max_reduce(std::move(source), std::move(axes));
    case ReduceOp::Min:
      return min_reduce(std::move(source), std::move(axes));
  }
  return PrimExpr();
}

}  // namespace

void Schedule::insert_before(const Stage& s, std::vector<std::unique_ptr<Stage>> stages) {
  for (size_t i = 0; i < stages_.size(); ++i)
    if (stages_[i].get() == &s) {
      stages_.insert(stages_.begin() + i, std::make_move_iterator(stages.begin()),
                     std::make_move_iterator(stages.end()));
      return;
    }
  EMBER_CHECK(false, "stage ", s.tensor()->name, " is not in this schedule");
}

Tensor Schedule::cache_read(const Tensor& t, const std::vector<Tensor>& readers,
                            const std::string& suffix) {
  EMBER_CHECK(!readers.empty(), "cache_read of ", t->name, " without readers");
  std::vector<IterVar> axes;
  std::vector<PrimExpr> index;
  for (size_t d = 0; d < t->shape.size(); ++d) {
    axes.push_back(iter_var("ax" + std::to_string(d), t->shape[d]));
    index.push_back(axes.back()->var);
  }
  Tensor copy = make_tensor(t->name + "." + suffix, t->dtype, axes, t(index));
  if (auto d = live_.dims.find(t.operator->()); d != live_.dims.end())
    live_.dims[copy.operator->()] = d->second;
  // The copy is computed before the first reader (after `t`, which every reader follows).
  Stage* first = nullptr;
  for (auto& s : stages_)
    for (auto& r : readers)
      if (!first && s->tensor().ref() == r.ref()) first = s.get();
  EMBER_CHECK(first, "cache_read of ", t->name, ": a reader has no stage");
  for (auto& r : readers) {
    Stage& s = (*this)[r];
    EMBER_CHECK(s.relations_.empty(), "cache_read must come before splits of ", r->name);
    s.body_ = redirect_reads(s.body_, t.operator->(), copy);
  }
  std::vector<std::unique_ptr<Stage>> added;
  added.push_back(std::make_unique<Stage>(copy, this));
  insert_before(*first, std::move(added));
  return copy;
}

std::vector<Tensor> Schedule::tree_reduce(const Tensor& t, int64_t factor) {
  Stage& s = (*this)[t];
  auto* red = s.body_.as<ReduceNode>();
  EMBER_CHECK(red, "tree_reduce of ", t->name, ", which is not a reduction");
  EMBER_CHECK(factor >= 1 && (factor & (factor - 1)) == 0, "tree_reduce of ", t->name,
              ": the factor ", factor, " is not a power of two");
  EMBER_CHECK(s.relations_.empty() && s.attach_ == AttachKind::Root,
              "tree_reduce must come before the schedule of ", t->name);
  for (auto& r : red->axes)
    if (run_extent(s, r).get())
      fail("tree_reduce of ", t->name, " over ", r->var.name(),
           ", whose extent is known only at run time: not supported");
  // Partial f reduces flat indices kk = ko * factor + f of the row-major reduction axes;
  // past the end (kk >= total) it reads a clamped index and contributes the identity.
  int64_t total = 1;
  for (auto& r : red->axes) total *= r->extent;
  IterVar ko = iter_var(t->name + ".ko", (total + factor - 1) / factor, true);
  std::vector<IterVar> axes;
  VarMap map;
  for (auto& a : t->axes) {
    axes.push_back(iter_var(a->var.name(), a->extent));
    map.emplace_back(a->var.get(), axes.back()->var);
  }
  IterVar f = iter_var("f", factor);
  PrimExpr kk = ko->var * PrimExpr(factor) + f->var;
  PrimExpr flat = factor * ko->extent > total ? min(kk, PrimExpr(total - 1)) : kk;
  for (size_t d = red->axes.size(); d-- > 0;) {
    int64_t e = red->axes[d]->extent;
    map.emplace_back(red->axes[d]->var.get(), d == 0 ? flat : flat % PrimExpr(e));
    flat = flat / PrimExpr(e);
  }
  PrimExpr src = substitute(red->source, map);
  if (factor * ko->extent > total)
    src = select(kk < PrimExpr(total), src, reduce_identity(red->op, t->dtype));
  std::vector<IterVar> part_axes = axes;
  part_axes.push_back(f);
  std::vector<Tensor> out{
      make_tensor(t->name + ".partial", t->dtype, part_axes, reduce(red->op, src, {ko}))};
  BinaryOp combine = red->op == ReduceOp::Sum   ? BinaryOp::Add
                     : red->op == ReduceOp::Max ? BinaryOp::Max
                                                : BinaryOp::Min;
  for (int64_t half = factor / 2; half >= 1; half /= 2) {
    std::vector<IterVar> lv;
    std::vector<PrimExpr> lo, hi;
    for (auto& a : axes) {
      lv.push_back(iter_var(a->var.name(), a->extent));
      lo.push_back(lv.back()->var);
    }
    lv.push_back(iter_var("f", half));
    hi = lo;
    lo.push_back(lv.back()->var);
    hi.push_back(lv.back()->var + PrimExpr(half));
    const Tensor& prev = out.back();
    out.push_back(make_tensor(t->name + ".tree" + std::to_string(half), t->dtype, lv,
                              binary(combine, prev(lo), prev(hi))));
  }
  std::vector<PrimExpr> index;
  for (auto& a : t->axes) index.push_back(a->var);
  index.push_back(PrimExpr(int64_t{0}));
  s.body_ = out.back()(index);
  s.root_axes_ = t->axes;
  s.leaf_ = s.root_axes_;
  s.kinds_.clear();
  std::vector<std::unique_ptr<Stage>> added;
  for (auto& x : out) added.push_back(std::make_unique<Stage>(x, this));
  insert_before(s, std::move(added));
  return out;
}

// The partial stage [t's axes with `f` inserted at `f_pos`] of rfactor and split_reduction:
// the sum's source, its factored reduction axis rewritten by `k_map` in terms of `f` and
// `reduce_axes`, summed over `reduce_axes`; `t` becomes the sum of its `f` partials,
// partial 0 first.
Tensor Schedule::partial_sums(Stage& s, const IterVar& f, size_t f_pos, const VarMap& k_map,
                              const std::vector<IterVar>& reduce_axes) {
  const Tensor& t = s.tensor();
  auto* red = s.body_.as<ReduceNode>();
  for (auto& [k, v] : k_map)
    for (auto& r : red->axes)
      if (r->var.get() == k && run_extent(s, r).get())
        fail("partial sums of ", t->name, " over ", r->var.name(),
             ", whose extent is known only at run time: not supported");
  std::vector<PrimExpr> part_dims;  // t's run-time shape with a static f inserted
  if (auto d = live_.dims.find(t.operator->()); d != live_.dims.end()) {
    part_dims = d->second;
    part_dims.insert(part_dims.begin() + f_pos, PrimExpr());
  }
  std::vector<IterVar> axes;
  VarMap map = k_map;
  for (auto& a : t->axes) {
    axes.push_back(iter_var(a->var.name(), a->extent));
    map.emplace_back(a->var.get(), axes.back()->var);
  }
  axes.insert(axes.begin() + f_pos, f);
  Tensor part = make_tensor(t->name + ".partial", t->dtype, axes,
                            sum(substitute(red->source, map), reduce_axes));
  if (!part_dims.empty()) live_.dims[part.operator->()] = part_dims;
  PrimExpr total;
  for (int64_t i = 0; i < f->extent; ++i) {
    std::vector<PrimExpr> index;
    for (auto& a : t->axes) index.push_back(a->var);
    index.insert(index.begin() + f_pos, PrimExpr(i));
    total = i == 0 ? part(index) : total + part(index);
  }
  s.body_ = total;
  s.root_axes_ = t->axes;
  s.leaf_ = s.root_axes_;
  s.kinds_.clear();
  std::vector<std::unique_ptr<Stage>> added;
  added.push_back(std::make_unique<Stage>(part, this));
  insert_before(s, std::move(added));
  return part;
}

const ReduceNode* Schedule::sum_to_factor(const Tensor& t, const char* what) {
  Stage& s = (*this)[t];
  auto* red = s.body_.as<ReduceNode>();
  EMBER_CHECK(red && red->op == ReduceOp::Sum, what, " of ", t->name, ", which is not a sum");
  EMBER_CHECK(s.relations_.empty() && s.attach_ == AttachKind::Root, what,
              " must come before the schedule of ", t->name);
  EMBER_CHECK(!t->axes.empty(), what, " of the scalar ", t->name);
  return red;
}

Tensor Schedule::rfactor(const Tensor& t, int64_t factor, bool lanes) {
  auto* red = sum_to_factor(t, "rfactor");
  const IterVar& k = red->axes.back();
  EMBER_CHECK(factor >= 1 && k->extent % factor == 0, "rfactor of ", t->name, ": ", factor,
              " does not divide the ", k->extent, " steps of ", k->var.name());
  IterVar ko = iter_var(k->var.name() + ".o", k->extent / factor, true);
  IterVar f = iter_var(t->name + ".f", factor);
  std::vector<IterVar> reduce_axes(red->axes.begin(), red->axes.end() - 1);
  reduce_axes.push_back(ko);
  VarMap k_map{{k->var.get(), ko->var * PrimExpr(factor) + f->var}};
  Stage& s = (*this)[t];
  Tensor part = partial_sums(s, f, t->axes.size() - (lanes ? 0 : 1), k_map, reduce_axes);
  if (lanes) {  // t stays a reduction: the sum along the partial's innermost axis
    IterVar lane = reduce_axis(factor, t->name + ".lane");
    std::vector<PrimExpr> index;
    for (auto& a : t->axes) index.push_back(a->var);
    index.push_back(lane->var);
    s.body_ = sum(part(index), {lane});
    s.root_axes_.push_back(lane);
    s.leaf_ = s.root_axes_;
  }
  return part;
}

Tensor Schedule::split_reduction(const Tensor& t, int64_t groups, int64_t chunk) {
  auto* red = sum_to_factor(t, "split_reduction");
  const IterVar& k = red->axes.front();
  EMBER_CHECK(groups >= 1 && chunk >= 1 && k->extent % (groups * chunk) == 0, "split_reduction of ",
              t->name, ": ", groups, " groups of ", chunk, " do not divide the ", k->extent,
              " steps of ", k->var.name());
  IterVar ko = iter_var(k->var.name() + ".o", k->extent / (groups * chunk), true);
  IterVar ki = iter_var(k->var.name() + ".i", chunk, true);
  IterVar f = iter_var(t->name + ".g", groups);
  std::vector<IterVar> reduce_axes{ko, ki};
  reduce_axes.insert(reduce_axes.end(), red->axes.begin() + 1, red->axes.end());
  VarMap k_map{{k->var.get(), (ko->var * PrimExpr(groups) + f->var) * PrimExpr(chunk) + ki->var}};
  return partial_sums((*this)[t], f, 0, k_map, reduce_axes);
}

PrimExpr Schedule::run_extent(const Stage& s, const IterVar& a) const {
  if (live_.empty()) return {};
  const std::vector<IterVar>& root = s.root_axes();
  auto pos = std::find(root.begin(), root.end(), a);
  EMBER_CHECK(pos != root.end(), a->var.name(), " is not a root axis of ", s.tensor()->name);
  if (auto it = live_.axes.find(a.get()); it != live_.axes.end()) return it->second;
  if (!a->reduce) {
    auto d = live_.dims.find(s.tensor().operator->());
    const size_t i = static_cast<size_t>(pos - root.begin());
    if (d != live_.dims.end()) return i >= d->second.size() ? PrimExpr() : d->second[i];
    // A stage inside an op's compute rule (softmax's row maxima) has no type of its own: its
    // axes take what they index, as reduction axes do.
  }
  PrimExpr found;
  visit_prim(expanded_body(s), [&](const PrimExpr& e) {
    auto* p = e.as<ProducerLoadNode>();
    auto d = p ? live_.dims.find(p->producer.get()) : live_.dims.end();
    if (d == live_.dims.end()) return;
    for (size_t i = 0; i < p->indices.size(); ++i) {
      if (!d->second[i].get()) continue;
      if (p->indices[i].get() == a->var.get() && p->producer->shape[i] == a->extent) {
        found = d->second[i];
        continue;
      }
      visit_prim(p->indices[i], [&](const PrimExpr& x) {
        if (x.get() == a->var.get())
          fail(a->reduce ? "reduction axis " : "axis ", a->var.name(), " of ", s.tensor()->name, " indexes dimension ", i,
               " of ", p->producer->name,
               ", whose extent is known only at run time, through an expression: give the axis "
               "its run's extent (Schedule::live().axes)");
      });
    }
  });
  return found;
}

}  // namespace ember::passes
