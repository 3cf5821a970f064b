#include "trainer/checkpoint/durable_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/check.h"
#include "tests/error_of.h"
#include "tests/test_files.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::error_of;

class DurableFileTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::path(testing::TempDir()) /
            ("kiln_durable_" + std::string(testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
             std::to_string(getpid())))
               .string();
    fs::remove_all(dir_);
    fs::create_directory(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

using test::text_of;

using test::mode_of;

TEST_F(DurableFileTest, AnOwnerOnlyFileIs0600WhateverTheUmaskAndNeverAnExistingName) {
  const mode_t saved = ::umask(002);
  {
    DurableWriter out(dir_ + "/mine", FileAccess::OwnerOnly);
    out.write("abc", 3);
    out.close();
  }
  DurableWriter shared(dir_ + "/shared", FileAccess::Shared);
  shared.close();
  ::umask(saved);
  EXPECT_EQ(mode_of(dir_ + "/mine"), 0600u);
  EXPECT_EQ(mode_of(dir_ + "/shared"), 0664u);  // as any program's file under that umask
  EXPECT_EQ(text_of(dir_ + "/mine"), "abc");

  // A name already there, a planted link above all, is refused: nothing is written through it.
  std::ofstream(dir_ + "/target") << "theirs";
  fs::create_symlink(dir_ + "/target", dir_ + "/link");
  EXPECT_EQ(error_of([&] { DurableWriter out(dir_ + "/link", FileAccess::OwnerOnly); }),
            "file " + dir_ + "/link already exists");
  EXPECT_EQ(text_of(dir_ + "/target"), "theirs");
}

TEST_F(DurableFileTest, AnAtomicWriteReplacesALinkAtItsNameAndAStaleTemporaryFile) {
  std::ofstream(dir_ + "/target") << "theirs";
  fs::create_symlink(dir_ + "/target", dir_ + "/latest");
  fs::create_symlink(dir_ + "/target", dir_ + "/latest.tmp");
  const mode_t saved = ::umask(002);
  write_file_atomically(dir_ + "/latest", "step-00000004\n", FileAccess::OwnerOnly);
  ::umask(saved);
  EXPECT_EQ(text_of(dir_ + "/target"), "theirs");
  EXPECT_FALSE(fs::is_symlink(dir_ + "/latest"));
  EXPECT_EQ(text_of(dir_ + "/latest"), "step-00000004\n");
  EXPECT_EQ(mode_of(dir_ + "/latest"), 0600u);
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir_ + "/latest.tmp")));
}

}  // namespace
}  // namespace kiln
