#pragma once
/// The build driver: graph passes, lowering, codegen, and a runtime module out.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ember/ir/graph.h"
#include "ember/ir/loop.h"
#include "ember/runtime/graph_executor.h"

namespace ember {

/// A compiled model: the executor graph, the code, and what it was built from.
struct Library {
  std::shared_ptr<const runtime::ExecGraph> graph;
  std::shared_ptr<runtime::Module> module;
  std::vector<ir::PrimFunc> prim_funcs;  // the loop IR of each kernel
  ir::Function function;                 // the graph after the passes
  std::string target;
  std::string get_source(const std::string& format) const;
};

/// Compiles `f` for `target` ("llvm" is the host CPU). Function parameters whose names are
/// keys of `params` become constants; the rest are the model's inputs, in order.
std::shared_ptr<Library> build(const ir::Function& f, const std::string& target = "llvm",
                               const std::map<std::string, runtime::Tensor>& params = {});

}  // namespace ember
