#include "base/private_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/check.h"
#include "tests/error_of.h"
#include "tests/test_files.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// The uid of a user who is not this one ("nobody"), for files another user owns; the tests
// that need one run where this process may chown (as root, as CI does).
constexpr uid_t kOtherUser = 65534;

using test::fresh_dir;

using test::error_of;

using test::mode_of;

TEST(PrivateFiles, FoldersAndFilesAreMadeForThisUserAlone) {
  const std::string dir = fresh_dir("modes");
  const mode_t old = umask(0);  // the widest umask: the modes must not depend on it
  make_private_folder(dir + "/a/b");
  const int fd = create_private_file(dir + "/a/b/file");
  ASSERT_GE(fd, 0);
  EXPECT_EQ(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  close(fd);
  const int log = open_private_log(dir + "/a/b/log");
  close(log);
  umask(old);
  EXPECT_EQ(mode_of(dir + "/a"), 0700u);
  EXPECT_EQ(mode_of(dir + "/a/b"), 0700u);
  EXPECT_EQ(mode_of(dir + "/a/b/file"), 0600u);
  EXPECT_EQ(mode_of(dir + "/a/b/log"), 0600u);
  EXPECT_EQ(error_of([&] { create_private_file(dir + "/a/b/file"); }), "file " + dir + "/a/b/file already exists");
}

TEST(PrivateFiles, LinksAreNeitherFollowedNorWrittenThrough) {
  const std::string dir = fresh_dir("links");
  std::ofstream(dir + "/target") << "theirs\n";
  chmod((dir + "/target").c_str(), 0600);
  fs::create_symlink(dir + "/target", dir + "/log");
  fs::create_symlink(dir + "/nowhere", dir + "/dangling");
  fs::create_directories(dir + "/real");
  fs::create_directory_symlink(dir + "/real", dir + "/folder");
  EXPECT_EQ(error_of([&] { open_private_log(dir + "/log"); }),
            "log " + dir + "/log is a symbolic link; kiln does not follow it");
  EXPECT_EQ(error_of([&] { create_private_file(dir + "/dangling"); }), "file " + dir + "/dangling already exists");
  EXPECT_FALSE(fs::exists(dir + "/nowhere"));
  EXPECT_EQ(error_of([&] { make_private_folder(dir + "/folder"); }),
            "folder " + dir + "/folder is a symbolic link; kiln does not follow links it reads back or writes into");
  EXPECT_EQ(error_of([&] { read_small_file(dir + "/log", 100, false, "latest"); }),
            "latest " + dir + "/log is a symbolic link; kiln does not follow it");
  EXPECT_EQ(read_small_file(dir + "/log", 100, true, "token"), "theirs\n");
}

TEST(PrivateFiles, SmallFilesAreReadToABoundAndOnlyWhenRegular) {
  const std::string dir = fresh_dir("small");
  std::ofstream(dir + "/big") << std::string(101, 'x');
  ASSERT_EQ(mkfifo((dir + "/fifo").c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { read_small_file(dir + "/big", 100, false, "token file"); }),
            "token file " + dir + "/big is larger than 100 bytes");
  EXPECT_EQ(read_small_file(dir + "/big", 101, false, "token file").size(), 101u);
  // Neither hangs: a FIFO is refused without waiting for a writer, a device without reading it.
  EXPECT_EQ(error_of([&] { read_small_file(dir + "/fifo", 100, false, "token file"); }),
            "token file " + dir + "/fifo is not a regular file");
  EXPECT_EQ(error_of([&] { read_small_file("/dev/zero", 100, true, "token file"); }),
            "token file /dev/zero is not a regular file");
  EXPECT_EQ(error_of([&] { open_private_log(dir + "/fifo"); }), "log " + dir + "/fifo: No such device or address");
}

TEST(PrivateFiles, WhatAnotherUserOwnsOrMayWriteIsRefused) {
  const std::string dir = fresh_dir("owners");
  make_private_folder(dir + "/mine");
  EXPECT_EQ(why_not_private(dir + "/mine"), "");
  chmod((dir + "/mine").c_str(), 0775);
  EXPECT_EQ(error_of([&] { require_private(dir + "/mine", "checkpoint"); }),
            "checkpoint " + dir + "/mine may be written by other users (mode 0775); `chmod go-w` it if you trust it");
  EXPECT_EQ(why_not_private(dir + "/none"), "cannot be read: No such file or directory");
  if (geteuid() != 0) GTEST_SKIP() << "skipped: making a file another user's needs root";
  make_private_folder(dir + "/theirs");
  ASSERT_EQ(chown((dir + "/theirs").c_str(), kOtherUser, kOtherUser), 0);
  EXPECT_EQ(why_not_private(dir + "/theirs"), "belongs to nobody, not to you");
  EXPECT_EQ(error_of([&] { make_private_folder(dir + "/theirs"); }), "folder " + dir + "/theirs belongs to nobody, not to you");
  std::ofstream(dir + "/their.log") << "";
  ASSERT_EQ(chown((dir + "/their.log").c_str(), kOtherUser, kOtherUser), 0);
  EXPECT_EQ(error_of([&] { open_private_log(dir + "/their.log"); }), "log " + dir + "/their.log belongs to nobody, not to you");
}

}  // namespace
}  // namespace kiln
