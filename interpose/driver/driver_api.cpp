// The real driver functions kvremap calls for itself, each in a typed slot resolved once through libcuda's
// cuGetProcAddress.
#include "interpose/driver/driver_api.h"

#include <atomic>
#include <optional>
#include <vector>

#include "interpose/base/hot_path.h"
#include "interpose/driver/real.h"

namespace kvremap::interpose {
namespace {

// One driver function at the ABI version this file calls, typed by the toolkit's PFN declaration.
// Resolved at first use (libcuda may be loaded after this library), then one acquire load.
template <typename Pfn>
class Slot {
 public:
  constexpr Slot(const char* name, int version) : name_(name), version_(version) {}
  Pfn get() {
    void* p = fn_.load(std::memory_order_acquire);
    if (KVREMAP_LIKELY(p != nullptr)) return reinterpret_cast<Pfn>(p);
    ProcAddressFn gpa = real_proc_address();
    if (!gpa) return nullptr;
    CUdriverProcAddressQueryResult status{};
    if (gpa(name_, &p, version_, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS || !p) return nullptr;
    fn_.store(p, std::memory_order_release);
    return reinterpret_cast<Pfn>(p);
  }

 private:
  const char* name_;
  int version_;
  std::atomic<void*> fn_{nullptr};
};

constinit Slot<PFN_cuCtxGetDevice_v2000> g_ctx_get_device{"cuCtxGetDevice", 2000};
constinit Slot<PFN_cuMemGetInfo_v3020> g_mem_get_info{"cuMemGetInfo", 3020};
constinit Slot<PFN_cuDeviceTotalMem_v3020> g_device_total{"cuDeviceTotalMem", 3020};
constinit Slot<PFN_cuDeviceGetCount_v2000> g_device_count{"cuDeviceGetCount", 2000};
constinit Slot<PFN_cuDeviceGetName_v2000> g_device_name{"cuDeviceGetName", 2000};
constinit Slot<PFN_cuDriverGetVersion_v2020> g_driver_version{"cuDriverGetVersion", 2020};
constinit Slot<PFN_cuCtxSynchronize_v2000> g_synchronize{"cuCtxSynchronize", 2000};
constinit Slot<PFN_cuDeviceGetAttribute_v2000> g_attribute{"cuDeviceGetAttribute", 2000};
constinit Slot<PFN_cuMemGetAllocationGranularity_v10020> g_granularity{"cuMemGetAllocationGranularity", 10020};
constinit Slot<PFN_cuGetErrorName_v6000> g_error_name{"cuGetErrorName", 6000};
constinit Slot<PFN_cuMemAddressReserve_v10020> g_address_reserve{"cuMemAddressReserve", 10020};
constinit Slot<PFN_cuMemAddressFree_v10020> g_address_free{"cuMemAddressFree", 10020};
constinit Slot<PFN_cuMemCreate_v10020> g_create{"cuMemCreate", 10020};
constinit Slot<PFN_cuMemRelease_v10020> g_release{"cuMemRelease", 10020};
constinit Slot<PFN_cuMemMap_v10020> g_map{"cuMemMap", 10020};
constinit Slot<PFN_cuMemUnmap_v10020> g_unmap{"cuMemUnmap", 10020};
constinit Slot<PFN_cuMemSetAccess_v10020> g_set_access{"cuMemSetAccess", 10020};
constinit Slot<PFN_cuMemsetD8_v3020> g_memset_d8{"cuMemsetD8", 3020};
constinit Slot<PFN_cuFuncGetParamInfo_v12040> g_func_param_info{"cuFuncGetParamInfo", 12040};
constinit Slot<PFN_cuKernelGetParamInfo_v12040> g_kernel_param_info{"cuKernelGetParamInfo", 12040};
constinit Slot<PFN_cuFuncGetName_v12030> g_func_name{"cuFuncGetName", 12030};
constinit Slot<PFN_cuKernelGetName_v12030> g_kernel_name{"cuKernelGetName", 12030};

std::atomic<void*> g_proc_address{nullptr};

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
  auto fn = g_ctx_get_device.get();
  CUdevice device = -1;
  if (!fn || fn(&device) != CUDA_SUCCESS) return -1;
  return device;
}

namespace driver_api_detail {
bool count_devices() {
  // The count is fixed for the process's life (CUDA_VISIBLE_DEVICES is read at initialisation).
  auto fn = g_device_count.get();
  int devices = 0;
  if (!fn || fn(&devices) != CUDA_SUCCESS || devices <= 0) return false;
  g_devices.store(devices, std::memory_order_relaxed);
  return devices == 1;
}
}  // namespace driver_api_detail

bool real_memory_info(std::size_t* free_bytes, std::size_t* total_bytes) {
  auto fn = g_mem_get_info.get();
  return fn && fn(free_bytes, total_bytes) == CUDA_SUCCESS;
}

std::uint64_t real_device_total(int device) {
  auto fn = g_device_total.get();
  size_t bytes = 0;
  if (!fn || fn(&bytes, device) != CUDA_SUCCESS) return 0;
  return bytes;
}

std::string real_device_name(int device) {
  auto fn = g_device_name.get();
  char name[256] = {};
  if (!fn || fn(name, sizeof name - 1, device) != CUDA_SUCCESS) return {};
  return name;
}

int real_driver_version() {
  auto fn = g_driver_version.get();
  int version = 0;
  if (!fn || fn(&version) != CUDA_SUCCESS) return 0;
  return version;
}

bool real_synchronize() {
  auto fn = g_synchronize.get();
  return fn && fn() == CUDA_SUCCESS;
}

int real_device_attribute(CUdevice_attribute attribute, int device) {
  auto fn = g_attribute.get();
  int value = 0;
  if (!fn || fn(&value, attribute, device) != CUDA_SUCCESS) return -1;
  return value;
}

bool real_host_vmm_supported(int device) {
  return real_device_attribute(CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device) > 0;
}

std::uint64_t real_vmm_granularity(int device) {
  auto fn = g_granularity.get();
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  size_t granule = 0;
  if (!fn || fn(&granule, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS) return 0;
  return granule;
}

std::optional<std::vector<ParamPlace>> real_parameter_layout(CUfunction function) {
  // cudaLaunchKernel of a cudaKernel_t hands the driver a CUkernel where a CUfunction is expected: the
  // function family answers for a function, the kernel family for a kernel.
  for (int family = 0; family < 2; ++family) {
    std::vector<ParamPlace> layout;
    CUresult r = CUDA_SUCCESS;
    for (std::size_t i = 0;; ++i) {
      ParamPlace p;
      if (family == 0) {
        auto fn = g_func_param_info.get();
        r = fn ? fn(function, i, &p.offset, &p.size) : CUDA_ERROR_NOT_SUPPORTED;
      } else {
        auto fn = g_kernel_param_info.get();
        r = fn ? fn(reinterpret_cast<CUkernel>(function), i, &p.offset, &p.size) : CUDA_ERROR_NOT_SUPPORTED;
      }
      if (r != CUDA_SUCCESS) break;
      layout.push_back(p);
      // The parameter area is at most 32764 bytes (CUDA 12.1 and later): no more parameters than that.
      if (layout.size() > 32764) return std::nullopt;
    }
    // INVALID_VALUE past the last parameter ends a layout; for index 0 it is also what a handle of the
    // other family gets, so an empty layout is only believed once the kernel family agrees.
    if (r == CUDA_ERROR_INVALID_VALUE && (!layout.empty() || family == 1)) return layout;
  }
  return std::nullopt;
}

std::string real_function_name(CUfunction function) {
  const char* name = nullptr;
  if (auto fn = g_func_name.get(); fn && fn(&name, function) == CUDA_SUCCESS && name) return name;
  if (auto fn = g_kernel_name.get(); fn && fn(&name, reinterpret_cast<CUkernel>(function)) == CUDA_SUCCESS && name)
    return name;
  return {};
}

std::string real_error_name(CUresult error) {
  auto fn = g_error_name.get();
  const char* name = nullptr;
  if (fn && fn(error, &name) == CUDA_SUCCESS && name) return name;
  return "unknown error";
}

VmmFunctions real_vmm_functions() {
  VmmFunctions f;
  f.address_reserve = g_address_reserve.get();
  f.address_free = g_address_free.get();
  f.create = g_create.get();
  f.release = g_release.get();
  f.map = g_map.get();
  f.unmap = g_unmap.get();
  f.set_access = g_set_access.get();
  f.memset_d8 = g_memset_d8.get();
  return f;
}

}  // namespace kvremap::interpose
