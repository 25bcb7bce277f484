// dlsym/dlvsym hooks: lookups of hooked driver exports on libcuda's handle get kvremap's wrappers.
// No <dlfcn.h>: it declares dlsym's arguments nonnull, which would let the compiler drop the null
// checks below; a broken caller must reach libc's own behaviour, not a crash in kvremap.
#include <cstdint>

#include "interpose/hooks/driver_hooks.h"
#include "interpose/hooks/hook_export.h"
#include "interpose/driver/real.h"

namespace {

using namespace kvremap::interpose;

// <dlfcn.h>'s pseudo-handles on glibc.
void* const kRtldNext = reinterpret_cast<void*>(static_cast<std::intptr_t>(-1));
void* const kRtldDefault = nullptr;

// Out of line so the hooks below stay small enough to end in a tail call.
__attribute__((noinline)) void* cuda_wrapper(void* handle, const char* name, const char* version) {
  if (handle == kRtldNext || handle == kRtldDefault || name[0] != 'c' || name[1] != 'u') return nullptr;
  const DriverHook* hook = hook_for_export(name);
  if (!hook || handle != cuda_driver_handle()) return nullptr;
  void* real = version ? libc_dlvsym()(handle, name, version) : libc_dlsym()(handle, name);
  if (!real) return nullptr;
  if (!is_own_wrapper(real)) hook->real->store(real, std::memory_order_release);
  return hook->wrapper;
}

}  // namespace

// Everything else goes to libc's dlsym as a tail call, so libc sees the original caller's return
// address: RTLD_NEXT is resolved relative to the object that called dlsym, not to kvremap.
KVREMAP_HOOK void* dlsym(void* handle, const char* name) {
  if (name)
    if (void* wrapper = cuda_wrapper(handle, name, nullptr)) return wrapper;
  return libc_dlsym()(handle, name);
}

KVREMAP_HOOK void* dlvsym(void* handle, const char* name, const char* version) {
  if (name && version)
    if (void* wrapper = cuda_wrapper(handle, name, version)) return wrapper;
  return libc_dlvsym()(handle, name, version);
}
