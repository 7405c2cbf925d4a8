#include "ember/codegen/build.h"

#include <sstream>

#include "ember/codegen/codegen.h"
#include "ember/passes/bind_params.h"
#include "ember/passes/lower.h"
#include "ember/support/error.h"

namespace ember {

std::string Library::get_source(const std::string& format) const {
  if (format == "loop" || format == "tir") {
    std::ostringstream os;
    for (auto& f : prim_funcs) os << f << "\n";
    return os.str();
  }
  if (format == "graph") return ir::to_string(function);
  try {
    return module->get_source(format);
  } catch (const Error& e) {
    fail(e.what(), " (a Library also has \"loop\" for the loop IR and \"graph\" for the graph)");
  }
}

std::shared_ptr<Library> build(const ir::Function& f, const std::string& target,
                               const std::map<std::string, runtime::Tensor>& params) {
  if (!f) fail("ember.build needs a function (ir.Function), got None");
  bool cuda = target == "cuda" || target.rfind("cuda ", 0) == 0;
  if (!cuda && target != "llvm" && target.rfind("llvm ", 0) != 0)
    fail("unknown target '", target,
         "'; supported targets: \"llvm\" (the host CPU), \"cuda\" (NVIDIA GPU, PTX; "
         "\"cuda -arch=sm_90\" for Hopper)");
  ir::Function func = passes::bind_params(f, params);
  passes::LowerOptions lower_opts;
  lower_opts.gpu = cuda;
  lower_opts.vector_bits = codegen::native_vector_lanes(DType::Float32) * 32;
  passes::LoweredGraph lowered = passes::lower_graph(func, lower_opts);

  auto lib = std::make_shared<Library>();
  if (cuda) {
    codegen::CudaOptions cuda_opts;
    auto arch = target.find("-arch=");
    if (arch != std::string::npos) cuda_opts.arch = target.substr(arch + 6);
    lib->module = codegen::compile_cuda(lowered.funcs, cuda_opts);
  } else {
    lib->module = codegen::compile_cpu(lowered.funcs);
  }
  lib->graph = std::make_shared<const runtime::ExecGraph>(std::move(lowered.graph));
  lib->prim_funcs = std::move(lowered.funcs);
  lib->function = func;
  lib->target = target;
  return lib;
}

}  // namespace ember
