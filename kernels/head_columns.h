// Ops::copy_head_columns's placement of its head blocks, shared by the ops and both
// backends' kernels.
#pragma once

#include <cstdint>

namespace kiln {

// Where copy_head_columns reads and writes in each row of its two matrices: `heads` blocks of
// `width` columns, block h at column first + h * stride (stride 0: one block for every h).
struct HeadColumns {
  int64_t heads = 1;
  int64_t width = 0;
  int64_t out_first = 0;
  int64_t out_stride = 0;
  int64_t x_first = 0;
  int64_t x_stride = 0;
};

}  // namespace kiln
