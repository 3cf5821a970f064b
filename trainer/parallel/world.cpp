#include "trainer/parallel/world.h"

#include <string>

#include "kernels/check.h"
#include "trainer/parallel/launch.h"
#ifdef KILN_HAVE_MPI
#include "trainer/parallel/mpi_communicator.h"
#endif

namespace kiln {

#ifdef KILN_HAVE_MPI
World::World() {
  // A plain start stays a world of one without touching MPI.
  if (launched_by_mpi()) {
    session_ = std::make_unique<MpiSession>();
    comm_ = MpiSession::world();
  } else {
    comm_ = make_single_process_communicator();
  }
}
#else
class MpiSession {};

World::World() {
  if (launched_world_size() > 1)
    fail("kiln was launched as " + std::to_string(launched_world_size()) +
         " processes but was built without MPI (install libopenmpi-dev: scripts/setup.sh, then "
         "rebuild)");
  comm_ = make_single_process_communicator();
}
#endif

World::~World() = default;

}  // namespace kiln
