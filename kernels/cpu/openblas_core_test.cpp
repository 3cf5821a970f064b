// The CPU backend names the OpenBLAS kernels that run its products.
#include "kernels/cpu/openblas_core.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <strings.h>

#include "kernels/ops.h"

namespace kiln {
namespace {

TEST(OpenBlasCore, IsNamedWithTheBackend) {
  const std::string core = openblas_core();
  ASSERT_FALSE(core.empty());
  // A core type asked for by name is the one OpenBLAS runs (it reads names in any case).
  if (const char* asked = std::getenv("OPENBLAS_CORETYPE")) {
    EXPECT_EQ(strcasecmp(asked, core.c_str()), 0) << asked << " vs " << core;
  }
  EXPECT_EQ(make_cpu_ops(2)->name(), "cpu (2 threads, OpenBLAS " + core + ")");
}

}  // namespace
}  // namespace kiln
