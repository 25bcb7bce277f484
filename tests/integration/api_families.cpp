// One small driver-API client per API family (events, streams, ipc, copies, host, pools), run with and without kvremap.
// Usage: api_families FAMILY. Prints "api_families: FAMILY ok allocated=BYTES" and exits 0, or names the failed check.
#include <cuda.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr size_t kMiB = 1 << 20;
size_t g_allocated = 0;

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      std::fprintf(stderr, "api_families: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::exit(1);                                                          \
    }                                                                        \
  } while (0)
#define CU(call) CHECK((call) == CUDA_SUCCESS)

CUdeviceptr alloc(size_t bytes) {
  CUdeviceptr p = 0;
  CU(cuMemAlloc(&p, bytes));
  g_allocated += bytes;
  return p;
}

void events() {
  CUstream s = nullptr;
  CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUevent start = nullptr, end = nullptr, untimed = nullptr;
  CU(cuEventCreate(&start, CU_EVENT_DEFAULT));
  CU(cuEventCreate(&end, CU_EVENT_BLOCKING_SYNC));
  CU(cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING));
  CUdeviceptr p = alloc(3 * kMiB);
  CU(cuEventRecord(start, s));
  CU(cuMemsetD8Async(p, 1, 3 * kMiB, s));
  CU(cuEventRecord(end, s));
  CU(cuEventRecord(untimed, s));
  CU(cuStreamWaitEvent(nullptr, end, 0));
  CU(cuEventSynchronize(end));
  CU(cuEventQuery(end));
  float ms = -1;
  CU(cuEventElapsedTime(&ms, start, end));
  CHECK(ms >= 0);
  CHECK(cuEventElapsedTime(&ms, start, untimed) == CUDA_ERROR_INVALID_HANDLE);
  CHECK(cuEventCreate(&untimed, CU_EVENT_INTERPROCESS) == CUDA_ERROR_INVALID_VALUE);
  for (CUevent e : {start, end}) CU(cuEventDestroy(e));
  CHECK(cuEventQuery(start) == CUDA_ERROR_INVALID_HANDLE);
  CU(cuMemFree(p));
  CU(cuStreamDestroy(s));
}

void streams() {
  int least = 1, greatest = 1;
  CU(cuCtxGetStreamPriorityRange(&least, &greatest));
  CHECK(least == 0 && greatest < 0);
  CUstream high = nullptr, low = nullptr;
  CU(cuStreamCreateWithPriority(&high, CU_STREAM_NON_BLOCKING, greatest - 10));
  CU(cuStreamCreateWithPriority(&low, CU_STREAM_DEFAULT, 0));
  int priority = 1;
  unsigned flags = 7;
  CU(cuStreamGetPriority(high, &priority));
  CHECK(priority == greatest);  // clamped into the range
  CU(cuStreamGetFlags(high, &flags));
  CHECK(flags == CU_STREAM_NON_BLOCKING);
  CU(cuStreamGetFlags(low, &flags));
  CHECK(flags == CU_STREAM_DEFAULT);
  CUdeviceptr p = alloc(5 * kMiB);
  CU(cuMemsetD32Async(p, 0xabcdef01u, 5 * kMiB / 4, high));
  int called = 0;
  CU(cuLaunchHostFunc(low, [](void* c) { ++*static_cast<int*>(c); }, &called));
  CU(cuStreamSynchronize(high));
  CHECK(called == 1);
  unsigned word = 0;
  CU(cuMemcpyDtoH(&word, p + 4 * kMiB, 4));
  CHECK(word == 0xabcdef01u);
  CU(cuMemFree(p));
  CU(cuStreamDestroy(high));
  CU(cuStreamDestroy(low));
}

// The parent exports an allocation, a forked child (a second process, with a driver of its own) opens it,
// reads the parent's data and writes its own, which the parent then reads: shared backing, as on a GPU.
void ipc() {
  CUdeviceptr p = alloc(7 * kMiB);
  CU(cuMemsetD8(p, 0x5a, 7 * kMiB));
  CUipcMemHandle handle;
  CU(cuIpcGetMemHandle(&handle, p));
  CUevent ev = nullptr;
  CU(cuEventCreate(&ev, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
  CU(cuEventRecord(ev, nullptr));
  CUipcEventHandle event_handle;
  CU(cuIpcGetEventHandle(&event_handle, ev));
  CUdeviceptr self = 0;
  CHECK(cuIpcOpenMemHandle(&self, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) == CUDA_ERROR_INVALID_CONTEXT);
  const pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    CUcontext ctx = nullptr;
    CU(cuInit(0));
    CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU(cuCtxSetCurrent(ctx));
    CUdeviceptr q = 0, again = 0;
    CU(cuIpcOpenMemHandle(&q, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    CU(cuIpcOpenMemHandle(&again, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    CHECK(q == again);
    CUdeviceptr base = 0;
    size_t size = 0;
    CU(cuMemGetAddressRange(&base, &size, q + kMiB));
    CHECK(base == q && size == 7 * kMiB);
    unsigned char byte = 0;
    CU(cuMemcpyDtoH(&byte, q + 6 * kMiB, 1));
    CHECK(byte == 0x5a);
    CU(cuMemsetD8(q + 6 * kMiB, 0xc3, 1));
    CUevent opened = nullptr;
    CU(cuIpcOpenEventHandle(&opened, event_handle));
    CU(cuEventSynchronize(opened));
    CU(cuIpcCloseMemHandle(q));
    CU(cuIpcCloseMemHandle(again));
    CHECK(cuIpcCloseMemHandle(q) == CUDA_ERROR_INVALID_VALUE);
    _exit(0);
  }
  int status = 0;
  CHECK(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  unsigned char byte = 0;
  CU(cuMemcpyDtoH(&byte, p + 6 * kMiB, 1));
  CHECK(byte == 0xc3);
  CU(cuEventDestroy(ev));
  CU(cuMemFree(p));
}

void copies() {
  CUdeviceptr a = alloc(2 * kMiB);
  CUdeviceptr b = alloc(2 * kMiB);
  CUcontext ctx = nullptr;
  CU(cuCtxGetCurrent(&ctx));
  CU(cuMemsetD16(a, 0x1234, kMiB));
  CU(cuMemcpyPeer(b, ctx, a, ctx, 2 * kMiB));
  unsigned short half = 0;
  CU(cuMemcpyDtoH(&half, b + 2 * kMiB - 2, 2));
  CHECK(half == 0x1234);
  // A 2D copy of a 16 x 4 block with pitches 64 (device) and 16 (host).
  CU(cuMemsetD2D8(a, 64, 0x77, 16, 4));
  unsigned char host[64] = {};
  CUDA_MEMCPY2D m{};
  m.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  m.srcDevice = a;
  m.srcPitch = 64;
  m.dstMemoryType = CU_MEMORYTYPE_HOST;
  m.dstHost = host;
  m.dstPitch = 16;
  m.WidthInBytes = 16;
  m.Height = 4;
  CU(cuMemcpy2D(&m));
  for (unsigned char c : host) CHECK(c == 0x77);
  CU(cuMemsetD32Async(b, 0xffffffffu, 1, nullptr));
  CU(cuMemcpyPeerAsync(a, ctx, b, ctx, 4, nullptr));
  unsigned word = 0;
  CU(cuMemcpyDtoH(&word, a, 4));
  CHECK(word == 0xffffffffu);
  CHECK(cuMemsetD32(a + 2, 0, 1) == CUDA_ERROR_INVALID_VALUE);  // unaligned
  CU(cuMemFree(a));
  CU(cuMemFree(b));
}

void host() {
  void* pinned = nullptr;
  CU(cuMemHostAlloc(&pinned, kMiB, CU_MEMHOSTALLOC_DEVICEMAP));
  unsigned flags = 0;
  CU(cuMemHostGetFlags(&flags, pinned));
  CHECK(flags & CU_MEMHOSTALLOC_DEVICEMAP);
  CUdeviceptr mapped = 0;
  CU(cuMemHostGetDevicePointer(&mapped, pinned, 0));
  CHECK(mapped == reinterpret_cast<CUdeviceptr>(pinned));
  unsigned type = 0;
  CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, mapped));
  CHECK(type == CU_MEMORYTYPE_HOST);
  std::vector<char> user(kMiB);
  CU(cuMemHostRegister(user.data(), user.size(), CU_MEMHOSTREGISTER_PORTABLE));
  CHECK(cuMemHostRegister(user.data(), 16, 0) == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  CUdeviceptr d = alloc(kMiB);
  std::memset(pinned, 9, kMiB);
  CU(cuMemcpyHtoDAsync(d, pinned, kMiB, nullptr));
  CU(cuMemcpyDtoH(user.data(), d, kMiB));
  CHECK(user[kMiB - 1] == 9);
  CU(cuMemHostUnregister(user.data()));
  CHECK(cuMemHostUnregister(user.data()) == CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  CU(cuMemFreeHost(pinned));
  CU(cuMemFree(d));
}

// Stream-ordered allocation from a pool of its own and from the device's current pool.
void pools() {
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  CUmemoryPool pool = nullptr;
  CU(cuMemPoolCreate(&pool, &props));
  cuuint64_t keep = 8 * kMiB;
  CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
  CUstream s = nullptr;
  CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr from_pool = 0, from_default = 0;
  CU(cuMemAllocFromPoolAsync(&from_pool, 2 * kMiB, pool, s));
  CU(cuMemAllocAsync(&from_default, kMiB, s));
  g_allocated += 3 * kMiB;
  CU(cuMemsetD8Async(from_pool, 3, 2 * kMiB, s));
  cuuint64_t used = 0;
  CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
  CHECK(used == 2 * kMiB);
  CU(cuMemFreeAsync(from_pool, s));
  CU(cuMemFreeAsync(from_default, s));
  CU(cuStreamSynchronize(s));
  CU(cuMemPoolTrimTo(pool, 0));
  cuuint64_t reserved = 1;
  CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
  CHECK(reserved == 0);
  CU(cuMemPoolDestroy(pool));
  CU(cuStreamDestroy(s));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string family = argc > 1 ? argv[1] : "";
  CUcontext ctx = nullptr;
  CU(cuInit(0));
  CU(cuDevicePrimaryCtxRetain(&ctx, 0));
  CU(cuCtxSetCurrent(ctx));
  if (family == "events") {
    events();
  } else if (family == "streams") {
    streams();
  } else if (family == "ipc") {
    ipc();
  } else if (family == "copies") {
    copies();
  } else if (family == "host") {
    host();
  } else if (family == "pools") {
    pools();
  } else {
    std::fprintf(stderr, "usage: api_families events|streams|ipc|copies|host|pools\n");
    return 2;
  }
  CU(cuDevicePrimaryCtxRelease(0));
  std::printf("api_families: %s ok allocated=%zu\n", family.c_str(), g_allocated);
  return 0;
}
