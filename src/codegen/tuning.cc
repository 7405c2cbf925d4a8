#include "ember/codegen/tuning.h"

#include <map>

#include "ember/codegen/codegen.h"
#include "ember/codegen/machine.h"
#include "ember/codegen/target.h"
#include "ember/passes/tuning.h"
#include "ember/support/error.h"

namespace ember {

std::vector<Workload> extract_workloads(const Library& lib) {
  if (lib.target.rfind("llvm", 0) != 0)
    fail("schedule tuning is for CPU targets; this library was built for '", lib.target, "'");
  std::vector<Workload> out;
  std::map<std::string, size_t> index;
  for (auto& e : ir::post_order(lib.function->body)) {
    auto* c = ir::as<ir::CallNode>(e);
    if (!c || !c->fn) continue;
    std::string key = passes::workload_key(c->fn);
    auto [it, fresh] = index.emplace(key, out.size());
    if (fresh) {
      Workload w;
      w.key = key;
      w.group = c->fn;
      for (auto& k : lib.kernels)
        if (k.name == c->fn->name) w.info = k;
      out.push_back(w);
    }
    ++out[it->second].count;
  }
  return out;
}

std::shared_ptr<Library> build_kernel(const ir::Function& group, const std::string& target,
                                      const passes::ScheduleKnobs& knobs) {
  const codegen::Target tgt = codegen::parse_target(target);
  if (tgt.is_cuda()) fail("build_kernel: schedule tuning is for CPU targets, got '", target, "'");
  std::vector<ir::Expr> params;
  for (size_t i = 0; i < group->params.size(); ++i)
    params.push_back(ir::var("p" + std::to_string(i), group->params[i]->type.tensor()));
  ir::Function f = ir::function(params, ir::call_function(group, params, group->name));
  std::map<std::string, passes::ScheduleKnobs> tuned = {{passes::workload_key(group), knobs}};
  passes::LowerOptions opts;
  opts.machine = machine_model(tgt);
  opts.tuned = &tuned;
  passes::LoweredGraph lowered = passes::lower_graph(f, opts);
  if (!lowered.kernels.at(0).tuning_note.empty()) fail(lowered.kernels[0].tuning_note);
  codegen::CpuOptions cpu_opts;
  cpu_opts.cpu = tgt.cpu;
  cpu_opts.vector_bits = tgt.vector_bits;
  auto lib = std::make_shared<Library>();
  lib->module = codegen::compile_cpu(lowered.funcs, cpu_opts);
  lib->graph = std::make_shared<const runtime::ExecGraph>(std::move(lowered.graph));
  lib->prim_funcs = std::move(lowered.funcs);
  lib->kernels = std::move(lowered.kernels);
  lib->function = f;
  lib->target = tgt.str();
  return lib;
}

}  // namespace ember
