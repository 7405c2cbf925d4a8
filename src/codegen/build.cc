#include "ember/codegen/build.h"

#include <sstream>

#include "ember/codegen/codegen.h"
#include "ember/codegen/machine.h"
#include "ember/codegen/target.h"
#include "ember/ir/op.h"
#include "ember/passes/annotate_loops.h"
#include "ember/passes/bind_params.h"
#include "ember/passes/lower.h"
#include "ember/passes/pipeline.h"
#include "ember/passes/schedule.h"
#include "ember/runtime/parallel.h"
#include "ember/support/error.h"

namespace ember {

std::string Library::get_source(const std::string& format) const {
  if (format == "loop" || format == "tir") {
    std::ostringstream os;
    for (auto& f : prim_funcs) os << f << "\n";
    return os.str();
  }
  if (format == "graph") return ir::to_string(function);
  if (format == "dot") return fusion_graph();
  try {
    return module->get_source(format);
  } catch (const Error& e) {
    fail(e.what(), " (a Library also has \"loop\" for the loop IR and \"graph\" for the graph)");
  }
}

namespace {

std::shared_ptr<Library> build_library(const ir::Function& f, const std::string& target,
                                       const std::map<std::string, runtime::NDArray>& params,
                                       const passes::PassContext& ctx, int llvm_opt_level,
                                       const std::map<std::string, passes::ScheduleKnobs>* tuned);

// FoldConstant's evaluator: compile the constant subgraph for the host CPU with Ember's own
// pipeline (without FoldConstant itself) and run it. Its kernels run once, over the weights:
// LLVM at O0 compiles them several times faster than at O3, and their slower run costs far
// less than the compile time saved (calibration: kConstantOptLevel).
constexpr int kConstantOptLevel = 0;
std::vector<runtime::NDArray> evaluate_constant(const ir::Function& f) {
  passes::PassContext ctx;
  ctx.disabled_passes = {"FoldConstant"};
  auto lib = build_library(f, "llvm", {}, ctx, kConstantOptLevel, nullptr);
  runtime::GraphExecutor exec(lib->graph, lib->module);
  exec.run();
  std::vector<runtime::NDArray> out;
  for (int i = 0; i < exec.num_outputs(); ++i) out.push_back(exec.get_output(i).clone());
  return out;
}

// Without FuseOps every edge between two ops is a kernel boundary: the fusion report says so.
std::vector<runtime::FusionEdge> unfused_edges(const ir::Function& func) {
  std::vector<runtime::FusionEdge> fusion;
  auto desc = [](const ir::CallNode* n) -> std::string {
    return n->name.empty() ? n->op->name : n->op->name + " '" + n->name + "'";
  };
  for (auto& e : ir::post_order(func->body)) {
    auto* c = ir::as<ir::CallNode>(e);
    if (!c || !c->op) continue;
    for (auto& a : c->args) {
      auto* p = ir::as<ir::CallNode>(a);
      if (p && p->op) fusion.push_back({desc(p), desc(c), false, "FuseOps is disabled"});
    }
  }
  return fusion;
}

// PassContext config "cuda.matmul_precision" (torch.set_float32_matmul_precision's
// choice, per build): "highest" (the default: float32 FMAs) or a tensor-core precision, for
// CUDA targets of sm_80 or newer.
ir::MmaPrecision matmul_precision(const passes::PassContext& ctx, const codegen::Target& tgt) {
  const std::string name = ctx.config_value("cuda.matmul_precision", "highest");
  const ir::MmaPrecision p = ir::parse_mma_precision(name);
  if (p == ir::MmaPrecision::Highest) return p;
  if (!tgt.is_cuda())
    fail("PassContext config cuda.matmul_precision=", name, " is for target \"cuda\"; the ",
         tgt.str(), " target computes float32 GEMMs in float32 (leave the key out)");
  if (std::stoi(tgt.arch.substr(3)) < 80)
    fail("cuda.matmul_precision=", name, " needs tensor cores of sm_80 or newer; the target is ",
         tgt.arch, " (use \"cuda -arch=sm_80\" or newer, or precision \"highest\")");
  return p;
}

// Block-level buffers become shared memory and thread phases get their barriers.
std::vector<ir::PrimFunc> lower_gpu_phases(const std::vector<ir::PrimFunc>& funcs) {
  std::vector<ir::PrimFunc> out;
  for (const ir::PrimFunc& f : funcs) {
    try {
      out.push_back(passes::lower_gpu_phases(f));
    } catch (const InternalError& e) {  // a compiler bug: say which kernel it is in
      throw InternalError(std::string(e.what()) + "\nin kernel '" + f.name + "'");
    }
  }
  return out;
}

// The build, from graph to code, as one list of steps; `log` prints the IR after each one
// (PassContext config "dump_ir" or EMBER_DUMP_IR=1; run_pipeline logs each graph pass).
std::shared_ptr<Library> build_library(const ir::Function& f, const std::string& target,
                                       const std::map<std::string, runtime::NDArray>& params,
                                       const passes::PassContext& raw_ctx, int llvm_opt_level,
                                       const std::map<std::string, passes::ScheduleKnobs>* tuned) {
  if (!f) fail("ember.build needs a function (ir.Function), got None");
  const passes::PassContext ctx = raw_ctx.validated();
  if (ctx.config.count("tuning_log") && !tuned)
    fail(
        "PassContext config 'tuning_log' is read by the Python ember.build; C++ callers pass "
        "the chosen schedule knobs as build's `tuned` argument");
  const codegen::Target tgt = codegen::parse_target(target);
  const bool cuda = tgt.is_cuda();
  if (cuda && !ir::function_symbols(f).empty())
    fail("the model has run-time sizes (", ir::to_string(ir::function_symbols(f)),
         "); CUDA builds take static sizes only so far (issue 44): build it for the sizes it "
         "runs at, or for target \"llvm\"");
  // The target CPU's own model (a GPU build's host-side schedules keep the pinned one).
  passes::MachineModel machine =
      cuda ? passes::MachineModel::for_vector_bits(tgt.resolved_vector_bits()) : machine_model(tgt);
  machine.threads = runtime::get_num_threads();  // the model is built for the threads it runs on
  const passes::PipelineTarget pipeline_target{cuda, machine, tuned};
  passes::LowerOptions lower_opts;
  lower_opts.gpu = cuda;
  lower_opts.matmul_precision = matmul_precision(ctx, tgt);
  lower_opts.machine = pipeline_target.machine;
  lower_opts.tuned = tuned;
  lower_opts.loop_passes = false;  // run below, each logged
  std::vector<runtime::FusionEdge> fusion;
  passes::StepLog log(ctx);

  ir::Function func = f;
  log("input", func);
  func = passes::bind_params(func, params);
  log("BindParams", func);
  func = passes::run_pipeline(func, ctx, pipeline_target, evaluate_constant, &fusion, &log);
  passes::LoweredGraph lowered = passes::lower_graph(func, lower_opts);
  log("LowerGraph", lowered.funcs);
  if (!cuda)
    for (const passes::LoopPass& pass : passes::cpu_loop_passes()) {
      for (ir::PrimFunc& f : lowered.funcs) f = pass.run(f, pipeline_target.machine);
      log(pass.name, lowered.funcs);
    }
  std::vector<ir::PrimFunc> code = lowered.funcs;
  if (cuda) {
    code = lower_gpu_phases(code);
    log("LowerGpuPhases", code);
    if (lower_opts.matmul_precision != ir::MmaPrecision::Highest) {
      for (ir::PrimFunc& f : code) f = passes::lower_warp_mma(f, lower_opts.matmul_precision);
      log("LowerWarpMma", code);
      for (ir::PrimFunc& f : code) f = passes::pipeline_shared_tiles(f);
      log("PipelineSharedTiles", code);
    }
    for (ir::PrimFunc& f : code) f = passes::annotate_loops(f, pipeline_target.machine);
    log("AnnotateLoops", code);
  }
  auto lib = std::make_shared<Library>();
  if (cuda) {
    codegen::CudaOptions cuda_opts;
    cuda_opts.arch = tgt.arch;
    lib->module = codegen::compile_cuda(code, cuda_opts);
  } else {
    codegen::CpuOptions cpu_opts;
    cpu_opts.cpu = tgt.cpu;
    cpu_opts.vector_bits = tgt.vector_bits;
    cpu_opts.opt_level = llvm_opt_level;
    lib->module = codegen::compile_cpu(code, cpu_opts);
  }

  if (!ctx.enabled("FuseOps", 1)) fusion = unfused_edges(func);
  lib->graph = std::make_shared<const runtime::ExecGraph>(std::move(lowered.graph));
  lib->prim_funcs = std::move(lowered.funcs);  // the loop IR before the GPU phases
  lib->kernels = std::move(lowered.kernels);
  lib->fusion = std::move(fusion);
  lib->function = func;
  lib->target = tgt.str();
  return lib;
}

}  // namespace

std::shared_ptr<Library> build(const ir::Function& f, const std::string& target,
                               const std::map<std::string, runtime::NDArray>& params,
                               const passes::PassContext& ctx,
                               const std::map<std::string, passes::ScheduleKnobs>* tuned) {
  return build_library(f, target, params, ctx, 3, tuned);
}

}  // namespace ember

namespace ember {

std::string Library::fusion_graph() const {
  // One cluster per kernel holding its ops; edges follow the kernels' value ids.
  auto quote = [](const std::string& s) {
    std::string q = "\"";
    for (char c : s) q += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    return q + "\"";
  };
  std::ostringstream os;
  os << "digraph ember {\n  rankdir=TB;\n  node [shape=box, style=rounded, fontsize=10];\n";
  std::map<int, std::string> producer;  // value id -> node that produces it
  for (auto& in : graph->inputs) {
    std::string id = "in" + std::to_string(in.value);
    os << "  " << id << " [label=" << quote(in.name) << ", shape=ellipse];\n";
    producer[in.value] = id;
  }
  for (size_t k = 0; k < graph->kernels.size(); ++k) {
    auto& kern = graph->kernels[k];
    const runtime::KernelReport* info = k < kernels.size() ? &kernels[k] : nullptr;
    os << "  subgraph cluster_" << k << " {\n    label=" << quote(kern.name)
       << ";\n    style=filled; color=lightgrey;\n";
    std::string last;
    size_t n_ops = info ? info->ops.size() : 1;
    for (size_t o = 0; o < n_ops; ++o) {
      std::string id = "k" + std::to_string(k) + "_" + std::to_string(o);
      os << "    " << id << " [label=" << quote(info ? info->ops[o] : kern.func) << "];\n";
      if (!last.empty()) os << "    " << last << " -> " << id << ";\n";
      last = id;
    }
    os << "  }\n";
    for (int i = 0; i < kern.num_inputs; ++i) {
      auto it = producer.find(kern.args[i]);
      if (it != producer.end()) os << "  " << it->second << " -> k" << k << "_0;\n";
    }
    for (size_t a = static_cast<size_t>(kern.num_inputs); a < kern.args.size(); ++a)
      producer[kern.args[a]] = last;
  }
  for (auto& v : graph->views) {
    auto it = producer.find(v.src);
    if (it != producer.end()) producer[v.dst] = it->second;
  }
  for (size_t i = 0; i < graph->outputs.size(); ++i) {
    std::string id = "out" + std::to_string(i);
    os << "  " << id << " [label=\"output " << i << "\", shape=ellipse];\n";
    auto it = producer.find(graph->outputs[i]);
    if (it != producer.end()) os << "  " << it->second << " -> " << id << ";\n";
  }
  os << "}\n";
  return os.str();
}

}  // namespace ember
