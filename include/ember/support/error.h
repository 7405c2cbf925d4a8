#pragma once
/// Ember's two error kinds, deliberately unrelated so that one is never caught as the other:
///
/// - ember::Error: the user's mistake (bad model, unsupported op, wrong input). Its message
///   names the node and says what to do. Python sees it as ember.EmberError.
/// - ember::InternalError: a compiler bug (EMBER_CHECK, invalid generated IR, an LLVM
///   failure). Its message says so, asks for a report, and names the pass, kernel or node
///   where that is known. Python sees it as ember.InternalError.
///
/// Both derive from std::runtime_error only: `catch (const ember::Error&)` handles user
/// errors and lets compiler bugs through; catch both with `catch (const std::exception&)`.
#include <sstream>
#include <stdexcept>
#include <string>

namespace ember {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class InternalError : public std::runtime_error {
 public:
  /// `message` says what went wrong; "internal error: " is put in front of it (unless it is
  /// there already) and the request to report the bug at its end (once, also when an
  /// InternalError's what() is rethrown with more context).
  explicit InternalError(const std::string& message) : std::runtime_error(format(message)) {}

  /// What every internal error message ends with.
  static constexpr const char* kReport =
      "\n(this is a bug in Ember, not in your model: please report it with this message)";

 private:
  static std::string format(std::string message) {
    const std::string report = kReport;
    for (size_t at; (at = message.find(report)) != std::string::npos;)
      message.erase(at, report.size());
    const std::string prefix = "internal error: ";
    if (message.compare(0, prefix.size(), prefix) != 0) message = prefix + message;
    return message + report;
  }
};

namespace detail {
template <class... Args>
std::string concat(Args&&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

/// Throws ember::Error with the streamed arguments as its message.
template <class... Args>
[[noreturn]] void fail(Args&&... args) {
  throw Error(detail::concat(std::forward<Args>(args)...));
}

}  // namespace ember

/// Internal invariant: a failure is a compiler bug, reported as ember::InternalError.
#define EMBER_CHECK(cond, ...)                                                     \
  do {                                                                             \
    if (!(cond))                                                                   \
      throw ::ember::InternalError(                                                \
          ::ember::detail::concat("internal error: ", __FILE__, ":", __LINE__,     \
                                  ": check `" #cond "` failed. ", ##__VA_ARGS__)); \
  } while (0)
