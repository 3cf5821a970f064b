// The commands queue that steers a live run. A client (CLI, dashboard) inserts a command;
// the training process reads the pending ones at a step boundary, acts, and marks each one
// applied or rejected with the step and a reason, which also becomes a `command` event.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "store/database.h"
#include "store/run_queries.h"
#include "store/types.h"

namespace kiln::store {

// Queues a command for a live run (running or paused, heartbeat fresh); an ended or lost
// run is refused, since nothing would ever read it. `set` needs an argument (key=value),
// the other actions take none. Returns the command id.
int64_t insert_command(Database& db, int64_t run_id, CommandAction action,
                       const std::string& argument = {},
                       double stale_after_s = kDefaultStaleAfterS);

// Pending commands of a run, oldest first.
std::vector<Command> pending_commands(Database& db, int64_t run_id);
// Every command of a run, oldest first.
std::vector<Command> list_commands(Database& db, int64_t run_id);

// Applied or rejected at `step`, with a reason, plus the `command` event; one transaction.
// A command that is unknown or no longer pending is refused.
void mark_command(Database& db, int64_t command_id, CommandStatus status, int64_t step,
                  const std::string& reason = {});

}  // namespace kiln::store
