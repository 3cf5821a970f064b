// Token (and learned position) embedding.
#include <algorithm>

#include "kernels/cpu/kernels.h"

namespace kiln::cpu {

template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const int32_t* positions, const T* wte,
                       const T* wpe, int64_t B, int64_t seq, int64_t C, int64_t vocab_rows) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < B * seq; ++n) {
    T* row = out + n * C;
    // An id outside the table (another vocabulary-parallel rank's) gives a zero row.
    if (tokens[n] >= 0 && tokens[n] < vocab_rows) {
      const T* tok = wte + static_cast<int64_t>(tokens[n]) * C;
      std::copy(tok, tok + C, row);
    } else {
      std::fill(row, row + C, T(0));
    }
    if (wpe) {
      const T* pos = wpe + position_of(positions, n, seq) * C;
      for (int64_t c = 0; c < C; ++c) row[c] += pos[c];
    }
  }
}

// Threads split the channels, not the tokens: two tokens with the same id (or position)
// then never race, and every gradient row is summed in token order (deterministic, no
// atomics).
template <typename T>
void embedding_backward(T* dwte, T* dwpe, const int32_t* tokens, const int32_t* positions,
                        const T* dout, int64_t B, int64_t seq, int64_t C, int64_t vocab_rows) {
  constexpr int64_t kBlock = 32;
  const int64_t blocks = (C + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t c0 = blk * kBlock, c1 = std::min(C, c0 + kBlock);
    for (int64_t n = 0; n < B * seq; ++n) {
      const T* d = dout + n * C;
      if (tokens[n] >= 0 && tokens[n] < vocab_rows) {
        T* tok = dwte + static_cast<int64_t>(tokens[n]) * C;
        for (int64_t c = c0; c < c1; ++c) tok[c] += d[c];
      }
      if (dwpe) {
        T* pos = dwpe + position_of(positions, n, seq) * C;
        for (int64_t c = c0; c < c1; ++c) pos[c] += d[c];
      }
    }
  }
}

#define KILN_INSTANTIATE(T)                                                                 \
  template void embedding_forward<T>(T*, const int32_t*, const int32_t*, const T*, const T*, \
                                     int64_t, int64_t, int64_t, int64_t);                    \
  template void embedding_backward<T>(T*, T*, const int32_t*, const int32_t*, const T*,      \
                                      int64_t, int64_t, int64_t, int64_t);
KILN_INSTANTIATE(float)
KILN_INSTANTIATE(double)
#undef KILN_INSTANTIATE

}  // namespace kiln::cpu
