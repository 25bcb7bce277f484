// Conformance client: device memory — alloc/free in each context state, interior pointers, address ranges,
// pointer attributes, memset/memcpy forms and their errors.
#include <cstring>
#include <vector>

#include "conformance.h"

using conf::handle;
using conf::ptr;

namespace {

constexpr size_t kMiB = 1 << 20;

CUdeviceptr alloc(size_t bytes) {
  CUdeviceptr p = 0;
  CALL("cuMemAlloc", std::to_string(bytes), cuMemAlloc(&p, bytes), "dptr=" + conf::add_block("D", p, bytes));
  return p;
}

void range(CUdeviceptr p) {
  CUdeviceptr base = 0;
  size_t size = 0;
  CALL("cuMemGetAddressRange", ptr(p), cuMemGetAddressRange(&base, &size, p),
       "base=" + ptr(base) + " size=" + std::to_string(size));
}

void read_back(CUdeviceptr p, size_t bytes) {
  std::vector<unsigned char> host(bytes);
  CALL("cuMemcpyDtoH", ptr(p) + " " + std::to_string(bytes), cuMemcpyDtoH(host.data(), p, bytes),
       "bytes=" + conf::hex(host.data(), bytes));
}

}  // namespace

int main() {
  CUcontext primary = conf::primary_context();
  CUdeviceptr bad = 0;
  CALL("cuMemAlloc", "0", cuMemAlloc(&bad, 0));
  CALL("cuMemAlloc", "dptr=null 4096", cuMemAlloc(nullptr, 4096));
  CALL("cuMemAlloc", "1 TiB", cuMemAlloc(&bad, 1ULL << 40));
  size_t free_before = 0, total = 0;
  CALL("cuMemGetInfo", "", cuMemGetInfo(&free_before, &total),
       "total>0=" + std::to_string(total > 0) + " free<=total=" + std::to_string(free_before <= total));

  const CUdeviceptr a = alloc(4 * kMiB);
  const CUdeviceptr b = alloc(4096);
  unsigned int align = (a % 256 == 0 && b % 256 == 0) ? 1 : 0;
  conf::line("aligned to 256 bytes=%u", align);

  // Interior pointers: address ranges and attributes name the whole allocation.
  range(a);
  range(a + 4096);
  range(a + 4 * kMiB - 1);
  range(b + 100);
  CUdeviceptr base = 0;
  size_t size = 0;
  CALL("cuMemGetAddressRange", "pbase=null psize=null " + ptr(a + 8), cuMemGetAddressRange(nullptr, nullptr, a + 8));
  CALL("cuMemGetAddressRange", "host stack address", cuMemGetAddressRange(&base, &size, reinterpret_cast<CUdeviceptr>(&base)));

  CUcontext owner = nullptr;
  CALL("cuPointerGetAttribute", "CONTEXT " + ptr(a + 4096), cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, a + 4096),
       "ctx=" + handle("C", owner));
  unsigned int type = 0;
  CALL("cuPointerGetAttribute", "MEMORY_TYPE " + ptr(a + 4096),
       cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a + 4096), "type=" + std::to_string(type));
  CUdeviceptr dp = 0;
  CALL("cuPointerGetAttribute", "DEVICE_POINTER " + ptr(a + 4096),
       cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, a + 4096), "dptr=" + ptr(dp));
  CALL("cuPointerGetAttribute", "RANGE_START_ADDR " + ptr(a + 4096),
       cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, a + 4096), "start=" + ptr(dp));
  size_t range_size = 0;
  CALL("cuPointerGetAttribute", "RANGE_SIZE " + ptr(a + 4096),
       cuPointerGetAttribute(&range_size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, a + 4096), "size=" + std::to_string(range_size));
  int ordinal = -1;
  CALL("cuPointerGetAttribute", "DEVICE_ORDINAL " + ptr(a), cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, a),
       "ordinal=" + std::to_string(ordinal));
  int managed = -1;
  CALL("cuPointerGetAttribute", "IS_MANAGED " + ptr(a), cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, a),
       "managed=" + std::to_string(managed));
  void* hp = reinterpret_cast<void*>(1);
  CALL("cuPointerGetAttribute", "HOST_POINTER " + ptr(a), cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, a));
  CALL("cuPointerGetAttribute", "MEMORY_TYPE host stack address",
       cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, reinterpret_cast<CUdeviceptr>(&type)));
  CUpointer_attribute attrs[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                  CU_POINTER_ATTRIBUTE_IS_MANAGED};
  unsigned int t2 = 0;
  int o2 = -1, m2 = -1;
  void* data[3] = {&t2, &o2, &m2};
  CALL("cuPointerGetAttributes", "MEMORY_TYPE,DEVICE_ORDINAL,IS_MANAGED " + ptr(b + 8),
       cuPointerGetAttributes(3, attrs, data, b + 8),
       "type=" + std::to_string(t2) + " ordinal=" + std::to_string(o2) + " managed=" + std::to_string(m2));
  t2 = 99;
  o2 = -1;
  CALL("cuPointerGetAttributes", "MEMORY_TYPE,DEVICE_ORDINAL host stack address",
       cuPointerGetAttributes(2, attrs, data, reinterpret_cast<CUdeviceptr>(&t2)),
       "type=" + std::to_string(t2) + " ordinal=" + std::to_string(o2));

  // Memsets and copies on valid ranges, read back.
  CALL("cuMemsetD8", ptr(a) + " 0xab 4194304", cuMemsetD8(a, 0xab, 4 * kMiB));
  read_back(a + 4 * kMiB - 4, 4);
  CALL("cuMemsetD8", ptr(a + 1) + " 0x01 3", cuMemsetD8(a + 1, 0x01, 3));
  read_back(a, 6);
  CALL("cuMemsetD16", ptr(a) + " 0x0102 2", cuMemsetD16(a, 0x0102, 2));
  CALL("cuMemsetD32", ptr(a + 4) + " 0x0a0b0c0d 1", cuMemsetD32(a + 4, 0x0a0b0c0d, 1));
  read_back(a, 8);
  CALL("cuMemsetD16", ptr(a + 1) + " misaligned", cuMemsetD16(a + 1, 0, 1));
  CALL("cuMemsetD32", ptr(a + 2) + " misaligned", cuMemsetD32(a + 2, 0, 1));
  CALL("cuMemsetD8", ptr(b) + " 0 8192 past the allocation", cuMemsetD8(b, 0, 8192));
  CALL("cuMemsetD8", "0 0 16", cuMemsetD8(0, 0, 16));
  CALL("cuMemsetD2D8", ptr(b) + " pitch=64 0x11 width=4 height=3", cuMemsetD2D8(b, 64, 0x11, 4, 3));
  read_back(b + 64, 8);
  CALL("cuMemsetD8Async", ptr(b) + " 0x22 2 stream=null", cuMemsetD8Async(b, 0x22, 2, nullptr));
  read_back(b, 4);

  const unsigned char src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  CALL("cuMemcpyHtoD", ptr(b) + " 8", cuMemcpyHtoD(b, src, 8));
  CALL("cuMemcpyDtoD", ptr(a + 100) + " " + ptr(b) + " 8", cuMemcpyDtoD(a + 100, b, 8));
  read_back(a + 100, 8);
  CALL("cuMemcpy", ptr(a + 200) + " " + ptr(b + 4) + " 4", cuMemcpy(a + 200, b + 4, 4));
  read_back(a + 200, 4);
  CALL("cuMemcpyHtoDAsync", ptr(b) + " 2 stream=null", cuMemcpyHtoDAsync(b, src + 6, 2, nullptr));
  CALL("cuStreamSynchronize", "null", cuStreamSynchronize(nullptr));
  read_back(b, 4);
  CALL("cuMemcpyDtoD", ptr(b) + " " + ptr(a) + " 8192 past the destination", cuMemcpyDtoD(b, a, 8192));
  CALL("cuMemcpyHtoD", ptr(b) + " src=null 8", cuMemcpyHtoD(b, nullptr, 8));
  CALL("cuMemcpyHtoD", ptr(b) + " 0 bytes", cuMemcpyHtoD(b, src, 0));
  CUDA_MEMCPY2D copy{};
  copy.srcMemoryType = CU_MEMORYTYPE_HOST;
  copy.srcHost = src;
  copy.srcPitch = 2;
  copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.dstDevice = b + 512;
  copy.dstPitch = 4;
  copy.WidthInBytes = 2;
  copy.Height = 3;
  CALL("cuMemcpy2D", "host pitch 2 -> " + ptr(b + 512) + " pitch 4, 2x3", cuMemcpy2D(&copy));
  read_back(b + 512, 12);
  copy.dstPitch = 1;
  CALL("cuMemcpy2D", "dstPitch 1 < WidthInBytes 2", cuMemcpy2D(&copy));

  // Frees: interior pointers and double frees are refused; a free needs no current context.
  CALL("cuMemFree", ptr(a + 4096) + " interior", cuMemFree(a + 4096));
  CALL("cuMemFree", ptr(b), cuMemFree(b));
  CALL("cuMemFree", ptr(b) + " again", cuMemFree(b));
  CALL("cuMemFree", "0", cuMemFree(0));
  CUcontext popped = nullptr;
  CALL("cuCtxPopCurrent", "", cuCtxPopCurrent(&popped), "ctx=" + handle("C", popped));
  CALL("cuMemAlloc", "4096 no current context", cuMemAlloc(&bad, 4096));
  CALL("cuMemsetD8", ptr(a) + " 0 1 no current context", cuMemsetD8(a, 0, 1));
  CALL("cuMemFree", ptr(a) + " no current context", cuMemFree(a));
  CALL("cuCtxSetCurrent", handle("C", primary), cuCtxSetCurrent(primary));
  range(a);
  size_t free_after = 0;
  CALL("cuMemGetInfo", "", cuMemGetInfo(&free_after, &total), "free restored=" + std::to_string(free_after == free_before));

  // Allocations of a reset primary context are gone; freeing one is an error, freeing nothing is not.
  const CUdeviceptr c = alloc(kMiB);
  CALL("cuDevicePrimaryCtxReset", "device=0", cuDevicePrimaryCtxReset(0));
  CALL("cuMemFree", ptr(c) + " after reset", cuMemFree(c));
  CALL("cuDevicePrimaryCtxRelease", "device=0", cuDevicePrimaryCtxRelease(0));
  return 0;
}
