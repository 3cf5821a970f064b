// cuDNN, loaded at run time from libcudnn.so.9 (as NVML is, trainer/telemetry/nvml.h): a
// build takes only cuDNN's types and enums from its headers and never links it, so a machine
// without cuDNN builds, tests and trains with kiln's own attention kernels.
//
// Only the graph (backend) API is resolved: the descriptors that build, plan and run fused
// attention (kernels/cuda/cudnn_attention.cu), and the handle they run on.
#pragma once

#include <cudnn_graph.h>

#include <memory>
#include <string>

namespace kiln::cuda {

class CudnnLibrary {
 public:
  // cuDNN from the dynamic loader's search path (LD_LIBRARY_PATH), or null with the reason
  // in `why` (no library, or one without the graph API). Its version is for the caller to
  // judge (kernels/cudnn_attention_support.h).
  static std::unique_ptr<CudnnLibrary> load(std::string& why);
  ~CudnnLibrary();
  CudnnLibrary(const CudnnLibrary&) = delete;
  CudnnLibrary& operator=(const CudnnLibrary&) = delete;

  // cudnnGetVersion(): 91900 for 9.19.0.
  int version() const { return version_; }
  // Throws kiln::Error naming the call, the status and cuDNN's own last message.
  void check(cudnnStatus_t status, const std::string& call) const;

  decltype(&cudnnCreate) create = nullptr;
  decltype(&cudnnDestroy) destroy = nullptr;
  decltype(&cudnnSetStream) set_stream = nullptr;
  decltype(&cudnnBackendCreateDescriptor) create_descriptor = nullptr;
  decltype(&cudnnBackendDestroyDescriptor) destroy_descriptor = nullptr;
  decltype(&cudnnBackendSetAttribute) set_attribute = nullptr;
  decltype(&cudnnBackendGetAttribute) get_attribute = nullptr;
  decltype(&cudnnBackendFinalize) finalize = nullptr;
  decltype(&cudnnBackendExecute) execute = nullptr;

 private:
  CudnnLibrary() = default;

  void* handle_ = nullptr;
  int version_ = 0;
  decltype(&cudnnGetErrorString) error_string_ = nullptr;
  decltype(&cudnnGetLastErrorString) last_error_ = nullptr;
};

}  // namespace kiln::cuda
