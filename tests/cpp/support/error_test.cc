// The two error kinds are unrelated: a compiler bug (InternalError) is never caught as the
// user's mistake (Error), and its message asks for a report.
#include "ember/support/error.h"

#include <gtest/gtest.h>

#include <string>
#include <type_traits>

namespace ember {
namespace {

static_assert(!std::is_base_of_v<Error, InternalError>, "a compiler bug is not a user error");
static_assert(!std::is_base_of_v<InternalError, Error>, "a user error is not a compiler bug");
static_assert(std::is_base_of_v<std::runtime_error, InternalError>);
static_assert(std::is_base_of_v<std::runtime_error, Error>);

void check_fails() { EMBER_CHECK(1 + 1 == 3, "arithmetic is broken"); }

TEST(Errors, InternalErrorIsNotCaughtAsAUserError) {
  bool caught_as_internal = false;
  try {
    try {
      check_fails();
    } catch (const Error&) {
      FAIL() << "an internal error was caught as ember::Error";
    }
  } catch (const InternalError& e) {
    caught_as_internal = true;
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind("internal error: ", 0), 0u) << msg;
    EXPECT_NE(msg.find("arithmetic is broken"), std::string::npos) << msg;
    EXPECT_NE(msg.find("please report"), std::string::npos) << msg;
  }
  EXPECT_TRUE(caught_as_internal);
}

TEST(Errors, InternalErrorMessagesAskForAReportOnce) {
  InternalError inner("LLVM failed");
  EXPECT_EQ(std::string(inner.what()).rfind("internal error: LLVM failed", 0), 0u);
  // Rethrown with context (a pass, a kernel): the request stays once, at the end.
  InternalError outer(std::string(inner.what()) + "\nin graph pass FuseOps");
  std::string msg = outer.what();
  EXPECT_EQ(msg.find("internal error: internal error"), std::string::npos) << msg;
  size_t report = msg.find("please report");
  ASSERT_NE(report, std::string::npos) << msg;
  EXPECT_EQ(msg.find("please report", report + 1), std::string::npos) << msg;
  EXPECT_LT(msg.find("in graph pass FuseOps"), report) << msg;
}

}  // namespace
}  // namespace ember
