
#include <gtest/gtest.h>

#include <string>

#include "base/utf8.h"
#include "store/user_text.h"
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
  // A webhook's credentials inside a value: the word is quoted again around what is left.
  EXPECT_EQ(redact_command_line("kiln train --set 'alerts.command=curl https://user:pw@hooks.example/x?token=abc' -c a.json"),
            "kiln train --set 'alerts.command=curl https://user:***@hooks.example/x?token=***' -c a.json");
  EXPECT_EQ(redact_command_line("kiln train --set data.json_key=text"), "kiln train --set data.json_key=text");
}

TEST(UserText, SecretLookingValuesInFreeTextAreHidden) {
  EXPECT_EQ(redact_secrets_in_text("curl https://user:pw@hooks.example/x?token=abc&page=2#top"),
            "curl https://user:***@hooks.example/x?token=***&page=2#top");
  EXPECT_EQ(redact_secrets_in_text("git clone https://ghp_abc@github.com/o/r"), "git clone https://***@github.com/o/r");
  EXPECT_EQ(redact_secrets_in_text("https://maps.example/api?key=K1&sig=S2&access_token=T3&X-Amz-Signature=S4"),
            "https://maps.example/api?key=***&sig=***&access_token=***&X-Amz-Signature=***");
  EXPECT_EQ(redact_secrets_in_text("SLACK_TOKEN=xoxb-1 notify --api-key=k2 --level=warn"),
            "SLACK_TOKEN=*** notify --api-key=*** --level=warn");
  EXPECT_EQ(redact_secrets_in_text("curl -H \"Authorization: Bearer abc.def\" -H 'authorization:xyz' https://h/"),
            "curl -H \"Authorization: Bearer ***\" -H 'authorization:***' https://h/");
  // What is not secret stays as it was, and hiding twice hides nothing more.
  for (const char* plain : {"cat >> alerts.jsonl", "https://hooks.example/x?page=2", "data.json_key=text max_tokens=5",
                            "jq -c '{text: .message}' | mail you@example.com", "token=", "a=b=c"})
    EXPECT_EQ(redact_secrets_in_text(plain), plain);
  const std::string once = redact_secrets_in_text("https://u:p@h/?token=t");
  EXPECT_EQ(redact_secrets_in_text(once), once);
}

TEST(UserText, ConfigsLoseTheirSecretsWhereverTheyAre) {
  EXPECT_EQ(redact_config_json(R"({"alerts":{"command":"curl https://user:pw@hooks.example/x?token=abc","window":20},)"
                               R"("hub":{"api_key":"k","token":""},"train":{"lr":0.001},"data":{"paths":["a?sig=s"]}})"),
            R"({"alerts":{"command":"curl https://user:***@hooks.example/x?token=***","window":20},)"
            R"("data":{"paths":["a?sig=***"]},"hub":{"api_key":"***","token":""},"train":{"lr":0.001}})");
  EXPECT_EQ(redact_config_json(R"({"db":{"credentials":{"user":"u","password":"p"}}})"), R"({"db":{"credentials":"***"}})");
  EXPECT_EQ(redact_config_json("not json: https://u:p@h"), "not json: https://u:***@h");
}

}  // namespace
}  // namespace kiln::store
