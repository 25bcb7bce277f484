// Resolves the driver functions kvremap calls for itself through libcuda's own cuGetProcAddress.
#include "interpose/driver/driver_api.h"

#include <cuda.h>

#include <atomic>

#include "interpose/base/hot_path.h"
#include "interpose/driver/real.h"

namespace kvremap::interpose {
namespace {

// Resolved once libcuda is loaded, each at the version of the ABI this file calls.
template <typename Fn>
Fn resolve(std::atomic<void*>& slot, const char* base_name, int version) {
  void* p = slot.load(std::memory_order_acquire);
  if (p) return reinterpret_cast<Fn>(p);
  ProcAddressFn gpa = real_proc_address();
  if (!gpa) return nullptr;
  void* fn = nullptr;
  int status = 0;
  if (gpa(base_name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &status) != 0 || !fn) return nullptr;
  slot.store(fn, std::memory_order_release);
  return reinterpret_cast<Fn>(fn);
}

std::atomic<void*> g_ctx_get_device{nullptr};
std::atomic<void*> g_mem_get_info{nullptr};
std::atomic<void*> g_device_total{nullptr};
std::atomic<void*> g_proc_address{nullptr};
std::atomic<void*> g_device_count{nullptr};
std::atomic<void*> g_device_name{nullptr};
std::atomic<void*> g_driver_version{nullptr};

}  // namespace

ProcAddressFn real_proc_address() {
  void* p = g_proc_address.load(std::memory_order_acquire);
  if (!p) {
    p = driver_export("cuGetProcAddress_v2");
    if (!p) return nullptr;
    g_proc_address.store(p, std::memory_order_release);
  }
  return reinterpret_cast<ProcAddressFn>(p);
}

int current_device() {
  auto fn = resolve<CUresult (*)(CUdevice*)>(g_ctx_get_device, "cuCtxGetDevice", 2000);
  CUdevice device = -1;
  if (!fn || fn(&device) != CUDA_SUCCESS) return -1;
  return device;
}

namespace driver_api_detail {
bool count_devices() {
  // The count is fixed for the process's life (CUDA_VISIBLE_DEVICES is read at initialisation).
  auto fn = resolve<CUresult (*)(int*)>(g_device_count, "cuDeviceGetCount", 2000);
  int devices = 0;
  if (!fn || fn(&devices) != CUDA_SUCCESS || devices <= 0) return false;
  g_devices.store(devices, std::memory_order_relaxed);
  return devices == 1;
}
}  // namespace driver_api_detail

bool real_memory_info(std::size_t* free_bytes, std::size_t* total_bytes) {
  auto fn = resolve<CUresult (*)(size_t*, size_t*)>(g_mem_get_info, "cuMemGetInfo", 3020);
  return fn && fn(free_bytes, total_bytes) == CUDA_SUCCESS;
}

std::uint64_t real_device_total(int device) {
  auto fn = resolve<CUresult (*)(size_t*, CUdevice)>(g_device_total, "cuDeviceTotalMem", 3020);
  size_t bytes = 0;
  if (!fn || fn(&bytes, device) != CUDA_SUCCESS) return 0;
  return bytes;
}

std::string real_device_name(int device) {
  auto fn = resolve<CUresult (*)(char*, int, CUdevice)>(g_device_name, "cuDeviceGetName", 2000);
  char name[256] = {};
  if (!fn || fn(name, sizeof name - 1, device) != CUDA_SUCCESS) return {};
  return name;
}

int real_driver_version() {
  auto fn = resolve<CUresult (*)(int*)>(g_driver_version, "cuDriverGetVersion", 2020);
  int version = 0;
  if (!fn || fn(&version) != CUDA_SUCCESS) return 0;
  return version;
}

}  // namespace kvremap::interpose
