// Conformance client: host memory (cuMemHostAlloc, cuMemAllocHost, cuMemHostRegister, mapped device
// pointers) and managed memory (cuMemAllocManaged), as device memory for memsets, copies and queries.
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "conformance.h"

using conf::handle;
using conf::ptr;

namespace {

void range(CUdeviceptr p) {
  CUdeviceptr base = 0;
  size_t size = 0;
  CALL("cuMemGetAddressRange", ptr(p), cuMemGetAddressRange(&base, &size, p),
       "base=" + ptr(base) + " size=" + std::to_string(size));
}

void attributes(CUdeviceptr p) {
  CUpointer_attribute attrs[4] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                  CU_POINTER_ATTRIBUTE_DEVICE_POINTER, CU_POINTER_ATTRIBUTE_HOST_POINTER};
  unsigned int type = 0;
  int managed = -1;
  CUdeviceptr dp = 0;
  void* hp = nullptr;
  void* data[4] = {&type, &managed, &dp, &hp};
  CALL("cuPointerGetAttributes", "MEMORY_TYPE,IS_MANAGED,DEVICE_POINTER,HOST_POINTER " + ptr(p),
       cuPointerGetAttributes(4, attrs, data, p),
       "type=" + std::to_string(type) + " managed=" + std::to_string(managed) + " dptr=" + ptr(dp) +
           " hptr=" + ptr(hp));
}

}  // namespace

int main() {
  conf::primary_context();

  // Pinned, device-mapped host memory: one address for host and device (unified addressing).
  void* h = nullptr;
  CALL("cuMemHostAlloc", "65536 DEVICEMAP|PORTABLE", cuMemHostAlloc(&h, 65536, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE),
       "p=" + conf::add_block("H", reinterpret_cast<std::uintptr_t>(h), 65536));
  unsigned int flags = 0;
  CALL("cuMemHostGetFlags", ptr(h), cuMemHostGetFlags(&flags, h), "flags=" + std::to_string(flags));
  CUdeviceptr dh = 0;
  CALL("cuMemHostGetDevicePointer", ptr(h) + " 0", cuMemHostGetDevicePointer(&dh, h, 0), "dptr=" + ptr(dh));
  CALL("cuMemHostGetDevicePointer", ptr(h) + " flags=1", cuMemHostGetDevicePointer(&dh, h, 1));
  CALL("cuMemsetD8", ptr(dh + 16) + " 0x5a 4", cuMemsetD8(dh + 16, 0x5a, 4));
  conf::line("host reads %s+16: %s", ptr(h).c_str(), conf::hex(static_cast<char*>(h) + 16, 4).c_str());
  range(dh + 100);
  attributes(dh + 100);
  CALL("cuMemHostAlloc", "0 bytes", cuMemHostAlloc(&h, 0, 0));
  CALL("cuMemHostAlloc", "4096 flags=0x80", cuMemHostAlloc(&h, 4096, 0x80));

  void* ah = nullptr;
  CALL("cuMemAllocHost", "4096", cuMemAllocHost(&ah, 4096), "p=" + conf::add_block("H", reinterpret_cast<std::uintptr_t>(ah), 4096));
  CALL("cuMemHostGetFlags", ptr(ah), cuMemHostGetFlags(&flags, ah), "flags=" + std::to_string(flags));
  CALL("cuMemsetD8", ptr(ah) + " 0x77 2", cuMemsetD8(reinterpret_cast<CUdeviceptr>(ah), 0x77, 2));
  conf::line("host reads %s: %s", ptr(ah).c_str(), conf::hex(ah, 2).c_str());
  CALL("cuMemFreeHost", ptr(ah), cuMemFreeHost(ah));
  CALL("cuMemFreeHost", ptr(h), cuMemFreeHost(h));

  // Registered host memory: page-aligned user memory pinned and mapped.
  const size_t reg = 3 * 65536;
  void* user = mmap(nullptr, reg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  const std::string u = conf::add_block("U", reinterpret_cast<std::uintptr_t>(user), reg);
  conf::line("mmap %zu -> %s", reg, u.c_str());
  CALL("cuMemHostGetFlags", u + " unregistered", cuMemHostGetFlags(&flags, user));
  CALL("cuMemHostRegister", u + " 196608 DEVICEMAP", cuMemHostRegister(user, reg, CU_MEMHOSTREGISTER_DEVICEMAP));
  CALL("cuMemHostRegister", u + "+65536 65536 again", cuMemHostRegister(static_cast<char*>(user) + 65536, 65536, 0));
  CUdeviceptr du = 0;
  CALL("cuMemHostGetDevicePointer", ptr(user) + "+4 0", cuMemHostGetDevicePointer(&du, static_cast<char*>(user) + 4, 0), "dptr=" + ptr(du));
  CALL("cuMemsetD8", ptr(reinterpret_cast<CUdeviceptr>(user) + 65536) + " 0x33 3",
       cuMemsetD8(reinterpret_cast<CUdeviceptr>(user) + 65536, 0x33, 3));
  conf::line("host reads %s+65536: %s", u.c_str(), conf::hex(static_cast<char*>(user) + 65536, 4).c_str());
  range(reinterpret_cast<CUdeviceptr>(user) + 70000);
  attributes(reinterpret_cast<CUdeviceptr>(user) + 70000);
  CALL("cuMemHostUnregister", u + "+65536 interior", cuMemHostUnregister(static_cast<char*>(user) + 65536));
  CALL("cuMemHostUnregister", u, cuMemHostUnregister(user));
  CALL("cuMemHostUnregister", u + " again", cuMemHostUnregister(user));
  CALL("cuMemHostRegister", "null 4096", cuMemHostRegister(nullptr, 4096, 0));
  CALL("cuMemHostRegister", u + " 0 bytes", cuMemHostRegister(user, 0, 0));
  munmap(user, reg);

  // Managed memory: one address for host and device, attributes say managed.
  CUdeviceptr m = 0;
  CALL("cuMemAllocManaged", "1048576 ATTACH_GLOBAL", cuMemAllocManaged(&m, 1 << 20, CU_MEM_ATTACH_GLOBAL),
       "dptr=" + conf::add_block("M", m, 1 << 20));
  CALL("cuMemsetD8", ptr(m + 8) + " 0x42 4", cuMemsetD8(m + 8, 0x42, 4));
  CALL("cuCtxSynchronize", "", cuCtxSynchronize());
  conf::line("host reads %s+8: %s", ptr(m).c_str(), conf::hex(reinterpret_cast<void*>(m + 8), 4).c_str());
  reinterpret_cast<unsigned char*>(m)[100] = 0x99;
  unsigned char back = 0;
  CALL("cuMemcpyDtoH", ptr(m + 100) + " 1", cuMemcpyDtoH(&back, m + 100, 1), "bytes=" + conf::hex(&back, 1));
  range(m + 4096);
  attributes(m + 4096);
  CUdeviceptr bad = 0;
  CALL("cuMemAllocManaged", "0 bytes", cuMemAllocManaged(&bad, 0, CU_MEM_ATTACH_GLOBAL));
  CALL("cuMemAllocManaged", "4096 flags=0", cuMemAllocManaged(&bad, 4096, 0));
  CALL("cuMemAllocManaged", "4096 ATTACH_SINGLE", cuMemAllocManaged(&bad, 4096, CU_MEM_ATTACH_SINGLE));
  CUdeviceptr mh = 0;
  CALL("cuMemAllocManaged", "4096 ATTACH_HOST", cuMemAllocManaged(&mh, 4096, CU_MEM_ATTACH_HOST),
       "dptr=" + conf::add_block("M", mh, 4096));
  CALL("cuMemFree", ptr(mh), cuMemFree(mh));
  CALL("cuMemFree", ptr(m), cuMemFree(m));
  return 0;
}
