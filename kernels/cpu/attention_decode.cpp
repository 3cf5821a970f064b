// Attention over a key/value cache, for generation: the CPU body of Ops::attention_decode.
//
// The new positions' keys and values are copied into the cache first. Then each query
// (sequence, position, head) walks its cache rows once with an online softmax, a running
// max and sum, accumulating straight into its output row: when a key raises the max, what
// was accumulated so far is rescaled by exp(old max - new max). So the op needs no scratch,
// and one thread owns each query row and walks the keys in order, so the result does not
// depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/kernels.h"

namespace kiln::cpu {

template <typename T>
void attention_decode(T* out, T* k_cache, T* v_cache, const T* qkv, const HeadLayout& L,
                      int64_t capacity, int64_t pos) {
  const int64_t hd = L.head_dim, width = L.qkv_width();
  const int64_t kv_width = L.n_kv_head * hd, group = L.n_head / L.n_kv_head;
  const size_t kv_bytes = static_cast<size_t>(kv_width) * sizeof(T);
  for (int64_t n = 0; n < L.batch * L.seq; ++n) {
    const T* keys = qkv + n * width + L.n_head * hd;  // then the values, kv_width further
    const int64_t row = (n / L.seq * capacity + pos + n % L.seq) * kv_width;
    std::memcpy(k_cache + row, keys, kv_bytes);
    std::memcpy(v_cache + row, keys + kv_width, kv_bytes);
  }

  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hd)));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < L.batch * L.seq; ++n) {
    for (int64_t h = 0; h < L.n_head; ++h) {
      const int64_t b = n / L.seq, last = pos + n % L.seq;
      const T* q = qkv + n * width + h * hd;
      const int64_t head_offset = b * capacity * kv_width + (h / group) * hd;
      const T* keys = k_cache + head_offset;
      const T* values = v_cache + head_offset;
      T* o = out + (n * L.n_head + h) * hd;
      std::fill(o, o + hd, T(0));
      T max = -std::numeric_limits<T>::infinity(), sum = 0;
      for (int64_t j = 0; j <= last; ++j) {
        const T* k = keys + j * kv_width;
        T s = 0;
        for (int64_t d = 0; d < hd; ++d) s += q[d] * k[d];
        s *= scale;
        if (s > max) {
          // Nothing has been accumulated at the first key, whatever this factor is.
          const T shrink = vexp(max - s);
          sum *= shrink;
          for (int64_t d = 0; d < hd; ++d) o[d] *= shrink;
          max = s;
        }
        const T p = vexp(s - max);
        sum += p;
        const T* v = values + j * kv_width;
        for (int64_t d = 0; d < hd; ++d) o[d] += p * v[d];
      }
      const T inv = T(1) / sum;
      for (int64_t d = 0; d < hd; ++d) o[d] *= inv;
    }
  }
}

template void attention_decode<float>(float*, float*, float*, const float*, const HeadLayout&,
                                      int64_t, int64_t);
template void attention_decode<double>(double*, double*, double*, const double*, const HeadLayout&,
                                       int64_t, int64_t);

}  // namespace kiln::cpu
