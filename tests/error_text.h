// The message of the rf::Error a callable throws ("no error" when it
// throws none), for tests that check what an error names.
#pragma once

#include <functional>
#include <string>

#include "core/error.h"

namespace rf::test {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace rf::test
