// Resolution of the real functions behind every hook: libc's dlsym, libcudart's and libcuda's definitions.
#pragma once

#include <atomic>

#include "interpose/base/hot_path.h"

namespace kvremap::interpose {

using DlsymFn = void* (*)(void*, const char*);
using DlvsymFn = void* (*)(void*, const char*, const char*);

// libc's own dlsym/dlvsym (never our hooks). Null only if libc could not be read, which turns
// kvremap off.
DlsymFn libc_dlsym();
DlvsymFn libc_dlvsym();

// libcuda.so.1's handle once the process has loaded it, else nullptr. Does not load it.
void* cuda_driver_handle();

// The definition of a runtime function that comes after this library (libcudart's `cudaMalloc`).
void* next_definition(const char* name);
// The real driver export `name` (e.g. "cuMemAlloc_v2") from libcuda.so.1, or nullptr.
void* driver_export(const char* name);
// The file of the loaded object that holds `fn` (dladdr), or "" when no object does.
const char* defining_object(void* fn);

// Returns the cached real pointer in `slot`, resolving it with `resolve(name)` the first time.
template <typename Fn>
Fn cached_real(std::atomic<void*>& slot, const char* name, void* (*resolve)(const char*)) {
  void* p = slot.load(std::memory_order_acquire);
  if (KVREMAP_UNLIKELY(p == nullptr)) {
    p = resolve(name);
    if (p) slot.store(p, std::memory_order_release);
  }
  return reinterpret_cast<Fn>(p);
}

}  // namespace kvremap::interpose
