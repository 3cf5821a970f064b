// How the store reports failure: a kiln::Error whose message is one line starting with
// "store: ", so the CLI can print it as is (kiln::Error is the ground floor's, base/check.h).
#pragma once

#include <string>

#include "base/check.h"

namespace kiln::store {

// A failure SQLite reported, with its result code (SQLITE_FULL, SQLITE_BUSY, ...), so the
// writer can tell a stall worth retrying from a batch that can never be written.
struct DatabaseError : Error {
  DatabaseError(const std::string& message, int code) : Error(message), code(code) {}
  int code;
};

[[noreturn]] inline void fail(const std::string& message) { throw Error(message); }

}  // namespace kiln::store
