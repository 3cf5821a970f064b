// Invariant checks that stay on in release builds. A failed check is a bug or bad
// input caught early; it throws kiln::Error so the CLI prints one line and exits.
#pragma once

#include <stdexcept>
#include <string>

namespace kiln {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(const std::string& message);

}  // namespace kiln

#define KILN_CHECK(cond, message)           \
  do {                                      \
    if (!(cond)) ::kiln::fail(message);     \
  } while (0)
