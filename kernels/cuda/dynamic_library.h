// A CUDA library opened at run time (dlopen) instead of linked: cuDNN, which many machines
// lack (kernels/cuda/cudnn_library.h), and cuBLASLt, half a gigabyte that the dynamic loader
// would otherwise relocate at the start of every process (kernels/cuda/cublaslt_library.h).
#pragma once

#include <dlfcn.h>

#include <string>

namespace kiln::cuda {

// `file` (e.g. "libcudnn.so.9") from the dynamic loader's search path, or null with the
// loader's reason in `why`.
inline void* open_library(const std::string& file, std::string& why) {
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    why = error != nullptr ? error : file + " could not be loaded";
  }
  return handle;
}

// Resolves `name` in the library `file` opened as `handle` into `fn`; false, with `why`
// set, when the library lacks it.
template <typename Fn>
bool resolve(void* handle, const std::string& file, const char* name, Fn& fn, std::string& why) {
  fn = reinterpret_cast<Fn>(dlsym(handle, name));
  if (fn == nullptr) why = file + " has no " + name;
  return fn != nullptr;
}

}  // namespace kiln::cuda
