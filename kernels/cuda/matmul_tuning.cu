// Timing a new product's candidate algorithms on the buffers of its first call
// (kernels/product_tuning.h says when and why).
//
// Each candidate runs once to warm up, then kRuns times between two events; the tuner keeps
// the fastest mean. A product that overwrites its output is timed in place (the call's own
// run then writes the real result); one that accumulates (beta 1: a weight gradient) would
// add its product kRuns + 1 times, so it writes into a scratch output made for the timing.
#include <string>

#include "kernels/cuda/cublaslt_library.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/matmul.h"

namespace kiln::cuda {
namespace {

constexpr int kRuns = 5;

size_t element_bytes(int type) { return type == CUDA_R_32F ? 4 : 2; }

// Events for one timing, destroyed with it.
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() {
    KILN_CUDA_CHECK(cudaEventCreate(&start));
    KILN_CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~EventPair() {
    cudaEventDestroy(stop);
    cudaEventDestroy(start);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
};

}  // namespace

int Matmul::tuned_choice(const ProductKey& key, const Plan& plan,
                         const cublasLtMatmulHeuristicResult_t* candidates, int count,
                         const Call& call) {
  if (!tuner_.enabled() || count < 2) return 0;
  // Timing waits for the device, which a stream being captured into a graph must not do.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  KILN_CUDA_CHECK(cudaStreamIsCapturing(call.stream, &capture));
  if (capture != cudaStreamCaptureStatusNone) return 0;

  void* D = call.C;
  void* scratch = nullptr;
  if (call.beta != 0.0f) {
    const size_t bytes = static_cast<size_t>(key.M) * static_cast<size_t>(key.ldc) *
                         element_bytes(key.c_type);
    if (cudaMalloc(&scratch, bytes) != cudaSuccess) {
      (void)cudaGetLastError();  // no room to time it: the heuristic's guess, untimed
      return 0;
    }
    D = scratch;
  }
  // The work queued before is not the candidates': finished before the clock starts.
  KILN_CUDA_CHECK(cudaStreamSynchronize(call.stream));
  const int choice = tuner_.choose(count, [&](int i) {
    if (candidates[i].state != CUBLAS_STATUS_SUCCESS) return -1.0;
    return time_algorithm(plan, candidates[i].algo, call, D);
  });
  if (scratch) cudaFree(scratch);
  return choice;
}

double Matmul::time_algorithm(const Plan& plan, const cublasLtMatmulAlgo_t& algo,
                              const Call& call, void* D) {
  const float alpha = 1.0f;
  const auto launch = [&] {
    return lt_.matmul(handle_, plan.desc, &alpha, call.B, plan.first, call.A, plan.second,
                          &call.beta, D, plan.c, D, plan.c, &algo, workspace_,
                          lt_workspace_bytes(), call.stream);
  };
  if (launch() != CUBLAS_STATUS_SUCCESS) return -1;
  EventPair events;
  KILN_CUDA_CHECK(cudaEventRecord(events.start, call.stream));
  for (int r = 0; r < kRuns; ++r)
    if (launch() != CUBLAS_STATUS_SUCCESS) return -1;
  KILN_CUDA_CHECK(cudaEventRecord(events.stop, call.stream));
  KILN_CUDA_CHECK(cudaEventSynchronize(events.stop));
  float ms = 0;
  KILN_CUDA_CHECK(cudaEventElapsedTime(&ms, events.start, events.stop));
  return ms / 1e3 / kRuns;
}

}  // namespace kiln::cuda
