#include "trainer/parallel/world.h"

#include <cstdio>
#include <string>

#include "base/check.h"
#include "trainer/parallel/launch.h"
#ifdef KILN_HAVE_MPI
#include "trainer/parallel/mpi_communicator.h"
#include "trainer/parallel/mpi_roll_call.h"
#include "trainer/parallel/wait_limits.h"
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

void World::end_after_error(const std::exception& error) {
  if (!session_ || comm_->size() == 1) return;
  const int rank = comm_->rank();
  // A failure heard from another rank is that rank's to tell and rank 0's to report; a
  // wait that gave up happens on every rank that waited, so none tells the others of it.
  const bool heard = dynamic_cast<const PeerFailed*>(&error) != nullptr;
  const bool gave_up = dynamic_cast<const WaitGaveUp*>(&error) != nullptr;
  if (!heard) std::fprintf(stderr, "kiln: error: %s: %s\n", rank_on_host(rank).c_str(), error.what());
  else if (rank == 0) std::fprintf(stderr, "kiln: error: %s\n", error.what());
  std::fflush(stderr);
  MpiSession::end_run(error.what(), rank == 0 || (!heard && !gave_up), rank != 0 && !heard);
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

void World::end_after_error(const std::exception&) {}
#endif

World::~World() = default;

}  // namespace kiln
