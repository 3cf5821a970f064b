// kiln train --ranks N (docs/parallelism.md): the command starts its own ranks, under Open
// MPI's mpirun told what this machine needs (base/mpi_launch.h), instead of the user typing
// mpirun's options. kiln sweep --ranks passes it to each point's training.
#pragma once

namespace kiln {

// Does nothing for 1 rank (the command trains in this process). For more, replaces this
// process with `mpirun -np N ... KILN ARGS`: this binary (/proc/self/exe) with this process's
// own arguments less --ranks, and only stdin, stdout and stderr open. Refused in one line:
// fewer than 1 rank, a process an MPI launcher started (it is already one of the ranks), or
// no mpirun on the PATH.
void start_ranks(int ranks);

}  // namespace kiln
