#pragma once
// How the LLVM back ends report LLVM's errors (see codegen::run_llvm): the fatal-error
// handler and a diagnostic handler that record, never throw.
#include <memory>
#include <string>

#include "llvm/IR/DiagnosticHandler.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

namespace ember::codegen {

/// Installs the process-wide LLVM fatal-error handler (once; every back end calls this).
void install_llvm_error_handler();

/// A DiagnosticHandler for an LLVMContext: error diagnostics are recorded for the enclosing
/// run_llvm (which throws InternalError with them); warnings and remarks are dropped.
std::unique_ptr<llvm::DiagnosticHandler> recording_diagnostic_handler();

/// Reads LLVM IR text (a module's "ll" source) into `ctx`, which gets the recording
/// diagnostic handler; InternalError naming `what` when the text does not parse.
std::unique_ptr<llvm::Module> parse_ir(const std::string& ll, llvm::LLVMContext& ctx,
                                       const char* what);

}  // namespace ember::codegen
