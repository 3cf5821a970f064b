// A run's launch record (RunLaunch, store/types.h) as the store keeps it: JSON text in
// `runs.launch`. Written by the writer, read back strictly by whoever starts the run again,
// since anyone who can write the store file can write this text.
#pragma once

#include <string>
#include <string_view>

#include "store/types.h"

namespace kiln::store {

// {} for a run without a dashboard; {"serve": ..., "allow_hosts": [...], "max_connections":
// N, "max_subscribers": N, "token": true|false} for one with.
std::string launch_to_json(const RunLaunch& launch);

// The record launch_to_json writes, and nothing else: text that is not a JSON object, a key
// it does not write, a value of another type, a count below 1 or a dashboard option without
// `serve` is a kiln::Error ("store: the launch record ...: WHY"). The values' meaning (an
// address, host names) is the caller's to check, as if they were typed.
RunLaunch parse_launch(std::string_view json);

}  // namespace kiln::store
