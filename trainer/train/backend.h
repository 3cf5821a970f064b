// Picks the op backend for a run from backend.device and precision.dtype, refusing
// combinations this build cannot run with one clear message.
#pragma once

#include <memory>

#include "kernels/ops.h"
#include "trainer/config/config.h"

namespace kiln {

std::unique_ptr<Ops> make_ops(const Config& config);
int resolved_threads(const BackendConfig& backend);

}  // namespace kiln
