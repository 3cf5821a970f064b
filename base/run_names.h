// Run and sweep names: a name also names a folder (train.checkpoint_dir/NAME) and is typed
// on command lines, so it is held to characters that cannot climb out of that folder or read
// as an option or an id. The store checks names at its door, the trainer where it makes a
// checkpoint folder from one.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kiln {

inline constexpr size_t kMaxRunNameLength = 100;

// The characters a run name may hold: ASCII letters, digits, '-', '_' and '.'.
bool is_run_name_char(char c);

// Refuses a run name that is empty, longer than kMaxRunNameLength, starts with a dot or a
// dash (it would read as an option), holds anything but ASCII letters, digits, '-', '_' and
// '.', or is all digits (it would read as a run id). The one-line error says which rule it
// broke. Sweeps are named by the same rule.
void check_run_name(std::string_view name);

// A valid run name made from free text (a config file's name, a folder's name): every run of
// other characters becomes one '-', leading dots and dashes go, and it is cut to the length
// limit; empty text gives `fallback`.
std::string run_name_from(std::string_view text, std::string_view fallback);

}  // namespace kiln
