// Which object kvremap's hooks forward to: CUDA's own runtime or driver, or another interposer stacked behind it.
#pragma once

#include <string_view>

namespace kvremap::policy {

// Whether `path` (a loaded object's file name, as dladdr reports it) is the CUDA runtime
// (libcudart.so, libcudart.so.N...) or driver (libcuda.so, libcuda.so.N...), judged by its last path
// component. Anything else defining a CUDA allocation function that kvremap forwards to is another
// interposer loaded after kvremap (torch_memory_saver's preload library, say).
bool is_cuda_library(std::string_view path);

}  // namespace kvremap::policy
