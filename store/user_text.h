// Text that comes from users and ends up in the store: tags, notes, command lines, configs.
//
// Every reader of the store (`kiln runs ... --json`, the dashboard, exports) writes JSON, which
// must be UTF-8: one note of stray bytes must not make the whole history unreadable, so text
// is checked where it enters (base/utf8.h; run names by base/run_names.h). Secrets (a
// dashboard token typed on the command line) are never stored: command lines are redacted on
// their way in.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace kiln::store {

// Refuses text that is not UTF-8: "store: WHAT is not valid UTF-8 (a bad byte at offset N)".
void require_utf8(std::string_view text, std::string_view what);

// True for a config key or option that names a secret: a word of its last part (words split
// at '_' and '-', any case) is token, secret, password, passwd, credential(s) or apikey, or it
// ends in api_key, access_key or private_key. `data.tokenizer` and `max_tokens` are not.
bool names_secret(std::string_view key);

// A command line with its secrets replaced by ***: the value of --token (as `--token T` or
// `--token=T`), the value of any `--set KEY=VALUE` or `KEY=VALUE` argument whose key names
// a secret, and what redact_secrets_in_text hides in any argument (a webhook's URL in
// `--set alerts.command=...`). Arguments are the shell-quoted words of the line as kiln
// records it.
std::string redact_command_line(std::string_view command_line);

// Free text (a hook's command, a URL) with what looks like a secret replaced by ***:
//   - the password of a URL's user (https://user:***@host), or the user itself when it has
//     no password (https://***@host: a token is often given so);
//   - the value of NAME=VALUE where NAME names a secret (names_secret), is key or sig, or
//     ends in signature: query parameters (?token=***, &key=***, &sig=***), environment
//     assignments, --option=VALUE;
//   - the credentials of an `Authorization:` header (Authorization: Bearer ***).
// A value ends at whitespace, a quote, '&' or '#'. A secret in a URL's path (a Slack
// webhook's) looks like any path and is not found: keep it in the environment.
std::string redact_secrets_in_text(std::string_view text);

// A config (or any JSON text that holds one, a sweep's spec) as kiln shows and serves it:
// every value under a key that names a secret becomes "***", and every other string goes
// through redact_secrets_in_text. Text that is not JSON goes through it whole. The dashboard's
// API, `kiln runs show --json`, exports, comparisons and the terminal UI all show configs
// through it.
std::string redact_config_json(std::string_view config_json);

// One value of a config as it would read in redact_config_json's answer: "***" under a dotted
// key with a part that names a secret, its strings through redact_secrets_in_text otherwise
// (the runs table's sort and group values, read one key at a time).
nlohmann::json redact_config_value(std::string_view dotted_key, nlohmann::json value);

}  // namespace kiln::store
