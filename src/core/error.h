// Errors: one exception type carrying a message, and helpers to build
// messages and check conditions. Bad input anywhere becomes an rf::Error that
// names what was wrong; nothing on an input path aborts the process.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace rf {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// str(a, b, c...) concatenates anything that streams into std::ostream.
template <typename... Args>
std::string str(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

template <typename... Args>
[[noreturn]] void fail(Args&&... args) {
  throw Error(str(std::forward<Args>(args)...));
}

}  // namespace rf

// RF_CHECK(cond, message parts...): throws rf::Error when cond is false.
#define RF_CHECK(cond, ...)                   \
  do {                                        \
    if (!(cond)) ::rf::fail(__VA_ARGS__);     \
  } while (0)
