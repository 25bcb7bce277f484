// Conformance client: virtual memory management — granularity, reserve/create/map/set-access/unmap/release,
// POSIX fd export and import, properties from a handle, and the documented errors.
#include <unistd.h>

#include <string>

#include "conformance.h"

using conf::handle;
using conf::ptr;

namespace {

CUmemAllocationProp device_prop(CUmemAllocationHandleType types) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = types;
  return prop;
}

// Every field cuMemCreate takes, as numbers.
std::string properties(const CUmemAllocationProp& p) {
  return "type=" + std::to_string(p.type) + " location.type=" + std::to_string(p.location.type) +
         " location.id=" + std::to_string(p.location.id) + " requestedHandleTypes=" + std::to_string(p.requestedHandleTypes) +
         " gpuDirectRDMACapable=" + std::to_string(p.allocFlags.gpuDirectRDMACapable);
}

CUmemAccessDesc rw() {
  CUmemAccessDesc d{};
  d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  d.location.id = 0;
  d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return d;
}

}  // namespace

int main() {
  conf::primary_context();
  int vmm = -1;
  CALL("cuDeviceGetAttribute", "VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED device=0",
       cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0), "value=" + std::to_string(vmm));
  int fd_supported = -1;
  CALL("cuDeviceGetAttribute", "HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED device=0",
       cuDeviceGetAttribute(&fd_supported, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0),
       "value=" + std::to_string(fd_supported));

  CUmemAllocationProp prop = device_prop(CU_MEM_HANDLE_TYPE_NONE);
  size_t gran = 0, rec = 0;
  CALL("cuMemGetAllocationGranularity", "device MINIMUM",
       cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "granularity=" + std::to_string(gran));
  CALL("cuMemGetAllocationGranularity", "device RECOMMENDED",
       cuMemGetAllocationGranularity(&rec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
       "multiple of minimum=" + std::to_string(gran != 0 && rec % gran == 0));
  size_t g2 = 0;
  CALL("cuMemGetAllocationGranularity", "option 7", cuMemGetAllocationGranularity(&g2, &prop, static_cast<CUmemAllocationGranularity_flags>(7)));
  if (gran == 0) return 0;

  // Reserve, create, map, set access, use, unmap, release, free.
  CUdeviceptr va = 0;
  CALL("cuMemAddressReserve", "4*granularity align=0 addr=0", cuMemAddressReserve(&va, 4 * gran, 0, 0, 0),
       "va=" + conf::add_block("V", va, 4 * gran));
  CUdeviceptr bad_va = 0;
  CALL("cuMemAddressReserve", "granularity+1", cuMemAddressReserve(&bad_va, gran + 1, 0, 0, 0));
  CALL("cuMemAddressReserve", "size 0", cuMemAddressReserve(&bad_va, 0, 0, 0, 0));
  CUmemGenericAllocationHandle h = 0;
  CALL("cuMemCreate", "2*granularity device=0", cuMemCreate(&h, 2 * gran, &prop, 0), "handle=" + handle("P", h));
  CUmemGenericAllocationHandle bad_h = 0;
  CALL("cuMemCreate", "granularity+1", cuMemCreate(&bad_h, gran + 1, &prop, 0));
  CALL("cuMemCreate", "flags=1", cuMemCreate(&bad_h, gran, &prop, 1));
  CUmemAllocationProp bad_prop = prop;
  bad_prop.location.id = 64;
  CALL("cuMemCreate", "device=64", cuMemCreate(&bad_h, gran, &bad_prop, 0));

  CUmemAllocationProp got{};
  CALL("cuMemGetAllocationPropertiesFromHandle", handle("P", h), cuMemGetAllocationPropertiesFromHandle(&got, h),
       properties(got));

  CALL("cuMemMap", ptr(va + gran) + " 2*granularity offset=1", cuMemMap(va + gran, 2 * gran, 1, h, 0));
  CALL("cuMemMap", ptr(va + gran) + " granularity (part of the handle)", cuMemMap(va + gran, gran, 0, h, 0));
  CALL("cuMemMap", ptr(va + gran) + " 2*granularity " + handle("P", h), cuMemMap(va + gran, 2 * gran, 0, h, 0));
  CALL("cuMemMap", ptr(va + gran) + " again", cuMemMap(va + gran, 2 * gran, 0, h, 0));
  CALL("cuMemRelease", handle("P", h) + " while mapped", cuMemRelease(h));
  unsigned long long access = 99;
  CUmemLocation loc{};
  loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
  loc.id = 0;
  CALL("cuMemGetAccess", ptr(va + gran) + " before set-access", cuMemGetAccess(&access, &loc, va + gran),
       "flags=" + std::to_string(access));
  const CUmemAccessDesc desc = rw();
  CALL("cuMemSetAccess", ptr(va + gran) + " 2*granularity READWRITE", cuMemSetAccess(va + gran, 2 * gran, &desc, 1));
  CALL("cuMemGetAccess", ptr(va + gran + 4096), cuMemGetAccess(&access, &loc, va + gran + 4096),
       "flags=" + std::to_string(access));
  CALL("cuMemGetAccess", ptr(va) + " unmapped", cuMemGetAccess(&access, &loc, va));
  CUmemLocation far = loc;
  far.id = 64;
  CALL("cuMemGetAccess", ptr(va + gran) + " device=64", cuMemGetAccess(&access, &far, va + gran));
  CALL("cuMemSetAccess", ptr(va) + " unmapped", cuMemSetAccess(va, gran, &desc, 1));
  CALL("cuMemsetD8", ptr(va + gran + 8) + " 0x6b 4", cuMemsetD8(va + gran + 8, 0x6b, 4));
  unsigned char back[4] = {};
  CALL("cuMemcpyDtoH", ptr(va + gran + 8) + " 4", cuMemcpyDtoH(back, va + gran + 8, 4), "bytes=" + conf::hex(back, 4));
  CUdeviceptr base = 0;
  size_t size = 0;
  CALL("cuMemGetAddressRange", ptr(va + gran + 4096), cuMemGetAddressRange(&base, &size, va + gran + 4096),
       "base=" + ptr(base) + " size=" + std::to_string(size));
  CUmemGenericAllocationHandle retained = 0;
  CALL("cuMemRetainAllocationHandle", ptr(va + gran + 4096),
       cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(va + gran + 4096)), "handle=" + handle("P", retained));
  CALL("cuMemRelease", handle("P", retained) + " retained", cuMemRelease(retained));
  CALL("cuMemAddressFree", ptr(va) + " with a mapping", cuMemAddressFree(va, 4 * gran));
  CALL("cuMemUnmap", ptr(va + gran) + " granularity (half a mapping)", cuMemUnmap(va + gran, gran));
  CALL("cuMemUnmap", ptr(va + gran) + " 2*granularity", cuMemUnmap(va + gran, 2 * gran));
  CALL("cuMemAddressFree", ptr(va) + " 4*granularity", cuMemAddressFree(va, 4 * gran));

  // Shareable handles: a POSIX fd exported and imported again.
  CUmemAllocationProp fd_prop = device_prop(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  fd_prop.allocFlags.gpuDirectRDMACapable = 1;
  CUmemGenericAllocationHandle exported = 0;
  CALL("cuMemCreate", "granularity POSIX_FILE_DESCRIPTOR gpuDirectRDMACapable", cuMemCreate(&exported, gran, &fd_prop, 0),
       "handle=" + handle("P", exported));
  CALL("cuMemGetAllocationPropertiesFromHandle", handle("P", exported), cuMemGetAllocationPropertiesFromHandle(&got, exported),
       properties(got));
  int fd = -1;
  CALL("cuMemExportToShareableHandle", handle("P", exported) + " POSIX_FILE_DESCRIPTOR",
       cuMemExportToShareableHandle(&fd, exported, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
       "fd>=0=" + std::to_string(fd >= 0));
  CUmemGenericAllocationHandle imported = 0;
  CALL("cuMemImportFromShareableHandle", "fd POSIX_FILE_DESCRIPTOR",
       cuMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)),
                                      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
       "handle is a new one=" + std::to_string(imported != 0));
  got = CUmemAllocationProp{};
  CALL("cuMemGetAllocationPropertiesFromHandle", "imported", cuMemGetAllocationPropertiesFromHandle(&got, imported),
       properties(got));
  if (fd >= 0) close(fd);
  int fd2 = -1;
  CUmemGenericAllocationHandle plain = 0;
  CALL("cuMemCreate", "granularity no handle types", cuMemCreate(&plain, gran, &prop, 0), "handle=" + handle("P", plain));
  CALL("cuMemExportToShareableHandle", handle("P", plain) + " POSIX_FILE_DESCRIPTOR",
       cuMemExportToShareableHandle(&fd2, plain, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  CALL("cuMemRelease", handle("P", plain), cuMemRelease(plain));
  CALL("cuMemGetAllocationPropertiesFromHandle", handle("P", plain) + " released",
       cuMemGetAllocationPropertiesFromHandle(&got, plain));
  CALL("cuMemGetAllocationPropertiesFromHandle", "prop=NULL", cuMemGetAllocationPropertiesFromHandle(nullptr, exported));
  CALL("cuMemRelease", "imported", cuMemRelease(imported));
  CALL("cuMemRelease", handle("P", exported), cuMemRelease(exported));
  return 0;
}
