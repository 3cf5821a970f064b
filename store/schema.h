// The store's schema as a list of forward migrations, and opening a store file.
//
// The schema version lives in the file header (PRAGMA user_version). Migration k takes a
// file from version k to k+1; opening a store applies the missing ones in one transaction,
// so a file is at one version or the next, never in between. A file newer than this binary
// is refused: an older kiln cannot know what the newer columns mean.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "store/database.h"

namespace kiln::store {

// The SQL that takes a file from version `index` to `index + 1`, and what SQL cannot do
// (derived rows computed by kiln's own code), run after it and its metric columns.
struct Migration {
  const char* sql;
  void (*then)(Database&) = nullptr;
};

// This binary's migrations; their count is the schema version it writes.
std::span<const Migration> migrations();
int schema_version();

// "kiln" in ASCII, in the header's application_id: tells our files from other SQLite files.
inline constexpr int kApplicationId = 0x6b696c6e;

// Brings db up to migrations.size() (ReadWrite), or checks that it is there (ReadOnly; an
// older file is refused with a message saying how to upgrade it). Refuses a newer file,
// and a SQLite file that belongs to another program.
void migrate(Database& db, std::span<const Migration> steps);

// Opens a store: a connection with the store's settings, at this binary's schema version.
std::unique_ptr<Database> open_store(const std::string& path, Access access,
                                     int busy_timeout_ms = kDefaultBusyTimeoutMs);

}  // namespace kiln::store
