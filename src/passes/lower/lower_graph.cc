#include <algorithm>
#include <map>
#include <utility>

#include "ember/ir/op.h"
#include "ember/ir/range_dispatch.h"
#include "ember/passes/annotate_loops.h"
#include "ember/passes/fuse_ops.h"
#include "ember/passes/fusion_cost.h"
#include "ember/passes/lower.h"
#include "ember/passes/machine_model.h"
#include "ember/passes/rolled_epilogues.h"
#include "ember/passes/row_invariants.h"
#include "ember/passes/schedule.h"
#include "ember/passes/tuning.h"
#include "ember/support/error.h"
#include "run_time_ops.h"

namespace ember::passes {

using namespace ir;

namespace {

std::string symbol_name(const std::string& what, size_t index) {
  std::string s = "k" + std::to_string(index) + "_";
  for (char c : what) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return s.size() > 64 ? s.substr(0, 64) : s;
}

// A single op call as a one-op primitive function, so both paths lower the same way.
Function as_group(const CallNode* c) {
  std::vector<Expr> params, args;
  for (size_t i = 0; i < c->args.size(); ++i)
    params.push_back(var("p" + std::to_string(i), c->args[i]->type.tensor()));
  Expr body = call(c->op, params, c->attrs, c->name);
  return function(params, body, c->name.empty() ? c->op->name : c->name);
}

std::vector<const CallNode*> op_calls(const Function& group) {
  std::vector<const CallNode*> out;
  for (auto& e : post_order(group->body))
    if (auto* c = as<CallNode>(e)) {
      EMBER_CHECK(c->op, "nested fused functions in group ", group->name);
      out.push_back(c);
    }
  return out;
}

std::string fmt_ops(const runtime::KernelReport& k) {
  std::string s;
  for (const std::string& op : k.ops) s += (s.empty() ? "" : " -> ") + op;
  return s;
}

runtime::KernelReport describe(const Function& group, const std::string& func) {
  runtime::KernelReport k;
  k.func = func;
  k.name = group->name;
  const CallNode* anchor = nullptr;
  for (auto* c : op_calls(group)) {
    k.ops.push_back(c->op->name);
    if (!anchor || c->op->pattern > anchor->op->pattern) anchor = c;
  }
  if (anchor) k.anchor = anchor->op->name;
  k.patterns = fusion_patterns(group);
  return k;
}

// The pixels that a group of one blocked conv and elementwise ops computes as one row (its
// output's H x W, all zero when it does not), and the conv whose input keeps its own shape.
struct FlatPixels {
  int64_t h = 0, w = 0;
  // A windowed or strided conv: it reads its 2-D input at (p / W, p % W) of its flat output
  // pixel p. Null for a pointwise conv (1x1, stride 1, no padding), which reads its input
  // pixels in the order it writes its output pixels, so its input is one row too.
  const CallNode* windowed = nullptr;
};

bool pointwise(const CallNode* conv) {
  const std::vector<int64_t>& w = conv->args[1]->type.tensor().shape;
  const Attrs& a = conv->attrs;
  return w[2] == 1 && w[3] == 1 && a.get_ints("strides", {1, 1}) == std::vector<int64_t>{1, 1} &&
         a.get_ints("padding", {0, 0, 0, 0}) == std::vector<int64_t>{0, 0, 0, 0};
}

// Whether the conv's register tiles waste less on H*W pixels than on rows of W (machine
// model): ResNet's 7x7 3x3 convs took tiles of 4 + 3 pixels (87.5% of the peak at most),
// its 14x14 ones 3 tiles of 5 for 14. One row costs each tile a division per pixel (hoisted
// out of the reduction), so it must win by a margin.
bool windowed_rows_pay(const CallNode* conv, const MachineModel& m) {
  const TensorType& out = conv->type.tensor();
  const int64_t h = out.shape[2], w = out.shape[3], c = out.shape[4];
  return choose_register_tile(m, h * w, c, out.dtype).efficiency >
         choose_register_tile(m, w, c, out.dtype).efficiency + 0.02;
}

// Which groups run their H x W pixels as one row: ResNet's 7x7 1x1 convs computed 8 pixels
// for every 7 (tiles of 4), its 14x14 ones 15 for 14 (tiles of 5).
FlatPixels flat_pixels(const Function& group, const MachineModel& machine) {
  const CallNode* conv = nullptr;
  for (auto* c : op_calls(group)) {
    const bool blocked_conv = c->op->name == "nn.conv2d_blocked" ||
                              c->op->name == "nn.conv2d_u8s8_blocked" ||
                              c->op->name == "nn.conv2d_bf16_blocked";
    if (blocked_conv && !conv) {
      conv = c;
      continue;
    }
    if (c->op->pattern != OpPattern::ElemWise && c->op->pattern != OpPattern::Broadcast) return {};
  }
  if (!conv || conv->attrs.get_int("groups", 1) != 1) return {};
  const std::vector<int64_t>& y = conv->type.tensor().shape;
  if (y[2] < 2) return {};
  FlatPixels flat{y[2], y[3], nullptr};
  const Expr& data = conv->args[0];
  if (!pointwise(conv)) {
    // The conv's input keeps its shape, so it must be a parameter that nothing else reads.
    int reads = 0;
    for (auto* c : op_calls(group))
      for (auto& a : c->args) reads += a.get() == data.get();
    if (reads != 1 || data->kind != NodeKind::Var || !windowed_rows_pay(conv, machine)) return {};
    flat.windowed = conv;
  }
  // Every other tensor of the group must be blocked with these pixels, or broadcast over them.
  auto fits = [&](const TensorType& u) {
    return u.shape.size() == 5 &&
           ((u.shape[2] == y[2] && u.shape[3] == y[3]) || (u.shape[2] == 1 && u.shape[3] == 1));
  };
  for (auto& p : group->params)
    if (p != conv->args[1] && (p != data || !flat.windowed) && !fits(p->type.tensor())) return {};
  for (auto* c : op_calls(group))
    if (!fits(c->type.tensor())) return {};
  return flat;
}

// The type of `node`, a node of the group, in the group's loop nest: its (H, W) pixels
// as one row when they are `flat`'s, except for a windowed conv's input and the conv itself
// (flat_conv flattens the conv after its compute rule).
TensorType loop_type(const FlatPixels& flat, const ExprNode* node) {
  TensorType t = node->type.tensor();
  if (flat.h == 0 || t.shape.size() != 5 || t.shape[2] != flat.h || t.shape[3] != flat.w ||
      (flat.windowed && (node == flat.windowed || node == flat.windowed->args[0].get())))
    return t;
  t.shape[2] = 1;
  t.shape[3] = flat.h * flat.w;
  return t;
}

// `conv` ([.., H, W, c]) computed on its pixels as one row: [.., 1, H*W, c], its body read
// at (p / W, p % W).
ir::Tensor flat_conv(const ir::Tensor& conv) {
  const int64_t w = conv.shape()[3];
  std::vector<int64_t> shape = conv.shape();
  shape[3] *= shape[2];
  shape[2] = 1;
  return compute(conv->name, shape, [&](const std::vector<PrimVar>& i) {
    VarMap map;
    for (size_t d = 0; d < i.size(); ++d) map.emplace_back(conv->axes[d]->var.get(), i[d]);
    map[2].second = i[3] / PrimExpr(w);
    map[3].second = i[3] % PrimExpr(w);
    return substitute(conv->body, map);
  });
}

}  // namespace

TensorType flat_pixel_type(const Function& group, const Expr& node, const MachineModel& machine) {
  return loop_type(flat_pixels(group, machine), node.get());
}

namespace {

// `f` with its parameters typed as the group's (flat_pixel_type changed only their shapes,
// not their elements or order): its signature is what the executor checks against the graph.
PrimFunc with_group_types(PrimFunc f, const Function& group) {
  std::vector<TensorType> types;
  for (auto& p : group->params) types.push_back(p->type.tensor());
  // A kernel over run-time sizes takes them after its inputs (lower_schedule).
  if (const size_t n = function_symbols(group).size())
    types.push_back(TensorType{{static_cast<int64_t>(n)}, DType::Int64});
  types.push_back(group->body->type.tensor());
  EMBER_CHECK(types.size() == f.params.size(), "kernel ", f.name, " has ", f.params.size(),
              " parameters for a group of ", types.size(), " tensors");
  BufferMap swap;
  for (size_t i = 0; i < types.size(); ++i) {
    const Buffer b = f.params[i];  // a copy: the slot is overwritten below
    if (b->shape == types[i].shape) continue;
    f.params[i] = make_buffer(b->name, b->dtype, types[i].shape, b->scope);
    EMBER_CHECK(f.params[i]->numel() == b->numel(), "kernel ", f.name, " parameter ", b->name,
                " changed its element count");
    swap[b.get()] = f.params[i];
  }
  f.body = swap_buffers(f.body, swap);
  return f;
}

// A knob the schedule used (0 where it did not).
int64_t used_knob(const ScheduleChoice& c, const std::string& name) {
  for (auto& [n, v] : c.knobs)
    if (n == name) return v;
  return 0;
}

}  // namespace

bool has_custom_lowering(const Function& group) {
  auto calls = op_calls(group);
  return calls.size() == 1 && calls[0]->op->lower;
}

namespace {

// The run-time shape of a tensor of type `t` (null entries: static dimensions).
std::vector<PrimExpr> run_shape(const TensorType& t, const std::map<std::string, PrimVar>& vars) {
  std::vector<PrimExpr> shape;
  for (const Dim& d : t.dims) shape.push_back(run_dim(d, vars));
  return shape;
}

// A view (reshape, flatten, squeeze) inside a group over run-time sizes: its elements in
// row-major order over the run's shapes, which a merge of run-time dimensions (batch * seq)
// needs (the compute rule's radices are the static maxima).
ir::Tensor run_time_view(const std::string& name, const ir::Tensor& x, const TensorType& in,
                         const TensorType& out, const std::map<std::string, PrimVar>& vars) {
  auto full = [&](const TensorType& t) {
    std::vector<PrimExpr> dims = run_shape(t, vars);
    dims.resize(t.shape.size());
    for (size_t d = 0; d < dims.size(); ++d)
      if (!dims[d].get()) dims[d] = PrimExpr(t.shape[d]);
    return dims;
  };
  const std::vector<PrimExpr> in_dims = full(in), out_dims = full(out);
  return compute(name, out.shape, [&](const std::vector<PrimVar>& idx) {
    PrimExpr flat = flat_index(out_dims, std::vector<PrimExpr>(idx.begin(), idx.end()));
    std::vector<PrimExpr> in_idx(in_dims.size());
    for (size_t d = in_dims.size(); d-- > 0;) {
      in_idx[d] = d == 0 ? flat : flat % in_dims[d];
      flat = flat / in_dims[d];
    }
    return x(in_idx);
  });
}

}  // namespace

ir::Tensor group_compute(const Function& group, std::vector<ir::Tensor>& inputs,
                         const MachineModel& machine, LiveExtents* live) {
  std::map<const ExprNode*, ir::Tensor> te;
  const std::vector<Symbol> symbols = function_symbols(group);
  std::map<std::string, PrimVar> vars;
  if (live) {
    *live = {};
    for (const Symbol& s : symbols) {
      vars.emplace(s->name, PrimVar(s->name));
      live->symbols.push_back({vars.at(s->name), s->min, s->max});
    }
  }
  auto note_shape = [&](const ExprNode* node, const ir::Tensor& t) {
    if (live && node->type.tensor().symbolic())
      live->dims[t.operator->()] = run_shape(node->type.tensor(), vars);
  };
  // Flat pixels re-shape a tensor, which its run-time dimensions do not follow.
  const FlatPixels flat = symbols.empty() ? flat_pixels(group, machine) : FlatPixels{};
  inputs.clear();
  for (size_t i = 0; i < group->params.size(); ++i) {
    const TensorType t = loop_type(flat, group->params[i].get());
    inputs.push_back(placeholder("p" + std::to_string(i), t.shape, t.dtype));
    te[group->params[i].get()] = inputs.back();
    note_shape(group->params[i].get(), inputs.back());
  }
  for (auto* c : op_calls(group)) {
    // Only custom lowerings produce several outputs (a compute rule makes one tensor).
    EMBER_CHECK(!c->type.is_tuple, "op ", c->op->name, " in group ", group->name,
                " has a tuple result but is not lowered alone by its own lowering (Op::lower)");
    std::vector<ir::Tensor> args;
    for (auto& a : c->args) {
      auto it = te.find(a.get());
      EMBER_CHECK(it != te.end(), "group ", group->name, " reads a node that is not an input");
      args.push_back(it->second);
    }
    EMBER_CHECK(c->op->compute, c->op->name,
                " has no tensor-expression form; it lowers only alone, through Op::lower");
    const TensorType type = loop_type(flat, c);
    if (live && !symbols.empty()) {
      const std::string why = run_time_refusal(*c);
      if (!why.empty())
        fail(c->op->name, " '", c->name, "' cannot be built for run-time sizes: ", why, " (",
             to_string(c->type), "); give the inputs involved static sizes");
    }
    const TensorType& in0 = c->args[0]->type.tensor();
    ir::Tensor out = live && c->op->is_view && (type.symbolic() || in0.symbolic())
                         ? run_time_view(bare_op_name(c->op->name), args[0], in0, type, vars)
                         : c->op->compute(args, c->attrs, type);
    EMBER_CHECK(out && out.shape() == type.shape && out.dtype() == type.dtype, "compute rule of ",
                c->op->name, " disagrees with its type relation");
    te[c] = c == flat.windowed ? flat_conv(out) : out;
    note_shape(c, te[c]);
  }
  ir::Tensor out = te.at(group->body.get());
  // A group whose result is one of its inputs unchanged still needs a kernel that copies it.
  if (out->is_placeholder()) {
    out = compute("copy", out.shape(), [&](const std::vector<PrimVar>& i) {
      return out(std::vector<PrimExpr>(i.begin(), i.end()));
    });
    note_shape(group->body.get(), out);
  }
  return out;
}

PrimFunc with_short_run_parts(const Function& group, const std::string& func,
                              const LowerOptions& options, PrimFunc general,
                              ScheduleChoice& choice) {
  const int64_t rows = used_knob(choice, "tile_rows"), axis = used_knob(choice, "tile_axis");
  const bool gemm = choice.name.rfind("gemm.", 0) == 0 || choice.name.rfind("gemv.", 0) == 0;
  if (options.gpu || !gemm || rows <= 1 || group->body->type.is_tuple) return general;
  const TensorType& out = group->body->type.tensor();
  const int64_t a = axis > 0 ? axis - 1 : out.ndim() - 2;
  if (!out.symbolic() || a < 0) return general;
  const Dim run_rows = out.dim(static_cast<size_t>(a));
  if (run_rows.is_static()) return general;
  // The run's rows over the general kernel's symbol variables (its first lets).
  std::map<std::string, PrimVar> vars;
  for (Stmt st = general.body; auto* let = st.as<LetStmtNode>(); st = let->body)
    vars.emplace(let->var.name(), let->var);
  std::vector<std::pair<int64_t, PrimFunc>> parts;
  std::string counts;
  // Runs of up to two general tiles' rows stream the weights twice (a tile and a shifted
  // one), where one tile of their count, with fewer vectors, streams them once: 7 tokens
  // in one tile of 7 x 3 vectors rather than two of 4 x 6 (BERT's 768 -> 3072 dense took
  // 1.18x as long). Counts up to the accumulators a one-vector tile can hold.
  const int64_t last =
      std::min({2 * rows - 1, max_accumulators(options.machine), run_rows.max() - 1});
  try {
    for (int64_t r = std::max<int64_t>(run_rows.min(), 1); r <= last; ++r) {
      ScheduleKnobs knobs;
      knobs.tile_rows = r;
      knobs.tile_axis = axis;
      // Lowered for runs of at most r rows (2: an axis of one row is not tiled), so that
      // its tile of r rows fits the static extents: 7 rows of a tile over 8192 (batch *
      // seq at most) would be guarded against the last tile's passing them, in the
      // accumulation.
      Binding at_most;
      for (const Symbol& s : run_rows.symbols) at_most[s->name] = std::max<int64_t>(r, 2);
      ScheduleChoice made;
      PrimFunc part = lower_group(narrow_symbols(group, at_most),
                                  func + "_rows" + std::to_string(r), options, knobs, &made);
      if (r == rows && used_knob(made, "tile_vectors") == used_knob(choice, "tile_vectors"))
        continue;  // the general tile itself
      parts.emplace_back(r, std::move(part));
      counts += (counts.empty() ? "" : ",") + std::to_string(r);
    }
  } catch (const Error&) {
    return general;  // a count the schedule cannot tile: every run takes the general kernel
  }
  if (parts.empty()) return general;
  parts.emplace_back(run_rows.max(), std::move(general));
  PrimFunc f = dispatch_by_range(func, run_dim(run_rows, vars), parts);
  choice.name += "+runs(" + to_string(run_rows) + "=" + counts + ")";
  return f;
}

PrimFunc lower_group(const Function& group, const std::string& func_name,
                     const LowerOptions& options, const ScheduleKnobs& knobs,
                     ScheduleChoice* choice) {
  // An op with its own lowering (Op::lower: attention, topk, cumsum, the grouped matmul, the
  // scatters) builds its own loop nest when it is alone in its group; elsewhere its compute
  // rule lowers like any other.
  const MachineModel& machine = options.machine;
  PrimFunc f;
  ScheduleChoice made;
  if (has_custom_lowering(group)) {
    const ir::Op* op = op_calls(group)[0]->op;
    if (!op->lower_takes_run_time_sizes && !function_symbols(group).empty())
      fail(op->name, " '", group->name,
           "' lowers by its own loop nest, which takes no run-time "
           "sizes yet (issue 44); build it with static sizes");
    f = op->lower(group, func_name, machine, options.gpu);
    made.name = op->name + ".own_loop_nest";
    if (const std::string parts = dispatch_label(f); !parts.empty())
      made.name += "+runs(" + parts + ")";  // nn.attention's query blocks per part of a range
  } else {
    std::vector<ir::Tensor> inputs;
    LiveExtents live;
    Schedule sch({group_compute(group, inputs, machine, &live)});
    sch.live() = live;
    KnobSpace space;
    if (options.gpu)
      apply_gpu_schedule(sch, options.matmul_precision);
    else
      apply_default_schedule(sch, machine, knobs, &space);
    made.name = sch.template_name();
    for (auto& [name, field] : ScheduleKnobs::fields)
      if (space.used.*field) made.knobs.emplace_back(name, space.used.*field);
    std::sort(made.knobs.begin(), made.knobs.end());  // by name, as a model file reads them
    f = with_group_types(lower_schedule(sch, func_name, inputs), group);
  }
  if (choice) *choice = std::move(made);
  if (options.gpu || !options.loop_passes) return f;
  for (const LoopPass& pass : cpu_loop_passes()) f = pass.run(f, machine);
  return f;
}

const std::vector<LoopPass>& cpu_loop_passes() {
  static const std::vector<LoopPass> passes = {
      {"RollLongEpilogues",
       [](const PrimFunc& f, const MachineModel& m) { return roll_long_epilogues(f, m); }},
      {"VectorizeRowInvariants", vectorize_row_invariants},
      {"AnnotateLoops", annotate_loops},
      {"SerialBelowParallelGrain", serial_below_parallel_grain},
  };
  return passes;
}

PrimFunc lower_tuned(const Function& group, const std::string& func, const LowerOptions& options,
                     runtime::KernelReport* info, ScheduleChoice* choice) {
  if (!options.tuned || options.gpu) return lower_group(group, func, options, {}, choice);
  const std::string key = workload_key(group);
  if (info) info->workload = key;
  auto it = options.tuned->find(key);
  if (it == options.tuned->end()) return lower_group(group, func, options, {}, choice);
  try {
    PrimFunc f = lower_group(group, func, options, it->second, choice);
    if (info) {
      info->tuned = true;
      for (auto& [name, field] : ScheduleKnobs::fields)
        info->knobs.emplace_back(name, it->second.*field);
    }
    return f;
  } catch (const Error& e) {  // the knobs only choose speed: a damaged log fails nothing
    if (info)
      info->tuning_note =
          "tuned schedule " + it->second.str() + " not applied: " + std::string(e.what());
    return lower_group(group, func, options, {}, choice);
  }
}

namespace {

int symbol_index(const std::vector<runtime::ExecGraph::Symbol>& symbols, const std::string& name) {
  for (size_t i = 0; i < symbols.size(); ++i)
    if (symbols[i].name == name) return static_cast<int>(i);
  EMBER_CHECK(false, "symbol ", name, " is not one of the graph's");
}

}  // namespace

LoweredGraph lower_graph(const Function& f, const LowerOptions& options) {
  LoweredGraph out;
  runtime::ExecGraph& g = out.graph;
  for (const Symbol& s : function_symbols(f)) g.symbols.push_back({s->name, s->min, s->max});
  std::map<const ExprNode*, std::vector<int>> values;  // node -> value ids (tuples: several)
  std::map<std::string, std::string> func_of_code;     // loop IR (unnamed) -> its function
  auto new_value = [&](const TensorType& t) {
    runtime::ExecGraph::Value v{t.shape, t.dtype, {}};
    for (const Dim& d : t.dims) {
      runtime::ExecGraph::Dim rd{d.coef, d.offset, {}};
      for (const Symbol& s : d.symbols) rd.symbols.push_back(symbol_index(g.symbols, s->name));
      v.dims.push_back(rd);
    }
    g.values.push_back(std::move(v));
    return static_cast<int>(g.values.size()) - 1;
  };
  for (auto& p : f->params) {
    int v = new_value(p->type.tensor());
    g.inputs.push_back({p->name, v});
    values[p.get()] = {v};
  }
  for (auto& e : post_order(f->body)) {
    if (values.count(e.get())) continue;
    switch (e->kind) {
      case NodeKind::Var:
        fail("input '", e->name, "' is used but is not a parameter of the function");
      case NodeKind::Constant: {
        auto* c = static_cast<const ConstantNode*>(e.get());
        int v = new_value(e->type.tensor());
        std::string name = c->name.empty() ? "const" + std::to_string(g.params.size()) : c->name;
        g.params.push_back({name, v, c->value});
        values[e.get()] = {v};
        break;
      }
      case NodeKind::Tuple: {
        std::vector<int> ids;
        for (auto& x : static_cast<const TupleNode*>(e.get())->fields) {
          auto& fv = values.at(x.get());
          ids.insert(ids.end(), fv.begin(), fv.end());
        }
        values[e.get()] = ids;
        break;
      }
      case NodeKind::TupleGetItem: {
        auto* t = static_cast<const TupleGetItemNode*>(e.get());
        values[e.get()] = {values.at(t->tuple.get()).at(t->index)};
        break;
      }
      case NodeKind::Call: {
        auto* c = static_cast<const CallNode*>(e.get());
        // A tuple-typed call (topk's values and indices) is one kernel with one output
        // value per field; TupleGetItem picks them from the list.
        std::vector<int> outs;
        for (const TensorType& t : e->type.fields) outs.push_back(new_value(t));
        values[e.get()] = outs;
        if (c->op && c->op->is_view) {
          EMBER_CHECK(outs.size() == 1, "view op ", c->op->name, " has ", outs.size(), " outputs");
          g.views.push_back({outs[0], values.at(c->args[0].get()).at(0)});
          break;
        }
        Function group = c->fn ? c->fn : as_group(c);
        std::string func = symbol_name(group->name, g.kernels.size());
        runtime::KernelReport info = describe(group, func);
        ScheduleChoice choice;
        try {
          PrimFunc f = with_short_run_parts(
              group, func, options, lower_tuned(group, func, options, &info, &choice), choice);
          // Kernels with the same loop nest (a transformer's layers) share one function: LLVM
          // compiles each function once.
          PrimFunc unnamed = f;
          unnamed.name.clear();
          auto [same, added] = func_of_code.emplace(to_string(unnamed), func);
          if (added)
            out.funcs.push_back(std::move(f));
          else
            func = info.func = same->second;
        } catch (const Error& err) {
          if (function_symbols(group).empty()) throw;
          // Over run-time sizes, say which kernel (the static path's messages name it).
          fail("kernel '", group->name, "' (", fmt_ops(info),
               ") over run-time sizes: ", err.what());
        }
        runtime::ExecGraph::Kernel k;
        k.func = func;
        k.name = group->name;
        k.schedule = std::move(choice.name);
        k.schedule_knobs = std::move(choice.knobs);
        for (const Symbol& s : function_symbols(group))
          k.symbols.push_back(symbol_index(g.symbols, s->name));
        for (auto& a : c->args) k.args.push_back(values.at(a.get()).at(0));
        k.num_inputs = static_cast<int>(c->args.size());
        k.args.insert(k.args.end(), outs.begin(), outs.end());
        g.kernels.push_back(k);
        out.kernels.push_back(info);
        break;
      }
      case NodeKind::Function:
        fail("nested functions are not supported; inline the inner function first");
    }
  }
  g.outputs = values.at(f->body.get());
  return out;
}

}  // namespace ember::passes
