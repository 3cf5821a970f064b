#include "trainer/parallel/device_world.h"

#include <numeric>
#include <vector>

#include "base/check.h"
#include "trainer/parallel/host_staged_communicator.h"
#ifdef KILN_HAVE_NCCL
#include "trainer/parallel/nccl_communicator.h"
#endif

namespace kiln {

std::string resolve_device_comm(const std::string& setting) {
#ifdef KILN_HAVE_NCCL
  return setting == "auto" ? "nccl" : setting;
#else
  if (setting == "nccl")
    fail("parallel.device_comm=nccl: this build has no NCCL (it comes with the CUDA toolkit: "
         "rebuild where nccl.h is found), or use parallel.device_comm=mpi");
  return "mpi";
#endif
}

std::unique_ptr<Communicator> make_device_world(Communicator& world, Ops& ops, const std::string& kind) {
#ifdef KILN_HAVE_NCCL
  if (kind == "nccl") return make_nccl_communicator(world, static_cast<cudaStream_t>(ops.stream()));
#endif
  KILN_CHECK(kind == "mpi", "no device communicator named " + kind);
  // Staged transfers get an MPI communicator of their own, apart from the host scalars'.
  std::vector<int> everyone(static_cast<size_t>(world.size()));
  std::iota(everyone.begin(), everyone.end(), 0);
  return make_host_staged_communicator(world.split(everyone), ops);
}

}  // namespace kiln
