// Finds real functions: libc's dlsym by reading libc's symbol table, then libcudart/libcuda definitions.
#include "interpose/real.h"

#include <dlfcn.h>

#include "interpose/elf_symbol.h"

namespace kvremap::interpose {

DlsymFn libc_dlsym() {
  static const DlsymFn fn = reinterpret_cast<DlsymFn>(find_symbol_in_object("libc.so.6", "dlsym"));
  return fn;
}

DlvsymFn libc_dlvsym() {
  static const DlvsymFn fn = reinterpret_cast<DlvsymFn>(find_symbol_in_object("libc.so.6", "dlvsym"));
  return fn;
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

}  // namespace kvremap::interpose
