#include "base/run_names.h"

#include <algorithm>
#include <cctype>

#include "base/utf8.h"

namespace kiln {

bool is_run_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
}

void check_run_name(std::string_view name) {
  const std::string shown(name.substr(0, kMaxRunNameLength));
  const auto refuse = [&](const std::string& why) {
    fail("store: run name '" + shown + (name.size() > shown.size() ? "..." : "") + "' " + why);
  };
  if (name.empty()) fail("store: a run needs a name");
  if (!is_valid_utf8(name)) fail("store: a run name must be ASCII letters, digits, '-', '_' and '.'");
  if (name.size() > kMaxRunNameLength)
    refuse("is longer than " + std::to_string(kMaxRunNameLength) + " characters");
  if (name.front() == '.') refuse("starts with a dot; a run name names a folder, so it may not");
  // `kiln runs rm -rf`, `kiln sweep show --force`: a name that reads as an option breaks
  // every later command that takes it, and the hints kiln prints with it.
  if (name.front() == '-') refuse("starts with '-', which reads as an option on a command line; start it with a letter or digit");
  const auto bad = std::find_if_not(name.begin(), name.end(), is_run_name_char);
  if (bad != name.end())
    refuse("holds '" + std::string(1, *bad) +
           "'; use ASCII letters, digits, '-', '_' and '.' (it names a checkpoint folder)");
  if (std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; }))
    refuse("is all digits, which reads as a run id; choose a name with a letter in it");
}

std::string run_name_from(std::string_view text, std::string_view fallback) {
  std::string name;
  for (const char c : text) {
    if (is_run_name_char(c)) name += c;
    else if (!name.empty() && name.back() != '-') name += '-';
  }
  const size_t start = name.find_first_not_of(".-");
  name = start == std::string::npos ? std::string() : name.substr(start);
  if (name.size() > kMaxRunNameLength) name.resize(kMaxRunNameLength);
  while (!name.empty() && name.back() == '-') name.pop_back();
  return name.empty() ? std::string(fallback) : name;
}

}  // namespace kiln
