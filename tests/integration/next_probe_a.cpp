// Test library A for RTLD_NEXT semantics: finds the next definition of probe_value after itself.
#include <dlfcn.h>

extern "C" __attribute__((visibility("default"))) int probe_value() { return 1; }

extern "C" __attribute__((visibility("default"))) int next_probe_value() {
  auto next = reinterpret_cast<int (*)()>(dlsym(RTLD_NEXT, "probe_value"));
  return next ? next() : -1;
}
