#pragma once
/// Ember's two error kinds. A user's mistake (bad model, unsupported op, wrong input)
/// throws ember::Error with a message that names the node and says what to do; Python sees
/// it as ember.EmberError. A compiler bug throws ember::InternalError (EMBER_CHECK).
#include <sstream>
#include <stdexcept>
#include <string>

namespace ember {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class InternalError : public Error {
 public:
  using Error::Error;
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
