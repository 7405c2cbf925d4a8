// LLVM's errors as InternalError, without exceptions through LLVM's frames.
//
// LLVM is compiled without exceptions, so a handler LLVM calls must not throw: unwinding
// through frames not made for it is undefined behaviour. Instead:
//
// - Error diagnostics are appended to the current run_llvm frame's record, and LLVM goes
//   on; run_llvm throws InternalError with them once the step has returned.
// - A fatal error (llvm::report_fatal_error) must not return to LLVM either: LLVM would call
//   exit(1) or abort(). The handler records the reason and siglongjmp()s back to the
//   run_llvm frame of its thread, the mechanism llvm::CrashRecoveryContext uses (without
//   its process-wide signal handlers). The frames jumped over are abandoned: their objects
//   are never destroyed (leaked), so no half-updated LLVM object is touched again.
//   Outside run_llvm the handler can only print the reason before LLVM exits; every LLVM
//   call of the back ends runs inside run_llvm.
#include "llvm_errors.h"

#include <csetjmp>
#include <cstdio>
#include <exception>
#include <mutex>
#include <string>

#include "ember/codegen/codegen.h"
#include "ember/support/error.h"
#include "llvm/AsmParser/Parser.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/DiagnosticPrinter.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

namespace ember::codegen {

namespace {

// One active run_llvm call; they nest (a step may call run_llvm again).
struct Frame {
  sigjmp_buf jump;
  std::string diagnostics;  // error diagnostics reported during the step
  std::string fatal;        // the reason of a fatal error, when one happened
  Frame* outer = nullptr;
};

thread_local Frame* t_frame = nullptr;

void fatal_error_handler(void*, const char* reason, bool) {
  Frame* frame = t_frame;
  if (!frame) {
    std::fprintf(
        stderr, "%s\n",
        InternalError(std::string("LLVM failed outside a guarded step: ") + reason).what());
    return;  // LLVM exits now; there is nowhere to go back to
  }
  frame->fatal = reason && *reason ? reason : "(no reason given)";
  siglongjmp(frame->jump, 1);
}

struct RecordingDiagnosticHandler : llvm::DiagnosticHandler {
  bool handleDiagnostics(const llvm::DiagnosticInfo& info) override {
    if (info.getSeverity() != llvm::DS_Error) return true;  // drop warnings and remarks
    std::string text;
    llvm::raw_string_ostream os(text);
    llvm::DiagnosticPrinterRawOStream printer(os);
    info.print(printer);
    os.flush();
    if (Frame* frame = t_frame)
      frame->diagnostics += (frame->diagnostics.empty() ? "" : "\n") + text;
    else
      std::fprintf(stderr, "ember: LLVM reported an error outside a guarded step: %s\n",
                   text.c_str());
    return true;
  }
};

// The part of run_llvm between sigsetjmp and its return: no object with a destructor may
// live in the frame that calls sigsetjmp across the jump, so it only holds plain data.
bool run_step(Frame* frame, const std::function<void()>& step, std::exception_ptr* thrown) {
  if (sigsetjmp(frame->jump, 0) != 0) return false;  // back from the fatal-error handler
  try {
    step();
  } catch (...) {
    *thrown = std::current_exception();
  }
  return true;
}

}  // namespace

void install_llvm_error_handler() {
  static std::once_flag once;
  std::call_once(once, [] { llvm::install_fatal_error_handler(fatal_error_handler, nullptr); });
}

std::unique_ptr<llvm::DiagnosticHandler> recording_diagnostic_handler() {
  return std::make_unique<RecordingDiagnosticHandler>();
}

std::unique_ptr<llvm::Module> parse_ir(const std::string& ll, llvm::LLVMContext& ctx,
                                       const char* what) {
  ctx.setDiagnosticHandler(recording_diagnostic_handler());
  llvm::SMDiagnostic err;
  std::unique_ptr<llvm::Module> m = llvm::parseAssemblyString(ll, err, ctx);
  if (!m)
    throw InternalError(std::string("internal error: ") + what +
                        " cannot read the IR: " + err.getMessage().str());
  return m;
}

void run_llvm(const std::string& what, const std::function<void()>& step) {
  install_llvm_error_handler();
  Frame frame;
  frame.outer = t_frame;
  t_frame = &frame;
  std::exception_ptr thrown;
  bool returned = run_step(&frame, step, &thrown);
  t_frame = frame.outer;
  if (!returned) throw InternalError("LLVM failed while " + what + ": " + frame.fatal);
  if (thrown) std::rethrow_exception(thrown);
  if (!frame.diagnostics.empty())
    throw InternalError("LLVM reported an error while " + what + ": " + frame.diagnostics);
}

}  // namespace ember::codegen
