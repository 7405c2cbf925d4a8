#include "llvm_emit.h"

#include "ember/support/error.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/Support/raw_ostream.h"

namespace ember::codegen {

std::string emit_file(llvm::Module& m, llvm::TargetMachine& tm, llvm::CodeGenFileType type) {
  llvm::SmallString<0> out;
  llvm::raw_svector_ostream os(out);
  // LLVM 19's code generator still runs on the legacy pass manager.
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, type))
    throw InternalError("internal error: the target cannot emit this file type");
  pm.run(m);
  return out.str().str();
}

}  // namespace ember::codegen
