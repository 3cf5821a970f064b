#include "kernels/cuda/cudnn_library.h"

#include <dlfcn.h>

#include "base/check.h"

namespace kiln::cuda {

namespace {

// Resolves `name` into `fn`; false (with `why` set) when the library lacks it.
template <typename Fn>
bool resolve(void* handle, const char* name, Fn& fn, std::string& why) {
  fn = reinterpret_cast<Fn>(dlsym(handle, name));
  if (fn == nullptr) why = std::string("libcudnn.so.9 has no ") + name;
  return fn != nullptr;
}

}  // namespace

std::unique_ptr<CudnnLibrary> CudnnLibrary::load(std::string& why) {
  void* handle = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    why = error != nullptr ? error : "libcudnn.so.9 could not be loaded";
    return nullptr;
  }
  std::unique_ptr<CudnnLibrary> lib(new CudnnLibrary);
  lib->handle_ = handle;
  decltype(&cudnnGetVersion) get_version = nullptr;
  if (!resolve(handle, "cudnnGetVersion", get_version, why) ||
      !resolve(handle, "cudnnGetErrorString", lib->error_string_, why) ||
      !resolve(handle, "cudnnGetLastErrorString", lib->last_error_, why) ||
      !resolve(handle, "cudnnCreate", lib->create, why) ||
      !resolve(handle, "cudnnDestroy", lib->destroy, why) ||
      !resolve(handle, "cudnnSetStream", lib->set_stream, why) ||
      !resolve(handle, "cudnnBackendCreateDescriptor", lib->create_descriptor, why) ||
      !resolve(handle, "cudnnBackendDestroyDescriptor", lib->destroy_descriptor, why) ||
      !resolve(handle, "cudnnBackendSetAttribute", lib->set_attribute, why) ||
      !resolve(handle, "cudnnBackendGetAttribute", lib->get_attribute, why) ||
      !resolve(handle, "cudnnBackendFinalize", lib->finalize, why) ||
      !resolve(handle, "cudnnBackendExecute", lib->execute, why))
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
