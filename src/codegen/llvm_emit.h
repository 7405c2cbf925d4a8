#pragma once
// Machine code from an LLVM module: the one place the CPU back end and the exporter run
// LLVM's code generator (object files for the JIT and for export, assembly for get_source).
#include <string>

#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"

namespace ember::codegen {

/// `m` compiled by `tm` into an object file or assembly text. Run inside run_llvm.
std::string emit_file(llvm::Module& m, llvm::TargetMachine& tm, llvm::CodeGenFileType type);

}  // namespace ember::codegen
