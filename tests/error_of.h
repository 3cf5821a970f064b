// The message of the kiln::Error a call throws, or "(no error)": tests compare messages whole,
// because a one-line error that names the key, the file and the reason is part of what kiln
// promises.
#pragma once

#include <functional>
#include <string>

#include "base/check.h"

namespace kiln::test {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace kiln::test
