// JSONL input, one document a line with its text under a key (`--json-key`), as `kiln data
// prepare` and `kiln tokenizer train` read it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// One JSONL line as the JSON object it must be: a kiln::Error naming `where` ("FILE:LINE")
// when it is not UTF-8 (`offset`: the line's first byte in its file), not JSON or not an object.
nlohmann::json jsonl_object(std::string_view line, const std::string& where, uint64_t offset = 0);
// The string under `key` of such an object (moved out), or a kiln::Error naming `where`.
std::string jsonl_string(nlohmann::json& object, const std::string& key, const std::string& where);

// The text under `key` in one JSONL line. `where` names the line for the one-line error
// ("FILE:LINE"); `offset` is the line's first byte in its file, for the UTF-8 error's byte.
std::string jsonl_text(std::string_view line, const std::string& key, const std::string& where,
                       uint64_t offset = 0);

// True when the file's first non-blank line is a JSON object: read as plain text, its JSON
// syntax would be learned or trained on. Reads at most its first 1 MiB.
bool looks_like_jsonl(const std::string& path);

// For an input read as plain text that looks like JSONL, one warning line to err:
// "COMMAND: warning: FILE looks like JSONL; without --json-key KEY its JSON syntax is WHAT as text".
void warn_of_jsonl(const std::vector<std::string>& inputs, const char* command, const char* what, std::FILE* err);

}  // namespace kiln
