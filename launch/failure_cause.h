// What ended a failed attempt of a supervised run (launch/supervised_run.h), read from its
// output: the one line that says why, and the hosts it names, which --exclude-failed leaves
// out of the next attempt.
#pragma once

#include <string>
#include <vector>

namespace kiln::launch {

struct FailureCause {
  std::string cause;               // one line; never empty
  std::vector<std::string> hosts;  // the failed hosts, of those the run was given; none: not known
};

// From the attempt's last lines of output (oldest first) and its hosts ("" when it ran on this
// machine alone): kiln's roll call ("ranks 2-3 on node-1 did not answer a roll call"), else
// mpirun's word on a rank that died ("... process rank 2 with PID 77 on node node-1 exited on
// signal 9 (Killed).") or on a daemon it lost ("Remote daemon: ... on node node-1"), else the
// first error kiln printed, else the exit status.
FailureCause failure_cause(const std::vector<std::string>& lines, const std::vector<std::string>& hosts,
                           int exit_code);

}  // namespace kiln::launch
