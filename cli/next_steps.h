// What a finished `kiln train` prints last: the commands that take the user on from the run
// just trained, each pointing at something that exists (the run in its store, the final
// checkpoint), so a new user's first run ends with where to look next.
#pragma once

#include <string>

namespace kiln {

struct FinishedRun {
  std::string name;
  std::string store_flag;       // " --store PATH" when the store is not the one found by default
  bool recorded = false;        // the run is in a store
  std::string last_checkpoint;  // empty when the run wrote none
  std::string prompt;           // train.sample_prompt's first: a prompt the model has seen
};

// The "next:" block, one command a line, each of which runs as printed; empty when nothing
// applies.
std::string next_steps(const FinishedRun& run);

// " --store PATH" for a run recorded in `store_path`, when that is not the store the commands
// after it find by default; "" when it is, or when the run is not recorded ("").
std::string store_flag(const std::string& store_path);

// "continue it with: kiln runs resume NAME[ --store PATH]": what a run released or interrupted
// with a checkpoint to go on from says last (store_flag: as above), and kiln runs release --wait
// after it.
std::string continue_line(const std::string& name, const std::string& store_flag);

// An argument as a shell reads it back: quoted when it holds spaces, quotes or shell syntax.
std::string shell_quote(const std::string& arg);

}  // namespace kiln
