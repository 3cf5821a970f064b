// Reading a store whose shared index this user may not create.
//
// SQLite finds a WAL-mode file's newest commits (still in STORE-wal) through the index in
// STORE-shm. A reader who may open an existing -shm, read-only is enough, reads the store
// whole, its writer alive or dead (SQLite's read-only WAL rules, sqlite.org/wal.html). One
// who may not, because no -shm is there and the folder is not theirs to write, cannot open
// the store normally: Database asks here how else to read it. Without these rules it read
// the main file alone, and showed a store whose commits were all in its -wal as empty.
#pragma once

#include <string>

namespace kiln::store {

enum class UnindexedRead {
  // No -wal, or an empty one: every commit is in the main file, which is read as it stands
  // (SQLite's immutable=1: no locks, no index).
  MainFileOnly,
  // A -wal with commits and no -shm: the connection indexes the -wal in its own memory
  // (SQLite's WAL without shared memory, EXCLUSIVE locking mode), so it reads the newest
  // commits. Safe because no connection uses the store: each one maps the -shm, so there
  // would be one; a writer that starts later makes one, which require_unchanged notices.
  PrivateIndex,
};

// How to read `path` without creating its -shm. A -shm that exists but that this user may
// not open is refused (kiln::Error, "store: PATH cannot be read whole: ..."): a writer may be
// using it, and the newest commits cannot be read safely without it. The message names the
// file, its owner and mode, and what to do. `sqlite_detail` is SQLite's own text.
UnindexedRead unindexed_read(const std::string& path, const std::string& sqlite_detail);

// The store's files as a reader without the index found them: a writer starting (a -shm
// appears, the -wal or the main file changes) makes the next mark differ.
struct StoreFilesMark {
  struct File {
    bool exists = false;
    unsigned long long inode = 0;
    long long size = 0;
    long long mtime_ns = 0;
    bool operator==(const File&) const = default;
  };
  File main, wal, shm;
  bool operator==(const StoreFilesMark&) const = default;
};
StoreFilesMark mark_store_files(const std::string& path);

// The one-line error for a reader without the index whose store has changed since it
// opened it: it no longer sees the store whole.
std::string store_changed_message(const std::string& path);

}  // namespace kiln::store
