#include "kernels/cpu/openblas_core.h"

extern "C" char* openblas_get_corename(void);

namespace kiln {

std::string openblas_core() { return openblas_get_corename(); }

}  // namespace kiln
