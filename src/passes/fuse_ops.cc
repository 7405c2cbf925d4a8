// FuseOps: group operators into kernels.
//
// The question FuseOps answers for every op N is "can N's result stay inside one kernel
// instead of going to memory?". It follows TVM's answer, which rests on two facts.
//
// 1. The op pattern kinds (op.h) say how an op reads its inputs. ElemWise and Broadcast ops
//    read one input element per output element; Injective ops (transpose, concatenate)
//    read one element somewhere; CommReduce and OutEWiseFusable ops (sum, conv2d, dense,
//    pooling) read many. Inside one loop nest an elementwise consumer can take its producer's
//    value straight from a register, whatever the producer is; an op that reads many
//    elements of its input would have to recompute them.
//
// 2. The post-dominator of N — the first node that every path from N to the function's
//    output passes through — is where all of N's uses come back together. If every op on the
//    paths from N to its post-dominator D is cheap enough to be recomputed or inlined (the
//    rules below), N, D and everything between become one group whose only output is D: no
//    intermediate escapes, so none needs memory. A value that is also a model output has an
//    edge to the virtual exit node, so nothing that must be stored is ever fused away.
//
// The rules, applied in phases so that anchors claim their epilogues first:
//   phase 0  an anchor (OutEWiseFusable: conv2d, dense, pooling; or CommReduce) fuses with
//            its post-dominator when every op on the way, the post-dominator included, is
//            ElemWise or Broadcast: conv -> add bias -> relu, conv -> add residual -> relu.
//            An ElemWise/Broadcast op fuses into a post-dominator that is Injective or a
//            reduction (CommReduce), through Injective ops: exp -> sum.
//   phase 1  Injective ops fuse with Injective post-dominators: transpose -> reshape.
// Opaque ops (softmax for now) are never fused. An anchor absorbs a second anchor only as the
// end of its epilogue, and only in the pairs that have a two-anchor schedule
// (two_anchor_pattern): a conv then a pooling of its output, a depthwise conv then a
// pointwise conv; a matmul/conv may also end in a reduction of its output. An elementwise op
// never fuses into a conv's input (the conv would recompute it per tap).
// The cost rule (CPU builds, fusion_cost.h) then checks each candidate group that the rules
// above allow: the group is lowered with the default schedule and, where the tuning log has
// its workload, with the log's knobs as the build will lower it (the cheaper estimate
// stands: those knobs ran no slower), and when its estimated cycles exceed those of its
// parts as separate kernels the fusion is declined, with the estimate as the reason. That
// is what catches a fusion that repeats its anchor's work at some sizes
// only (a reduction whose schedule would recompute the GEMM it reads per element, an
// expensive producer recomputed by a broadcasting consumer); the pattern rules above stay,
// because they say what the schedules can build at all, not what pays.
// `max_depth` bounds a group's size. Post-dominators come from Boost.Graph's Lengauer-Tarjan
// dominator tree on the reversed dataflow graph, rooted at the virtual exit.
//
// Each group becomes a primitive function called from the main function; lowering turns it
// into one loop nest in which the anchor's output tile is computed and the epilogue applied
// while it is hot (see lower_schedule.cc). Views (reshape) left alone stay plain calls: they
// are executor views, not kernels.
#include "ember/passes/fuse_ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/dominator_tree.hpp>
#include <cstdio>
#include <functional>
#include <map>
#include <numeric>
#include <set>

#include "ember/ir/op.h"
#include "ember/passes/fusion_cost.h"
#include "ember/passes/lower.h"
#include "ember/passes/tuning.h"
#include "ember/support/error.h"

namespace ember::passes {

using namespace ir;

// The GPU schedules compute two anchors in one kernel with the simple template: one thread
// per output of the second, computing the first for each of its terms. Fine for a pooling's
// few taps over a small conv (a VGG-style conv -> max pool), not for a conv that sums all
// the first's channels (MobileNetV2's depthwise -> pointwise pairs: every thread recomputes
// the first for all of them), nor for a first anchor with outputs enough for the tiled
// template to fill the GPU (ResNet-50's stem conv -> max pool at batch 32: faster tiled,
// apart) (calibration: GPU two-anchor kernels).
constexpr int64_t kGpuTiledOutputs = 128 * 32 * 32;  // kMinBlocks tiles of the smallest size

bool gpu_recomputes_first(const CallNode* first, const CallNode* second) {
  if (second->op && second->op->name == "nn.conv2d") return true;
  int64_t outputs = 1;
  for (int64_t d : first->type.tensor().shape) outputs *= d;
  return outputs >= kGpuTiledOutputs;
}

std::string two_anchor_pattern(const CallNode* first, const CallNode* second) {
  if (!first->op || !second->op || !first->op->two_anchor) return "";
  return first->op->two_anchor(*first, *second);
}

namespace {

// The dataflow graph over op calls: node i is calls[i]; edges go producer -> consumer.
struct OpGraph {
  std::vector<const CallNode*> calls;
  std::vector<Expr> exprs;
  std::map<const ExprNode*, int> index;
  std::vector<std::vector<int>> consumers;
  std::vector<bool> extern_ref;  // used by the function output or by a non-op node

  explicit OpGraph(const Function& f) {
    for (auto& e : post_order(f->body)) {
      if (e->kind != NodeKind::Call) continue;
      index[e.get()] = static_cast<int>(calls.size());
      calls.push_back(static_cast<const CallNode*>(e.get()));
      exprs.push_back(e);
    }
    consumers.resize(calls.size());
    extern_ref.assign(calls.size(), false);
    for (auto& e : post_order(f->body)) {
      for (auto& in : inputs_of(e)) {
        auto it = index.find(in.get());
        if (it == index.end()) continue;
        if (e->kind == NodeKind::Call)
          consumers[it->second].push_back(index.at(e.get()));
        else
          extern_ref[it->second] = true;
      }
    }
    auto out = index.find(f->body.get());
    if (out != index.end()) extern_ref[out->second] = true;
  }

  OpPattern pattern(int i) const {
    return calls[i]->op ? calls[i]->op->pattern : OpPattern::Opaque;
  }
  std::string describe(int i) const {
    std::string op = calls[i]->op ? calls[i]->op->name : "function";
    return calls[i]->name.empty() ? op : op + " '" + calls[i]->name + "'";
  }

  // Immediate post-dominator of every node (-1: the virtual exit).
  std::vector<int> post_dominators() const {
    using G = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS>;
    int n = static_cast<int>(calls.size());
    G g(n + 1);  // vertex n is the exit; edges reversed: consumer -> producer
    for (int i = 0; i < n; ++i) {
      for (int c : consumers[i]) boost::add_edge(c, i, g);
      if (extern_ref[i] || consumers[i].empty()) boost::add_edge(n, i, g);
    }
    using V = boost::graph_traits<G>::vertex_descriptor;
    std::vector<V> idom(n + 1, boost::graph_traits<G>::null_vertex());
    auto index_map = boost::get(boost::vertex_index, g);
    auto dom_map = boost::make_iterator_property_map(idom.begin(), index_map);
    boost::lengauer_tarjan_dominator_tree(g, boost::vertex(n, g), dom_map);
    std::vector<int> ipdom(n, -1);
    for (int i = 0; i < n; ++i) {
      V d = idom[i];
      ipdom[i] = (d == boost::graph_traits<G>::null_vertex() || static_cast<int>(d) == n)
                     ? -1
                     : static_cast<int>(d);
    }
    return ipdom;
  }
};

std::string join_names(const std::vector<const CallNode*>& members) {
  std::vector<std::string> names;
  for (auto* m : members) names.push_back(m->name);
  return ir::join_names(names);
}

// The primitive function of a group: `members` in topological order, `out` the member whose
// value it returns. The group's external inputs (nodes of the input graph) become parameters
// in order of first use; `inputs` lists them.
Function group_function(const OpGraph& g, const std::vector<int>& members, int out,
                        std::vector<Expr>* inputs) {
  std::set<int> in_group(members.begin(), members.end());
  std::vector<Expr> params;
  std::map<const ExprNode*, Expr> param_of;
  std::map<int, Expr> rebuilt;
  std::vector<const CallNode*> member_calls;
  for (int m : members) {
    const CallNode* mc = g.calls[m];
    member_calls.push_back(mc);
    std::vector<Expr> margs;
    for (auto& a : mc->args) {
      auto ai = g.index.find(a.get());
      if (ai != g.index.end() && in_group.count(ai->second)) {
        margs.push_back(rebuilt.at(ai->second));
        continue;
      }
      auto pi = param_of.find(a.get());
      if (pi == param_of.end()) {
        Expr p = var("p" + std::to_string(params.size()), a->type.tensor());
        params.push_back(p);
        inputs->push_back(a);
        pi = param_of.emplace(a.get(), p).first;
      }
      margs.push_back(pi->second);
    }
    rebuilt[m] =
        mc->fn ? call_function(mc->fn, margs, mc->name) : call(mc->op, margs, mc->attrs, mc->name);
  }
  std::string name = join_names(member_calls);
  if (name.empty()) {
    // No source names (a graph built by hand): name the kernel after its ops.
    std::vector<std::string> ops;
    for (auto* mc : member_calls) ops.push_back(mc->op ? mc->op->name : mc->fn->name);
    name = fmt::format("{}", fmt::join(ops, " + "));
  }
  return function(params, rebuilt.at(out), name);
}

bool is_anchor(OpPattern p) {
  return p == OpPattern::OutEWiseFusable || p == OpPattern::CommReduce;
}

// Two anchors that one kernel computes together (schedule_two_anchors in
// cpu_template_two_anchors.cc): a conv and a pooling of its output, or a depthwise conv and the
// pointwise (1x1) conv after it. The name of that pattern, or "" for any other pair.
class Fuser {
 public:
  Fuser(const OpGraph& g, int max_depth, const MachineModel* machine,
        const std::map<std::string, ScheduleKnobs>* tuned, bool gpu)
      : g_(g), max_depth_(max_depth), machine_(machine), tuned_(tuned), gpu_(gpu) {
    int n = static_cast<int>(g.calls.size());
    parent_.resize(n);
    std::iota(parent_.begin(), parent_.end(), 0);
    size_.assign(n, 1);
    for (int i = 0; i < n; ++i) pattern_.push_back(g.pattern(i));
    anchor_.assign(n, -1);
    reduction_.assign(n, -1);
    for (int i = 0; i < n; ++i)
      if (is_anchor(pattern_[i])) anchor_[i] = i;
    ipdom_ = g.post_dominators();
  }

  void run() {
    for (int phase = 0; phase < 2; ++phase)
      for (int i = 0; i < static_cast<int>(g_.calls.size()); ++i) try_fuse(i, phase);
  }

  int root(int i) {
    while (parent_[i] != i) i = parent_[i] = parent_[parent_[i]];
    return i;
  }
  const std::vector<int>& ipdom() const { return ipdom_; }
  bool gpu() const { return gpu_; }
  // The OutEWiseFusable anchor (conv, dense, matmul) of i's group, or -1.
  int out_ewise_anchor(int i) {
    int a = anchor_[root(i)];
    return a >= 0 && g_.pattern(a) == OpPattern::OutEWiseFusable ? a : -1;
  }
  std::map<std::pair<int, int>, std::string> rule;      // fused edge -> rule name
  std::map<std::pair<int, int>, std::string> declined;  // edge -> why the cost rule said no

 private:
  void try_fuse(int i, int phase) {
    int d = ipdom_[i];
    if (d < 0 || root(i) == root(d)) return;
    int gi = root(i);
    OpPattern kind = pattern_[gi];
    if (kind == OpPattern::Opaque || g_.pattern(i) == OpPattern::Opaque) return;
    // Only a group's output can grow towards its post-dominator; the union-find root of a
    // group is always its output node (groups merge into the post-dominator's group).
    if (root(i) != i) return;
    std::function<bool(OpPattern, bool)> ok;
    std::string name, second;
    if (phase == 0 && is_anchor(kind)) {
      // An elementwise epilogue; a matmul/conv may also end in a reduction of its output
      // (computed tile by tile inside the reduction's loop, as cuDNN does on GEMM output).
      int a = anchor_[gi] >= 0 ? anchor_[gi] : i;
      bool out_ewise = g_.pattern(a) == OpPattern::OutEWiseFusable;
      // A second anchor may end the epilogue when the pair has a two-anchor schedule.
      second = reduction_[gi] < 0 && !(gpu_ && gpu_recomputes_first(g_.calls[a], g_.calls[d]))
                   ? two_anchor_pattern(g_.calls[a], g_.calls[d])
                   : "";
      // The GPU schedules have no template that computes a GEMM tile inside a reduction
      // (the fallback runs the whole GEMM row by one thread): there the reduction is a
      // kernel of its own, a block per row.
      bool reduce_sink = out_ewise && !gpu_;
      ok = [out_ewise, reduce_sink, second](OpPattern k, bool sink) {
        return k <= OpPattern::Broadcast || (sink && ((reduce_sink && k == OpPattern::CommReduce) ||
                                                      (out_ewise && !second.empty())));
      };
      name = second.empty() ? "epilogue" : second;
    } else if (phase == 0 && kind <= OpPattern::Broadcast) {
      ok = [](OpPattern k, bool sink) {
        return sink ? (k <= OpPattern::Injective || k == OpPattern::CommReduce)
                    : k <= OpPattern::Injective;
      };
      name = "elementwise";
    } else if (phase == 1 && kind == OpPattern::Injective) {
      ok = [](OpPattern k, bool) { return k <= OpPattern::Injective; };
      name = "injective";
    } else {
      return;
    }
    std::vector<int> path;
    if (!check_path(i, d, ok, &path)) return;
    // Whole groups join: together they may hold at most one anchor.
    int gd = root(d);
    std::set<int> groups{gi};
    for (int p : path) groups.insert(root(p));
    // A group holds at most one OutEWiseFusable anchor and one reduction after it.
    std::set<int> anchors, reductions;
    for (int r : groups)
      if (anchor_[r] >= 0) anchors.insert(anchor_[r]);
    if (g_.pattern(d) == OpPattern::CommReduce || !second.empty()) {
      anchors.erase(d);
      reductions.insert(d);
    }
    for (int r : groups)
      if (reduction_[r] >= 0) reductions.insert(reduction_[r]);
    for (int a : std::set<int>(anchors))
      if (g_.pattern(a) == OpPattern::CommReduce && (anchors.size() > 1 || reductions.count(a))) {
        anchors.erase(a);
        reductions.insert(a);
      }
    if (anchors.size() > 1 || reductions.size() > 1) return;
    int total = 0;
    for (int r : groups) total += size_[r];
    if (total > max_depth_) {
      depth_limited_.insert(i);
      return;
    }
    std::string slower = costlier_fused(groups, gd);
    if (!slower.empty()) {
      declined[{i, first_consumer_on_path(i, path)}] = slower;
      return;
    }
    // Merge everything into the post-dominator's group: it is the group's output.
    for (int r : groups) merge(r, gd);
    rule[{i, first_consumer_on_path(i, path)}] = name;
  }

  // How much slower the fused kernel must be estimated before the cost rule declines it.
  static constexpr double kTieMargin = 1.02;

  struct Cost {
    double cycles = 0, flops = 0;
    bool latency_bound = false;  // the dependency chains, not the ports, bound its time
    std::string fails;           // why the kernel cannot be lowered (over run-time sizes)
  };

  // The estimated cost of `members` (topological order) as one kernel returning `out`.
  Cost group_cost(const std::vector<int>& members, int out) {
    auto it = cost_cache_.find(members);
    if (it != cost_cache_.end()) return it->second;
    Cost c;
    if (!(members.size() == 1 && g_.calls[out]->op->is_view)) {  // a view is not a kernel
      std::vector<Expr> inputs;
      Function fn = group_function(g_, members, out, &inputs);
      LowerOptions options{*machine_};
      try {
        c = cost_of(lower_group(fn, "cost", options));
      } catch (const Error& e) {
        // A schedule that cannot serve a candidate over run-time sizes (an index it cannot
        // bound at run time) declines that fusion; on static sizes every error stands.
        if (function_symbols(fn).empty()) throw;
        c.fails = e.what();
        return cost_cache_[members] = c;
      }
      // With the tuning log's knobs where it has the workload, as the build will lower it.
      // Those knobs ran no slower than the default ones on this kernel, so an estimate above
      // the default's is the model's error: the cheaper estimate stands for the kernel.
      if (tuned_ && tuned_->count(workload_key(fn))) {
        options.tuned = tuned_;
        runtime::KernelReport tuning;
        PrimFunc k = lower_tuned(fn, "cost", options, &tuning);
        if (Cost t = cost_of(k); tuning.tuned && t.cycles < c.cycles) c = t;
      }
    }
    return cost_cache_[members] = c;
  }

  Cost cost_of(const PrimFunc& k) const {
    KernelWork w = kernel_work(k, *machine_);
    return {estimated_cycles(w, *machine_), w.flops, w.latency_bound};
  }

  std::vector<int> members_of(int r) {
    std::vector<int> out;
    for (int n = 0; n < static_cast<int>(g_.calls.size()); ++n)
      if (root(n) == r) out.push_back(n);
    return out;
  }

  // The cost rule: why the union of `groups` (output `out`) would be slower than the groups
  // as separate kernels, or "" when it would not (or there is no machine model to ask).
  std::string costlier_fused(const std::set<int>& groups, int out) {
    if (!machine_) return "";
    Cost apart, together;
    std::vector<int> all;
    for (int r : groups) {
      std::vector<int> m = members_of(r);
      for (int n : m)
        if (g_.calls[n]->fn) return "";  // already fused by someone else: nothing to lower
      Cost c = group_cost(m, r);
      apart.cycles += c.cycles;
      apart.flops += c.flops;
      all.insert(all.end(), m.begin(), m.end());
    }
    std::sort(all.begin(), all.end());
    together = group_cost(all, out);
    if (!together.fails.empty()) return "the fused kernel cannot be built: " + together.fails;
    // Within a few percent the estimate cannot rank the two, and the fused kernel still
    // saves a buffer: fusion stays (a conv or GEMM with a long activation epilogue, which
    // costs the same instructions either way, is such a tie).
    if (together.cycles <= kTieMargin * apart.cycles) return "";
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "the fused kernel would be slower: est. %.0f kcycles vs %.0f as separate "
                  "kernels",
                  together.cycles / 1e3, apart.cycles / 1e3);
    std::string why = buf;
    if (together.flops > 1.05 * apart.flops) {
      std::snprintf(buf, sizeof buf, " (it would repeat work: %.1fx the flops)",
                    together.flops / std::max(apart.flops, 1.0));
      why += buf;
    } else if (together.latency_bound) {
      why += " (one dependency chain per element, too long for the out-of-order window)";
    }
    return why;
  }

  // Every node on every path from `src` to `sink` (sink included, src excluded) satisfies ok.
  bool check_path(int src, int sink, const std::function<bool(OpPattern, bool)>& ok,
                  std::vector<int>* path) {
    std::set<int> seen;
    std::function<bool(int)> visit = [&](int n) {
      if (seen.count(n)) return true;
      seen.insert(n);
      if (n == sink) {
        path->push_back(n);
        return ok(g_.pattern(n), true);
      }
      if (n != src) {
        if (!ok(g_.pattern(n), false) || g_.extern_ref[n]) return false;
        path->push_back(n);
      }
      for (int c : g_.consumers[n])
        if (!visit(c)) return false;
      return true;
    };
    return visit(src);
  }

  int first_consumer_on_path(int i, const std::vector<int>& path) {
    for (int c : g_.consumers[i])
      for (int p : path)
        if (c == p) return c;
    return path.empty() ? -1 : path.front();
  }

  void merge(int from, int to) {
    from = root(from);
    to = root(to);
    if (from == to) return;
    parent_[from] = to;
    size_[to] += size_[from];
    pattern_[to] = std::max(pattern_[to], pattern_[from]);
    // The first anchor (in dataflow order) stays the anchor; the reduction or second anchor
    // after it is the group's reduction.
    int a = anchor_[to], b = anchor_[from];
    if (a >= 0 && b >= 0 && a != b) {
      anchor_[to] = std::min(a, b);
      reduction_[to] = std::max(a, b);
    } else if (a < 0) {
      anchor_[to] = b;
    }
    if (reduction_[to] < 0) reduction_[to] = reduction_[from];
  }

 public:
  std::set<int> depth_limited_;

 private:
  const OpGraph& g_;
  int max_depth_;
  const MachineModel* machine_;
  const std::map<std::string, ScheduleKnobs>* tuned_;
  bool gpu_;
  std::map<std::vector<int>, Cost> cost_cache_;
  std::vector<int> parent_, size_, anchor_, reduction_, ipdom_;
  std::vector<OpPattern> pattern_;
};

// Why the edge producer -> consumer is a kernel boundary.
std::string unfused_reason(const OpGraph& g, Fuser& fz, int p, int c) {
  OpPattern pp = g.pattern(p), pc = g.pattern(c);
  auto op = [&](int i) { return g.calls[i]->op ? g.calls[i]->op->name : "function"; };
  if (auto it = fz.declined.find({p, c}); it != fz.declined.end()) return it->second;
  if (g.calls[p]->op && g.calls[p]->op->is_view && fz.root(p) == p)
    return op(p) + " only renames memory (a view, not a kernel)";
  if (pp == OpPattern::Opaque) return op(p) + " is opaque and is never fused";
  if (pc == OpPattern::Opaque) return op(c) + " is opaque and is never fused";
  if (g.extern_ref[p]) return op(p) + "'s result is also a model output, so it must be stored";
  if (int a = fz.out_ewise_anchor(p); fz.gpu() && a >= 0 &&
                                      gpu_recomputes_first(g.calls[a], g.calls[c]) &&
                                      !two_anchor_pattern(g.calls[a], g.calls[c]).empty())
    return op(a) + " -> " + op(c) +
           " is one kernel on the CPU; on the GPU target one kernel would recompute " + op(a) +
           " per output of " + op(c) +
           " without tiles (too many channels to sum, or outputs "
           "enough for the tiled template): " +
           op(c) + " runs as its own kernel";
  if (pc == OpPattern::OutEWiseFusable)
    return op(c) + " is an anchor: it starts its own kernel (its input is read many times)";
  if (fz.depth_limited_.count(p)) return "the group would exceed FuseOps.max_depth";
  if (fz.ipdom()[p] != c && g.consumers[p].size() > 1)
    return op(p) + "'s result is used by several ops that do not rejoin in an elementwise op";
  if (fz.gpu() && pc == OpPattern::CommReduce && fz.out_ewise_anchor(p) >= 0)
    return op(c) + " reduces " + op(fz.out_ewise_anchor(p)) +
           "'s output, and the GPU target has no schedule that computes a GEMM or conv tile "
           "inside a reduction: the reduction runs as its own kernel, a block per row";
  if (is_anchor(pp) && pc > OpPattern::Broadcast)
    return op(c) + " is not elementwise, and only elementwise ops fuse into " + op(p) +
           "'s epilogue";
  if (is_anchor(pp) && is_anchor(pc)) return "two reductions are not fused into one kernel";
  return "no fusion rule applies (" + std::string(op_pattern_name(pp)) + " -> " +
         op_pattern_name(pc) + ")";
}

}  // namespace

Function fuse_ops(const Function& f, int max_depth, std::vector<runtime::FusionEdge>* decisions,
                  const MachineModel* machine, bool gpu,
                  const std::map<std::string, ScheduleKnobs>* tuned) {
  if (max_depth < 1) fail("FuseOps.max_depth must be at least 1, got ", max_depth);
  OpGraph g(f);
  Fuser fz(g, max_depth, machine, tuned, gpu);
  fz.run();
  int n = static_cast<int>(g.calls.size());

  if (decisions) {
    for (int p = 0; p < n; ++p) {
      for (int c : g.consumers[p]) {
        bool fused = fz.root(p) == fz.root(c);
        auto it = fz.rule.find({p, c});
        std::string why =
            fused ? (it != fz.rule.end() ? it->second : "same group") : unfused_reason(g, fz, p, c);
        decisions->push_back({g.describe(p), g.describe(c), fused, why});
      }
    }
  }

  // Members of each group, in topological order; the root is the group's output.
  std::map<int, std::vector<int>> members;
  for (int i = 0; i < n; ++i) members[fz.root(i)].push_back(i);

  // Rebuild the function: each group's output node becomes a call of the group's function.
  std::map<const ExprNode*, Expr> done;
  auto mapped = [&](const Expr& x) { return done.at(x.get()); };
  for (auto& e : post_order(f->body)) {
    auto it = g.index.find(e.get());
    if (it == g.index.end()) {
      if (auto* t = as<TupleNode>(e)) {
        std::vector<Expr> fields;
        for (auto& x : t->fields) fields.push_back(mapped(x));
        done[e.get()] = tuple(fields, e->name);
      } else if (auto* gi = as<TupleGetItemNode>(e)) {
        done[e.get()] = tuple_get_item(mapped(gi->tuple), gi->index, e->name);
      } else {
        done[e.get()] = e;  // inputs and constants
      }
      continue;
    }
    int i = it->second;
    if (fz.root(i) != i) continue;  // an inner member: built inside its group below
    const auto& group = members.at(i);
    const CallNode* call_node = g.calls[i];
    if (group.size() == 1 && (call_node->fn || call_node->op->is_view)) {
      std::vector<Expr> args;
      for (auto& a : call_node->args) args.push_back(mapped(a));
      done[e.get()] = call_node->fn ? call_function(call_node->fn, args, e->name)
                                    : call(call_node->op, args, call_node->attrs, e->name);
      continue;
    }
    std::vector<Expr> inputs, args;
    Function fn = group_function(g, group, i, &inputs);
    for (auto& a : inputs) args.push_back(mapped(a));
    done[e.get()] = call_function(fn, args, fn->name);
  }
  return function(f->params, mapped(f->body), f->name);
}

std::vector<std::string> fusion_patterns(const Function& group) {
  std::vector<const CallNode*> ops;
  for (auto& e : post_order(group->body))
    if (auto* c = as<CallNode>(e); c && c->op) ops.push_back(c);
  std::vector<std::string> out;
  if (ops.size() >= 2) {
    const CallNode* anchor = nullptr;
    std::string pair;
    for (auto* c : ops)
      if (is_anchor(c->op->pattern)) {
        if (anchor && pair.empty()) pair = two_anchor_pattern(anchor, c);
        if (!anchor || pair.empty()) anchor = c;
      }
    if (anchor) {
      bool has_act = false, has_add = false;
      for (auto* c : ops) {
        if (c == anchor) continue;
        if (c->op->pattern == OpPattern::ElemWise) has_act = true;
        if (c->op->pattern == OpPattern::Broadcast) has_add = true;
      }
      std::string what = has_add && has_act ? "bias/residual+activation"
                         : has_add          ? "bias/residual"
                                            : "activation";
      // Pattern names speak of the operation ("dense+activation"), not of its weight layout
      // (nn.dense_packed, nn.conv2d_blocked): Op::family; the kernel's anchor shows the layout.
      out.push_back(op_family(*anchor->op) + "+" + what + " epilogue");
      if (!pair.empty()) out.push_back(pair);
    } else {
      bool all_injective = true;
      for (auto* c : ops) all_injective &= c->op->pattern == OpPattern::Injective;
      out.push_back(all_injective ? "injective chain" : "elementwise chain");
    }
  }
  // Catalog rewrites mark the calls they create with the pattern they recognised.
  for (auto* c : ops) {
    std::string p = c->attrs.get_str("fusion_pattern", "");
    if (!p.empty() && std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  return out;
}

}  // namespace ember::passes
