// LLVM's errors become InternalError without exceptions through LLVM's frames: a fatal error
// (which LLVM would follow with exit or abort) and error diagnostics are recorded and
// reported once LLVM is back in run_llvm; the process goes on and compiles again.
#include "../../../src/codegen/llvm_errors.h"

#include <gtest/gtest.h>

#include <string>

#include "ember/codegen/codegen.h"
#include "ember/ir/loop.h"
#include "ember/support/error.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/Support/ErrorHandling.h"

namespace ember::codegen {
namespace {

using namespace ember::ir;

// Runs `fn`, expecting InternalError whose message has `part` and asks for a report.
template <class F>
void expect_internal_error(F fn, const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "expected InternalError";
  } catch (const InternalError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(part), std::string::npos) << msg;
    EXPECT_NE(msg.find("please report"), std::string::npos) << msg;
  }
}

// A kernel that still compiles after LLVM failed: the process and LLVM are fine.
void expect_compiler_still_works() {
  Buffer a = make_buffer("A", DType::Float32, {8});
  PrimVar i("i");
  PrimFunc f{"still_works",
             {a},
             0,
             for_loop(i, 0, 8, ForKind::Serial, store(a, i, make_const(DType::Float32, 1.0)))};
  auto m = compile_cpu({f});
  float out[8] = {};
  void* args[] = {out};
  m->get_function("still_works")(args);
  EXPECT_EQ(out[7], 1.0f);
}

TEST(LlvmErrors, FatalErrorsBecomeInternalErrors) {
  // gen_crash_diag = false: LLVM would exit(1) after the handler; true: abort().
  for (bool crash_diag : {false, true}) {
    expect_internal_error(
        [&] { run_llvm("testing", [&] { llvm::report_fatal_error("boom", crash_diag); }); },
        "LLVM failed while testing: boom");
  }
  expect_compiler_still_works();
}

TEST(LlvmErrors, NestedStepsReportToTheInnermost) {
  bool outer_went_on = false;
  run_llvm("the outer step", [&] {
    expect_internal_error(
        [] { run_llvm("the inner step", [] { llvm::report_fatal_error("inner"); }); },
        "while the inner step: inner");
    outer_went_on = true;
  });
  EXPECT_TRUE(outer_went_on);
}

TEST(LlvmErrors, ErrorDiagnosticsAreReportedAfterTheStep) {
  llvm::LLVMContext ctx;
  ctx.setDiagnosticHandler(recording_diagnostic_handler());
  bool step_finished = false;
  expect_internal_error(
      [&] {
        run_llvm("testing", [&] {
          ctx.diagnose(llvm::DiagnosticInfoInlineAsm("first problem", llvm::DS_Error));
          ctx.diagnose(llvm::DiagnosticInfoInlineAsm("only a warning", llvm::DS_Warning));
          ctx.diagnose(llvm::DiagnosticInfoInlineAsm("second problem", llvm::DS_Error));
          step_finished = true;  // the handler returned to LLVM instead of throwing
        });
      },
      "first problem\nsecond problem");
  EXPECT_TRUE(step_finished);
  // Warnings alone are no error.
  run_llvm("testing",
           [&] { ctx.diagnose(llvm::DiagnosticInfoInlineAsm("a warning", llvm::DS_Warning)); });
}

TEST(LlvmErrors, ExceptionsOfTheStepPassThrough) {
  EXPECT_THROW(run_llvm("testing", [] { fail("the user's mistake"); }), Error);
  EXPECT_THROW(run_llvm("testing", [] { EMBER_CHECK(false, "a bug"); }), InternalError);
  expect_compiler_still_works();
}

}  // namespace
}  // namespace ember::codegen
