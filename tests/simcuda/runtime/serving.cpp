// simcudart_mark_serving: reaches the simulated driver's serving oracle from programs linked only against the runtime.
//
// The runtime opens libcuda.so.1 with RTLD_LOCAL, so a program that does not link the driver itself
// cannot find simcuda_mark_serving with dlsym(RTLD_DEFAULT). This control looks it up on the driver's
// handle only when called, so the runtime's own resolution path (one dlsym, then cuGetProcAddress)
// stays what an interposer sees.
#include <dlfcn.h>

#include "driver_table.h"
#include "export.h"
#include "simcudart.h"

SIMCUDART_API int simcudart_mark_serving(void) {
  // The driver the runtime resolved from: same SONAME, same handle (dlopen counts references).
  if (simcudart::driver_table() == nullptr) return -1;
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (driver == nullptr) return -1;
  using MarkFn = int (*)(void);
  auto mark = reinterpret_cast<MarkFn>(dlsym(driver, "simcuda_mark_serving"));
  // Closing drops only this call's reference; the runtime's own keeps the driver loaded.
  dlclose(driver);
  return mark != nullptr ? mark() : -1;  // -1: a driver without the oracle (the real libcuda)
}
