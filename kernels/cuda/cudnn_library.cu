#include "kernels/cuda/cudnn_library.h"

#include <dlfcn.h>

#include "base/check.h"
#include "kernels/cuda/dynamic_library.h"

namespace kiln::cuda {

namespace {

const std::string kFile = "libcudnn.so.9";

}  // namespace

std::unique_ptr<CudnnLibrary> CudnnLibrary::load(std::string& why) {
  void* handle = open_library(kFile, why);
  if (handle == nullptr) return nullptr;
  std::unique_ptr<CudnnLibrary> lib(new CudnnLibrary);
  lib->handle_ = handle;
  decltype(&cudnnGetVersion) get_version = nullptr;
  if (!resolve(handle, kFile, "cudnnGetVersion", get_version, why) ||
      !resolve(handle, kFile, "cudnnGetErrorString", lib->error_string_, why) ||
      !resolve(handle, kFile, "cudnnGetLastErrorString", lib->last_error_, why) ||
      !resolve(handle, kFile, "cudnnCreate", lib->create, why) ||
      !resolve(handle, kFile, "cudnnDestroy", lib->destroy, why) ||
      !resolve(handle, kFile, "cudnnSetStream", lib->set_stream, why) ||
      !resolve(handle, kFile, "cudnnBackendCreateDescriptor", lib->create_descriptor, why) ||
      !resolve(handle, kFile, "cudnnBackendDestroyDescriptor", lib->destroy_descriptor, why) ||
      !resolve(handle, kFile, "cudnnBackendSetAttribute", lib->set_attribute, why) ||
      !resolve(handle, kFile, "cudnnBackendGetAttribute", lib->get_attribute, why) ||
      !resolve(handle, kFile, "cudnnBackendFinalize", lib->finalize, why) ||
      !resolve(handle, kFile, "cudnnBackendExecute", lib->execute, why))
    return nullptr;
  lib->version_ = static_cast<int>(get_version());
  return lib;
}

CudnnLibrary::~CudnnLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

void CudnnLibrary::check(cudnnStatus_t status, const std::string& call) const {
  if (status == CUDNN_STATUS_SUCCESS) return;
  char detail[512] = {};
  last_error_(detail, sizeof detail);
  std::string message = "cuDNN: " + call + " failed with " + error_string_(status);
  if (detail[0] != '\0') message += std::string(": ") + detail;
  // cuDNN's messages may span lines; kiln's errors are one.
  for (char& c : message)
    if (c == '\n') c = ' ';
  fail(message);
}

}  // namespace kiln::cuda
