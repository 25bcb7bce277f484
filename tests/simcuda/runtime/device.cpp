// Device exports: selection, count, attributes, properties, peer access, synchronisation, versions.
#include <cstddef>

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

namespace {

// A property read from one device attribute; attributes the driver does not answer stay 0, as the
// fields of a device without that capability.
template <typename Field>
void read_attribute(Field& field, CUdevice device, CUdevice_attribute attribute) {
  int value = 0;
  if (call_driver(driver().cuDeviceGetAttribute, &value, attribute, device) == cudaSuccess)
    field = static_cast<Field>(value);
}

cudaError_t device_properties(cudaDeviceProp* prop, int ordinal) {
  if (prop == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = ensure_initialised(); e != cudaSuccess) return e;
  int n = 0;
  if (cudaError_t e = call_driver(driver().cuDeviceGetCount, &n); e != cudaSuccess) return e;
  if (ordinal < 0 || ordinal >= n) return cudaErrorInvalidDevice;
  CUdevice device = 0;
  if (cudaError_t e = call_driver(driver().cuDeviceGet, &device, ordinal); e != cudaSuccess) return e;
  *prop = cudaDeviceProp{};
  if (cudaError_t e = call_driver(driver().cuDeviceGetName, prop->name, static_cast<int>(sizeof prop->name), device);
      e != cudaSuccess)
    return e;
  CUuuid uuid{};
  if (cudaError_t e = call_driver(driver().cuDeviceGetUuid, &uuid, device); e != cudaSuccess) return e;
  static_assert(sizeof uuid.bytes == sizeof prop->uuid.bytes, "one UUID layout");
  for (std::size_t i = 0; i < sizeof uuid.bytes; ++i) prop->uuid.bytes[i] = uuid.bytes[i];
  if (cudaError_t e = call_driver(driver().cuDeviceTotalMem, &prop->totalGlobalMem, device); e != cudaSuccess)
    return e;
  read_attribute(prop->major, device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  read_attribute(prop->minor, device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  read_attribute(prop->multiProcessorCount, device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  read_attribute(prop->sharedMemPerBlock, device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  read_attribute(prop->sharedMemPerBlockOptin, device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  read_attribute(prop->sharedMemPerMultiprocessor, device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  read_attribute(prop->regsPerBlock, device, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
  read_attribute(prop->regsPerMultiprocessor, device, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  read_attribute(prop->warpSize, device, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  read_attribute(prop->maxThreadsPerBlock, device, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  read_attribute(prop->maxThreadsPerMultiProcessor, device, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  read_attribute(prop->maxBlocksPerMultiProcessor, device, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
  read_attribute(prop->maxThreadsDim[0], device, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X);
  read_attribute(prop->maxThreadsDim[1], device, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y);
  read_attribute(prop->maxThreadsDim[2], device, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z);
  read_attribute(prop->maxGridSize[0], device, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
  read_attribute(prop->maxGridSize[1], device, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
  read_attribute(prop->maxGridSize[2], device, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
  read_attribute(prop->totalConstMem, device, CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY);
  read_attribute(prop->l2CacheSize, device, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  read_attribute(prop->memoryBusWidth, device, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  read_attribute(prop->pciBusID, device, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
  read_attribute(prop->pciDeviceID, device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID);
  read_attribute(prop->pciDomainID, device, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID);
  read_attribute(prop->integrated, device, CU_DEVICE_ATTRIBUTE_INTEGRATED);
  read_attribute(prop->canMapHostMemory, device, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY);
  read_attribute(prop->concurrentKernels, device, CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS);
  read_attribute(prop->ECCEnabled, device, CU_DEVICE_ATTRIBUTE_ECC_ENABLED);
  read_attribute(prop->asyncEngineCount, device, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT);
  read_attribute(prop->unifiedAddressing, device, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING);
  read_attribute(prop->managedMemory, device, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY);
  read_attribute(prop->streamPrioritiesSupported, device, CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED);
  read_attribute(prop->cooperativeLaunch, device, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH);
  read_attribute(prop->memoryPoolsSupported, device, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED);
  read_attribute(prop->gpuDirectRDMASupported, device, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED);
  read_attribute(prop->ipcEventSupported, device, CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED);
  read_attribute(prop->hostRegisterSupported, device, CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED);
  return cudaSuccess;
}

}  // namespace

SIMCUDART_API cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device) {
  return guarded([&] { return device_properties(prop, device); });
}

// Peer access from the current device: a device is never its own peer, the simulator's devices can
// always reach each other (context.cpp keeps which pairs are enabled).
SIMCUDART_API cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags) {
  return guarded([&] {
    if (flags != 0) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    int can = 0;
    if (cudaError_t e = call_driver(driver().cuDeviceCanAccessPeer, &can, current_device(), peerDevice);
        e != cudaSuccess)
      return e;
    if (!can) return cudaErrorInvalidDevice;
    return set_peer_access(current_device(), peerDevice, true);
  });
}

SIMCUDART_API cudaError_t cudaDeviceDisablePeerAccess(int peerDevice) {
  return guarded([&] {
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    int n = 0;
    if (cudaError_t e = call_driver(driver().cuDeviceGetCount, &n); e != cudaSuccess) return e;
    if (peerDevice < 0 || peerDevice >= n) return cudaErrorInvalidDevice;
    return set_peer_access(current_device(), peerDevice, false);
  });
}
