#include "store/user_text.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/error_of.h"

namespace kiln::store {
namespace {

using test::error_of;

TEST(UserText, Utf8IsCheckedByTheStandardsRules) {
  EXPECT_TRUE(is_valid_utf8("plain ascii"));
  EXPECT_TRUE(is_valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5"));  // é € and an emoji
  EXPECT_FALSE(is_valid_utf8("\xff"));
  EXPECT_FALSE(is_valid_utf8("caf\xc3"));             // cut short
  EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));            // overlong '/'
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));        // a surrogate
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));    // past U+10FFFF
  EXPECT_EQ(error_of([] { require_utf8("ok \xfe", "the notes"); }),
            "store: the notes is not valid UTF-8 (a bad byte at offset 3); save it as UTF-8 text");
  EXPECT_EQ(error_of([] { require_utf8("fine", "the notes"); }), "(no error)");
}

TEST(UserText, RunNamesCannotLeaveTheirFolder) {
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

TEST(UserText, NamesFromFreeTextAreValid) {
  EXPECT_EQ(run_name_from("gpt2-124m", "run"), "gpt2-124m");
  EXPECT_EQ(run_name_from("my config (copy)", "run"), "my-config-copy");
  EXPECT_EQ(run_name_from("..hidden", "run"), "hidden");
  EXPECT_EQ(run_name_from("\xc3\xa9t\xc3\xa9", "run"), "t");
  EXPECT_EQ(run_name_from("///", "run"), "run");
  EXPECT_EQ(run_name_from(std::string(300, 'y'), "run"), std::string(100, 'y'));
  for (const char* text : {"a b", "../x", "...", "caf\xc3\xa9"})
    EXPECT_EQ(error_of([&] { check_run_name(run_name_from(text, "run")); }), "(no error)") << text;
}

TEST(UserText, SecretKeysAreRecognisedByTheirWords) {
  for (const char* key : {"token", "serve.token", "wandb.api_key", "s3.access-key", "db.password", "x.client_secret",
                          "AUTH_TOKEN", "hub.apikey"})
    EXPECT_TRUE(names_secret(key)) << key;
  for (const char* key : {"data.tokenizer", "train.max_tokens", "data.json_key", "name", "tokens", "keys"})
    EXPECT_FALSE(names_secret(key)) << key;
}

TEST(UserText, CommandLinesLoseTheirSecrets) {
  EXPECT_EQ(redact_command_line("kiln train --serve 127.0.0.1:8080 --token s3cret --name x"),
            "kiln train --serve 127.0.0.1:8080 --token *** --name x");
  EXPECT_EQ(redact_command_line("kiln train --token=s3cret"), "kiln train --token=***");
  EXPECT_EQ(redact_command_line("kiln train --token 'two words'"), "kiln train --token ***");
  EXPECT_EQ(redact_command_line("kiln train --set hub.api_key=abc train.lr=0.1 --set=wandb.token=t"),
            "kiln train --set hub.api_key=*** train.lr=0.1 --set=wandb.token=***");
  EXPECT_EQ(redact_command_line("kiln train --set 'data.paths=[\"a b\"]' --tokenizer gpt2"),
            "kiln train --set 'data.paths=[\"a b\"]' --tokenizer gpt2");
  EXPECT_EQ(redact_command_line("kiln train --token"), "kiln train --token");
}

}  // namespace
}  // namespace kiln::store
