// What an MPI launcher (mpirun, srun) told this process through its environment, read
// without starting MPI.
#pragma once

namespace kiln {

// The number of processes launched together: OMPI_COMM_WORLD_SIZE (Open MPI), PMI_SIZE
// (srun, MPICH); 1 for a process started on its own.
int launched_world_size();

}  // namespace kiln
