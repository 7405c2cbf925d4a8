#include "ember/codegen/codegen.h"
#include "ember/support/error.h"

namespace ember::codegen {

std::shared_ptr<runtime::Module> compile_cuda(const std::vector<ir::PrimFunc>&, const CudaOptions&) {
  fail("target \"cuda\" is not implemented yet; build with target=\"llvm\"");
}

}  // namespace ember::codegen
