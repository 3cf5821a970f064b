// Ops::fill_normal's CPU body, the reference for the CUDA one (kernels/cuda/fill_normal.cu):
// each element draws its own index of the counter-based stream, so how the elements are split
// among threads changes nothing. Built with -ffp-contract=off (CMakeLists.txt), as the CUDA
// body is with -fmad=false: the arithmetic is kernels/counter_random.h's and nothing else.
#include <string>

#include "base/check.h"
#include "kernels/counter_random.h"
#include "kernels/cpu/kernels.h"
#include "kernels/half_convert.h"

namespace kiln::cpu {
namespace {

template <typename T, typename Round>
void fill_runs(T* x, const RandomRuns& runs, uint64_t seed, uint64_t stream, double mean, double std,
               Round round) {
#pragma omp parallel for schedule(static)
  for (int64_t e = 0; e < runs.count(); ++e)
    x[runs.offset(e)] = round(exact::fma(std, counter_normal(seed, stream, runs.index(e)), mean));
}

}  // namespace

void fill_normal(void* x, DType dtype, const RandomRuns& runs, uint64_t seed, uint64_t stream,
                 double mean, double std) {
  switch (dtype) {
    case DType::F64:
      return fill_runs(static_cast<double*>(x), runs, seed, stream, mean, std, [](double v) { return v; });
    case DType::F32:
      return fill_runs(static_cast<float*>(x), runs, seed, stream, mean, std,
                       [](double v) { return static_cast<float>(v); });
    case DType::BF16:
      return fill_runs(static_cast<uint16_t*>(x), runs, seed, stream, mean, std,
                       [](double v) { return float_to_bf16(static_cast<float>(v)); });
    case DType::F16:
      return fill_runs(static_cast<uint16_t*>(x), runs, seed, stream, mean, std,
                       [](double v) { return float_to_f16(static_cast<float>(v)); });
    case DType::I32:
    case DType::I64:
    case DType::E4M3:
    case DType::E5M2: break;
  }
  fail(std::string("fill_normal: a floating tensor expected, got ") + dtype_name(dtype));
}

}  // namespace kiln::cpu
