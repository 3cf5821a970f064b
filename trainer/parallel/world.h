// The processes of a run: MPI's world when a launcher started several (or one) processes,
// else a world of one. Holds the MPI session, so it must outlive every communicator.
#pragma once

#include <memory>

#include "trainer/parallel/communicator.h"

namespace kiln {

class MpiSession;

class World {
 public:
  // kiln::Error when a launcher started several processes and this build has no MPI.
  World();
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  Communicator& comm() { return *comm_; }

 private:
  std::unique_ptr<MpiSession> session_;  // declared first: finalised last
  std::unique_ptr<Communicator> comm_;
};

}  // namespace kiln
