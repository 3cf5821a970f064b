#include "base/run_names.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/error_of.h"

namespace kiln {
namespace {

using test::error_of;

TEST(RunNames, RunNamesCannotLeaveTheirFolder) {
  for (const char* good : {"gpt2-124m-20261124-101500", "a", "v1.2_final", "run..2"})
    EXPECT_EQ(error_of([&] { check_run_name(good); }), "(no error)") << good;
  EXPECT_EQ(error_of([] { check_run_name("../../x"); }),
            "store: run name '../../x' starts with a dot; a run name names a folder, so it may not");
  EXPECT_EQ(error_of([] { check_run_name("a/../../x"); }),
            "store: run name 'a/../../x' holds '/'; use ASCII letters, digits, '-', '_' and '.' (it names a "
            "checkpoint folder)");
  EXPECT_EQ(error_of([] { check_run_name("my run"); }),
            "store: run name 'my run' holds ' '; use ASCII letters, digits, '-', '_' and '.' (it names a "
            "checkpoint folder)");
  EXPECT_EQ(error_of([] { check_run_name(".hidden"); }),
            "store: run name '.hidden' starts with a dot; a run name names a folder, so it may not");
  for (const char* option : {"-rf", "--force", "-"})
    EXPECT_EQ(error_of([&] { check_run_name(option); }),
              std::string("store: run name '") + option +
                  "' starts with '-', which reads as an option on a command line; start it with a letter or digit");
  EXPECT_EQ(error_of([] { check_run_name("123"); }),
            "store: run name '123' is all digits, which reads as a run id; choose a name with a letter in it");
  EXPECT_EQ(error_of([] { check_run_name(""); }), "store: a run needs a name");
  EXPECT_EQ(error_of([] { check_run_name(std::string(101, 'x')); }),
            "store: run name '" + std::string(100, 'x') + "...' is longer than 100 characters");
}

TEST(RunNames, NamesFromFreeTextAreValid) {
  EXPECT_EQ(run_name_from("gpt2-124m", "run"), "gpt2-124m");
  EXPECT_EQ(run_name_from("my config (copy)", "run"), "my-config-copy");
  EXPECT_EQ(run_name_from("..hidden", "run"), "hidden");
  EXPECT_EQ(run_name_from("\xc3\xa9t\xc3\xa9", "run"), "t");
  EXPECT_EQ(run_name_from("///", "run"), "run");
  EXPECT_EQ(run_name_from(std::string(300, 'y'), "run"), std::string(100, 'y'));
  for (const char* text : {"a b", "../x", "...", "caf\xc3\xa9"})
    EXPECT_EQ(error_of([&] { check_run_name(run_name_from(text, "run")); }), "(no error)") << text;
}

}  // namespace
}  // namespace kiln
