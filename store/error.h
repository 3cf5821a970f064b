// How the store reports failure: a kiln::Error whose message is one line starting with
// "store: ", so the CLI can print it as is. Only the header of kernels/check.h is used, so
// the store links against nothing of ours.
#pragma once

#include <string>

#include "kernels/check.h"

namespace kiln::store {

// A failure SQLite reported, with its result code (SQLITE_FULL, SQLITE_BUSY, ...), so the
// writer can tell a stall worth retrying from a batch that can never be written.
struct DatabaseError : Error {
  DatabaseError(const std::string& message, int code) : Error(message), code(code) {}
  int code;
};

[[noreturn]] inline void fail(const std::string& message) { throw Error(message); }

}  // namespace kiln::store
