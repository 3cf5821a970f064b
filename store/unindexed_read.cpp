#include "store/unindexed_read.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "store/error.h"

namespace kiln::store {
namespace {

std::string user_name(uid_t uid) {
  struct passwd entry {};
  struct passwd* found = nullptr;
  char buffer[1024];
  if (getpwuid_r(uid, &entry, buffer, sizeof buffer, &found) == 0 && found) return found->pw_name;
  return "uid " + std::to_string(uid);
}

// "owner root, mode 0600"
std::string owner_and_mode(const struct stat& st) {
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return "owner " + user_name(st.st_uid) + ", mode " + mode;
}

StoreFilesMark::File mark_of(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return {};
  return {true, static_cast<unsigned long long>(st.st_ino), static_cast<long long>(st.st_size),
          static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec};
}

}  // namespace

UnindexedRead unindexed_read(const std::string& path, const std::string& sqlite_detail) {
  const std::string shm = path + "-shm", wal = path + "-wal";
  struct stat st {};
  if (lstat(shm.c_str(), &st) == 0) {
    const std::string who = user_name(geteuid());
    if (access(shm.c_str(), R_OK) != 0)
      fail("store: " + path + " cannot be read whole: its newest commits are indexed in " + shm + " (" +
           owner_and_mode(st) + "), which this user (" + who +
           ") may not read, and a writer may be using it; read the store as a user who may, or ask its "
           "owner to make " + shm + " readable (it takes the store file's mode when a writer creates it)");
    // Readable, yet SQLite could not use it read-only: a writer is rebuilding it.
    fail("store: " + path + " cannot be read whole: its index " + shm + " could not be used read-only (" +
         sqlite_detail + "); a writer may be recovering the store: try again in a moment");
  }
  if (lstat(wal.c_str(), &st) != 0 || st.st_size == 0) return UnindexedRead::MainFileOnly;
  return UnindexedRead::PrivateIndex;
}

StoreFilesMark mark_store_files(const std::string& path) {
  return {mark_of(path), mark_of(path + "-wal"), mark_of(path + "-shm")};
}

std::string store_changed_message(const std::string& path) {
  return "store: " + path + " has changed since this reader opened it without its index (" + path +
         "-shm): a writer has started, and what this reader would show is no longer the whole "
         "store; open it again (start the command again) to read it";
}

}  // namespace kiln::store
