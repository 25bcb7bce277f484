// Caller attribution: the shared object that asked for an allocation (libc10_cuda.so, libnccl.so, ...).
#pragma once

#include <string>

namespace kvremap::interpose {

// The basename of the first stack frame's object that is not kvremap, libcudart or libcuda, found
// with libunwind. `return_address` (the hook's own return address) keys a cache, so a call site's
// walk is paid once. Empty when it cannot be told.
std::string caller_object(void* return_address);

}  // namespace kvremap::interpose
