// Device management and version exports: device selection, count, attributes, synchronisation.
#include "context.h"
#include "export.h"

using namespace simcudart;

namespace {

cudaError_t device_count(int* count) {
  if (cudaError_t e = ensure_initialised(); e != cudaSuccess) return e;
  return call_driver(driver().cuDeviceGetCount, count);
}

}  // namespace

SIMCUDART_API cudaError_t cudaGetDeviceCount(int* count) {
  return guarded([&] {
    if (count == nullptr) return cudaErrorInvalidValue;
    *count = 0;  // what the real runtime reports when initialisation fails (no driver/device)
    int n = 0;
    const cudaError_t e = device_count(&n);
    if (e == cudaSuccess) *count = n;
    return e;
  });
}

SIMCUDART_API cudaError_t cudaGetDevice(int* device) {
  return guarded([&] {
    if (device == nullptr) return cudaErrorInvalidValue;
    *device = current_device();
    return cudaSuccess;
  });
}

// Since CUDA 12 cudaSetDevice initialises the device's primary context at once instead of on the
// next call, so its errors (and its memory) show up here.
SIMCUDART_API cudaError_t cudaSetDevice(int device) {
  return guarded([&] {
    int n = 0;
    if (cudaError_t e = device_count(&n); e != cudaSuccess) return e;
    if (device < 0 || device >= n) return cudaErrorInvalidDevice;
    select_device(device);
    return ensure_context();
  });
}

SIMCUDART_API cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int device) {
  return guarded([&] {
    if (value == nullptr) return cudaErrorInvalidValue;
    // cudaDeviceAttr and CUdevice_attribute share their numbering (checked against the CUDA 13
    // headers), so every runtime attribute forwards unchanged; the driver judges support.
    const int attribute = enum_value(attr);
    if (attribute < 1 || attribute >= static_cast<int>(cudaDevAttrMax)) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_initialised(); e != cudaSuccess) return e;
    int n = 0;
    if (cudaError_t e = call_driver(driver().cuDeviceGetCount, &n); e != cudaSuccess) return e;
    if (device < 0 || device >= n) return cudaErrorInvalidDevice;
    CUdevice handle = 0;
    if (cudaError_t e = call_driver(driver().cuDeviceGet, &handle, device); e != cudaSuccess) return e;
    return call_driver(driver().cuDeviceGetAttribute, value, static_cast<CUdevice_attribute>(attribute), handle);
  });
}

SIMCUDART_API cudaError_t cudaDeviceSynchronize(void) {
  return guarded([&] {
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    return call_driver(driver().cuCtxSynchronize);
  });
}

// Needs no cuInit (the real one answers even before initialisation); 0 when there is no driver.
SIMCUDART_API cudaError_t cudaDriverGetVersion(int* driverVersion) {
  return guarded([&] {
    if (driverVersion == nullptr) return cudaErrorInvalidValue;
    *driverVersion = 0;
    const DriverTable* t = driver_table();
    if (t == nullptr) return cudaSuccess;
    int version = 0;
    const cudaError_t e = call_driver(t->cuDriverGetVersion, &version);
    if (e == cudaSuccess) *driverVersion = version;
    return e;
  });
}

SIMCUDART_API cudaError_t cudaRuntimeGetVersion(int* runtimeVersion) {
  return guarded([&] {
    if (runtimeVersion == nullptr) return cudaErrorInvalidValue;
    *runtimeVersion = CUDART_VERSION;
    return cudaSuccess;
  });
}
