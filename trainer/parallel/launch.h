// What an MPI launcher (mpirun, srun) told this process through its environment, read
// without starting MPI: OMPI_COMM_WORLD_SIZE (Open MPI) or PMI_SIZE (srun, MPICH).
#pragma once

namespace kiln {

// True when a launcher started this process (one process or several).
bool launched_by_mpi();

// The number of processes launched together; 1 for a process started on its own.
int launched_world_size();

}  // namespace kiln
