// Finds real functions: libc's dlsym by reading libc's symbol table, then libcudart/libcuda definitions.
#include "interpose/driver/real.h"

#include <dlfcn.h>

#include "interpose/driver/elf_symbol.h"

namespace kvremap::interpose {

namespace {

// Cached without a function-local static: its guard (__cxa_guard_acquire) is intercepted by
// ThreadSanitizer, and the first lookup happens inside the sanitizer's own start-up. Two threads
// racing here both store the same address.
void* libc_function(std::atomic<void*>& slot, const char* name) {
  void* fn = slot.load(std::memory_order_acquire);
  if (!fn) {
    fn = find_symbol_in_object("libc.so.6", name);
    slot.store(fn, std::memory_order_release);
  }
  return fn;
}

}  // namespace

DlsymFn libc_dlsym() {
  static constinit std::atomic<void*> slot{nullptr};
  return reinterpret_cast<DlsymFn>(libc_function(slot, "dlsym"));
}

DlvsymFn libc_dlvsym() {
  static constinit std::atomic<void*> slot{nullptr};
  return reinterpret_cast<DlvsymFn>(libc_function(slot, "dlvsym"));
}

void* cuda_driver_handle() {
  static std::atomic<void*> handle{nullptr};
  void* h = handle.load(std::memory_order_acquire);
  if (h) return h;
  // RTLD_NOLOAD: only find it once someone (cudart, the program) has loaded it. The reference this
  // takes is kept on purpose: libcuda is never unloaded while CUDA is in use.
  h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (h) handle.store(h, std::memory_order_release);
  return h;
}

void* next_definition(const char* name) {
  DlsymFn real = libc_dlsym();
  return real ? real(RTLD_NEXT, name) : nullptr;
}

void* driver_export(const char* name) {
  DlsymFn real = libc_dlsym();
  if (!real) return nullptr;
  if (void* h = cuda_driver_handle()) return real(h, name);
  return real(RTLD_NEXT, name);
}

const char* defining_object(void* fn) {
  Dl_info info{};
  if (fn == nullptr || dladdr(fn, &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

}  // namespace kvremap::interpose
