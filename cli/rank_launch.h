// kiln train --ranks N (docs/parallelism.md): the command starts its own ranks, under Open
// MPI's mpirun told what this machine needs (base/mpi_launch.h), instead of the user typing
// mpirun's options. kiln sweep --ranks passes it to each point's training.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// This process's arguments after the program, as it was started (/proc/self/cmdline), less
// each of `options` with its value (`--x V` or `--x=V`) and each of `flags`.
std::vector<std::string> own_arguments_less(std::initializer_list<std::string_view> options,
                                            std::initializer_list<std::string_view> flags = {});

// Does nothing for 1 rank (the command trains in this process). For more, replaces this
// process with `mpirun -np N ... KILN ARGS`: this binary (/proc/self/exe) with this process's
// own arguments less --ranks, and only stdin, stdout and stderr open. Refused in one line:
// fewer than 1 rank, a process an MPI launcher started (it is already one of the ranks), or
// no mpirun on the PATH.
void start_ranks(int ranks);

}  // namespace kiln
