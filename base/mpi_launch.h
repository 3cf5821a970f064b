// How kiln starts several ranks of itself on this machine (kiln train --ranks N,
// docs/parallelism.md): Open MPI's mpirun, told what this machine needs, so that a first
// multi-rank run does not stop at one of mpirun's refusals.
#pragma once

#include <string>
#include <vector>

namespace kiln {

struct MpirunWords {
  std::vector<std::string> argv;  // "mpirun" and its options, before the program it starts
  std::string note;               // what the user should know about the launch; empty: nothing
};

// The start of the command that launches `ranks` processes (ranks > 1) on a machine with
// `cores` cores, as root or not. mpirun refuses root unless told (--allow-run-as-root, given
// only as root), and more processes than cores unless told (--oversubscribe, given only then,
// with a note that says so).
MpirunWords mpirun_words(int ranks, int cores, bool root);

// The cores mpirun counts as its slots here: the physical cores of the CPUs this process may
// run on (the hardware threads of one core count once, as Open MPI counts them); the CPUs
// themselves where the machine does not describe its cores.
int mpirun_slots();

}  // namespace kiln
