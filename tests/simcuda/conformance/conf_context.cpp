// Conformance client: contexts — primary retain/release/reset, created contexts, push/pop, destroyed while current.
#include <cstdio>

#include "conformance.h"

using conf::handle;

namespace {

std::string current() {
  CUcontext c = nullptr;
  const CUresult r = cuCtxGetCurrent(&c);
  return r == CUDA_SUCCESS ? handle("C", c) : conf::res(r);
}

void print_current() { conf::line("current=%s", current().c_str()); }

void primary_state(CUdevice dev) {
  unsigned int flags = 99;
  int active = -1;
  const CUresult r = cuDevicePrimaryCtxGetState(dev, &flags, &active);
  CALL("cuDevicePrimaryCtxGetState", "device=0", r,
       "flags=" + std::to_string(flags) + " active=" + std::to_string(active));
}

}  // namespace

int main() {
  CUcontext none = nullptr;
  CALL("cuCtxGetCurrent", "before cuInit", cuCtxGetCurrent(&none));
  CUdeviceptr p = 0;
  CALL("cuMemAlloc", "4096 before cuInit", cuMemAlloc(&p, 4096));
  CALL("cuInit", "0", cuInit(0));
  int count = -1;
  CALL("cuDeviceGetCount", "", cuDeviceGetCount(&count), "count>=1=" + std::to_string(count >= 1));
  CUdevice dev = -1;
  CALL("cuDeviceGet", "0", cuDeviceGet(&dev, 0), "device=" + std::to_string(dev));
  CUdevice bad = -1;
  CALL("cuDeviceGet", "count", cuDeviceGet(&bad, count));
  print_current();
  CALL("cuMemAlloc", "4096 no current context", cuMemAlloc(&p, 4096));

  // Primary context: reference counted, inactive until retained.
  primary_state(dev);
  CUcontext primary = nullptr;
  CALL("cuDevicePrimaryCtxRetain", "device=0", cuDevicePrimaryCtxRetain(&primary, dev), "ctx=" + handle("C", primary));
  primary_state(dev);
  CUcontext again = nullptr;
  CALL("cuDevicePrimaryCtxRetain", "device=0", cuDevicePrimaryCtxRetain(&again, dev), "ctx=" + handle("C", again));
  print_current();
  CALL("cuCtxSetCurrent", handle("C", primary), cuCtxSetCurrent(primary));
  print_current();
  CUdevice got = -1;
  CALL("cuCtxGetDevice", "", cuCtxGetDevice(&got), "device=" + std::to_string(got));
  unsigned int version = 0;
  CALL("cuCtxGetApiVersion", handle("C", primary), cuCtxGetApiVersion(primary, &version),
       "version>=3020=" + std::to_string(version >= 3020));
  unsigned int flags = 99;
  CALL("cuCtxGetFlags", "", cuCtxGetFlags(&flags), "flags=" + std::to_string(flags));
  CALL("cuCtxSynchronize", "", cuCtxSynchronize());

  // Flags: stored while inactive or active (_v2), reported by GetState.
  CALL("cuDevicePrimaryCtxSetFlags", "device=0 CU_CTX_SCHED_BLOCKING_SYNC",
       cuDevicePrimaryCtxSetFlags(dev, CU_CTX_SCHED_BLOCKING_SYNC));
  primary_state(dev);
  CALL("cuDevicePrimaryCtxSetFlags", "device=0 0x80000", cuDevicePrimaryCtxSetFlags(dev, 0x80000));
  CALL("cuDevicePrimaryCtxRelease", "device=0", cuDevicePrimaryCtxRelease(dev));
  primary_state(dev);

  // Reset: frees the primary context's allocations; the handle stays valid.
  CUdeviceptr before_reset = 0;
  CUresult r = cuMemAlloc(&before_reset, 1 << 20);
  CALL("cuMemAlloc", "1048576", r, "dptr=" + conf::add_block("D", before_reset, 1 << 20));
  CALL("cuDevicePrimaryCtxReset", "device=0", cuDevicePrimaryCtxReset(dev));
  primary_state(dev);
  CALL("cuMemFree", conf::ptr(before_reset) + " after reset", cuMemFree(before_reset));
  CALL("cuDevicePrimaryCtxRelease", "device=0", cuDevicePrimaryCtxRelease(dev));
  primary_state(dev);
  CALL("cuDevicePrimaryCtxRetain", "device=0", cuDevicePrimaryCtxRetain(&again, dev), "ctx=" + handle("C", again));
  CALL("cuCtxSetCurrent", handle("C", again), cuCtxSetCurrent(again));
  primary_state(dev);

  // Push and pop form a per-thread stack.
  CUcontext popped = nullptr;
  CALL("cuCtxPopCurrent", "", cuCtxPopCurrent(&popped), "ctx=" + handle("C", popped));
  print_current();
  CALL("cuCtxPopCurrent", "empty stack", cuCtxPopCurrent(&popped));
  CALL("cuCtxPushCurrent", handle("C", primary), cuCtxPushCurrent(primary));
  CALL("cuCtxPushCurrent", handle("C", primary), cuCtxPushCurrent(primary));
  CALL("cuCtxPopCurrent", "", cuCtxPopCurrent(&popped), "ctx=" + handle("C", popped));
  print_current();

  // A created context is pushed over the current one and popped when destroyed.
  CUcontext created = nullptr;
  r = cuCtxCreate(&created, nullptr, 0, dev);
  CALL("cuCtxCreate", "params=null flags=0 device=0", r, "ctx=" + handle("C", created));
  print_current();
  CALL("cuCtxGetFlags", "", cuCtxGetFlags(&flags), "flags=" + std::to_string(flags));
  CUdeviceptr owned = 0;
  r = cuMemAlloc(&owned, 4096);
  CALL("cuMemAlloc", "4096", r, "dptr=" + conf::add_block("D", owned, 4096));
  CUcontext owner = nullptr;
  r = cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, owned);
  CALL("cuPointerGetAttribute", "CONTEXT " + conf::ptr(owned), r, "ctx=" + handle("C", owner));
  CALL("cuCtxPopCurrent", "", cuCtxPopCurrent(&popped), "ctx=" + handle("C", popped));
  print_current();
  CALL("cuCtxPushCurrent", handle("C", created), cuCtxPushCurrent(created));
  CALL("cuCtxDestroy", handle("C", created) + " current", cuCtxDestroy(created));
  print_current();
  // Nothing here passes a destroyed or forged handle: cuda.h leaves that undefined (a real driver may crash).

  // A created context made current with SetCurrent, then destroyed.
  CUcontext second = nullptr;
  r = cuCtxCreate(&second, nullptr, CU_CTX_SCHED_SPIN, dev);
  CALL("cuCtxCreate", "params=null CU_CTX_SCHED_SPIN device=0", r, "ctx=" + handle("C", second));
  CALL("cuCtxGetFlags", "", cuCtxGetFlags(&flags), "flags=" + std::to_string(flags));
  CALL("cuCtxCreate", "params=null flags=0 device=count", cuCtxCreate(&created, nullptr, 0, count));
  CALL("cuCtxCreate", "params=null flags=0x80000000 device=0", cuCtxCreate(&created, nullptr, 0x80000000u, dev));
  CALL("cuCtxDestroy", handle("C", second), cuCtxDestroy(second));
  print_current();
  CALL("cuDevicePrimaryCtxRelease", "device=0", cuDevicePrimaryCtxRelease(dev));
  CALL("cuDevicePrimaryCtxRelease", "device=0 not retained", cuDevicePrimaryCtxRelease(dev));
  primary_state(dev);
  return 0;
}
