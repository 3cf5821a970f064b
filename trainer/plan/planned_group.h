// A group of ranks as a plan sees it: a size and this rank's place in it, and no data moved.
// The planner builds a rank's model and optimizer over such groups (trainer/plan/rank_build.h)
// to size them with the trainer's own code; laying out never calls a collective, and a call
// that did would be refused.
#pragma once

#include <memory>

#include "trainer/parallel/communicator.h"

namespace kiln {

std::unique_ptr<Communicator> make_planned_group(int size, int rank);

}  // namespace kiln
