// Which of OpenBLAS's kernel sets runs the products ("Haswell", "SkylakeX", "Cooperlake",
// ...): OpenBLAS picks it once, as it loads, from $OPENBLAS_CORETYPE or else the CPU's id, and
// it sets the speed of every matrix product (bench/README.md). The CPU backend names it.
#pragma once

#include <string>

namespace kiln {

std::string openblas_core();

}  // namespace kiln
