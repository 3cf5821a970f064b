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
  std::string prompt;           // train.sample_prompt: a prompt the model has seen
  bool released = false;        // ended by kiln runs release: resuming it comes first
};

// The "next:" block, one command a line; empty when nothing applies.
std::string next_steps(const FinishedRun& run);

// An argument as a shell reads it back: quoted when it holds spaces, quotes or shell syntax.
std::string shell_quote(const std::string& arg);

}  // namespace kiln
