#include "base/private_files.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/core.h>

#include "base/check.h"

namespace kiln {
namespace {

std::string owner_name(uid_t uid) {
  struct passwd entry;
  struct passwd* found = nullptr;
  char buffer[1024];
  if (getpwuid_r(uid, &entry, buffer, sizeof buffer, &found) == 0 && found) return found->pw_name;
  return fmt::format("uid {}", uid);
}

// Why a file kiln is about to write to or read from is not this user's own, or "".
std::string why_not_own(const struct stat& st) {
  if (st.st_uid != geteuid()) return "belongs to " + owner_name(st.st_uid) + ", not to you";
  return {};
}

// O_NONBLOCK: opening a FIFO must not wait for its other end. Regular files ignore it.
int open_checked(const std::string& path, int flags, mode_t mode, const std::string& what) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC | O_NONBLOCK, mode);
  if (fd >= 0) return fd;
  const int error = errno;
  if (error == ELOOP && (flags & O_NOFOLLOW)) fail(what + " " + path + " is a symbolic link; kiln does not follow it");
  if (error == EEXIST) fail(what + " " + path + " already exists");
  fail(what + " " + path + ": " + std::strerror(error));
}

void close_and_fail(int fd, const std::string& message) {
  ::close(fd);
  fail(message);
}

}  // namespace

int open_private_log(const std::string& path) {
  const int fd = open_checked(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0600, "log");
  struct stat st;
  if (fstat(fd, &st) != 0) close_and_fail(fd, "log " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) close_and_fail(fd, "log " + path + " is not a regular file");
  if (const std::string why = why_not_own(st); !why.empty()) close_and_fail(fd, "log " + path + " " + why);
  return fd;
}

int create_private_file(const std::string& path) {
  return open_checked(path, O_WRONLY | O_CREAT | O_EXCL, 0600, "file");
}

void make_private_folder(const std::string& path) {
  std::filesystem::path built;
  for (const std::filesystem::path& part : std::filesystem::path(path)) {
    built /= part;
    if (::mkdir(built.c_str(), 0700) != 0 && errno != EEXIST)
      fail("cannot create folder " + built.string() + ": " + std::strerror(errno));
  }
  require_private(path, "folder");
}

std::string why_not_private(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return std::string("cannot be read: ") + std::strerror(errno);
  if (S_ISLNK(st.st_mode)) return "is a symbolic link; kiln does not follow links it reads back or writes into";
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) return "is not a folder or a regular file";
  if (const std::string why = why_not_own(st); !why.empty()) return why;
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return fmt::format("may be written by other users (mode {:04o}); `chmod go-w` it if you trust it", st.st_mode & 07777);
  return {};
}

void require_private(const std::string& path, const std::string& what) {
  const std::string why = why_not_private(path);
  if (!why.empty()) fail(what + " " + path + " " + why);
}

std::string read_small_file(const std::string& path, size_t max_bytes, bool follow_links, const std::string& what) {
  const int fd = open_checked(path, O_RDONLY | (follow_links ? 0 : O_NOFOLLOW), 0, what);
  struct stat st;
  if (fstat(fd, &st) != 0) close_and_fail(fd, what + " " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) close_and_fail(fd, what + " " + path + " is not a regular file");
  std::string text(max_bytes + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) close_and_fail(fd, what + " " + path + ": " + std::strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got > max_bytes) fail(fmt::format("{} {} is larger than {} bytes", what, path, max_bytes));
  text.resize(got);
  return text;
}

}  // namespace kiln
