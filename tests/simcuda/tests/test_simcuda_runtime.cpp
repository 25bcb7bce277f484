// Tests of the simulated CUDA runtime (libcudart.so.13) running on the simulated driver (libcuda.so.1).
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/ptsz_api.h"
#include "runtime/simcudart.h"
#include "simcuda.h"

// ---------------------------------------------------------------------------------------------
// dlsym interception: the executable's dlsym comes first in the global lookup scope, so the
// runtime's dlsym call lands here. Lookups on libcuda's handle are recorded, everything is
// forwarded to glibc's dlsym.
//
// The hook also sees other libraries' lookups, some before any constructor has run (sanitizer
// runtimes look up their interceptors' targets with dlsym(RTLD_NEXT) from _dl_init). So it is
// uninstrumented, touches no C++ statics until the test has armed it, and forwards with a sibling
// call: glibc resolves RTLD_NEXT relative to its caller's return address, which must stay the
// original caller's, not this executable's.

namespace {

// noexcept like glibc's: calling it from the noexcept hook then needs no EH region, which would
// stop the forwarding from being a sibling call.
using DlsymFn = void* (*)(void*, const char*) noexcept;

// Plain globals with __atomic builtins: std::atomic's members are out-of-line, instrumented calls in
// unoptimised sanitizer builds, unusable before the sanitizer runtime has initialised.
DlsymFn g_real_dlsym = nullptr;
void* g_libcuda = nullptr;  // set before main; until then nothing is recorded

__attribute__((no_sanitize("address", "thread", "undefined"))) DlsymFn real_dlsym() {
  DlsymFn fn = __atomic_load_n(&g_real_dlsym, __ATOMIC_ACQUIRE);
  if (fn == nullptr) {
    fn = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
    if (fn == nullptr) fn = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
    __atomic_store_n(&g_real_dlsym, fn, __ATOMIC_RELEASE);
  }
  return fn;
}

// Function-local statics: constructed on first use, after the hook is armed.
std::mutex& lookups_mutex() {
  static std::mutex m;
  return m;
}
std::vector<std::string>& libcuda_lookups() {
  static std::vector<std::string> names;
  return names;
}

__attribute__((noinline)) void note_libcuda_lookup(const char* name) {
  std::lock_guard<std::mutex> lock(lookups_mutex());
  libcuda_lookups().emplace_back(name);  // glibc declares `name` nonnull
}

// The handle dlopen("libcuda.so.1") returns; the test links the driver, so it is always loaded.
void* libcuda_handle() { return __atomic_load_n(&g_libcuda, __ATOMIC_ACQUIRE); }

[[maybe_unused]] const bool g_hook_armed = [] {
  void* h = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_NOW);
  if (h != nullptr) dlclose(h);  // only the handle value is needed; NEEDED keeps it loaded
  __atomic_store_n(&g_libcuda, h, __ATOMIC_RELEASE);
  return h != nullptr;
}();

}  // namespace

// optimize("O2") keeps the forwarding a sibling call (jmp) in unoptimised builds too.
extern "C" __attribute__((no_sanitize("address", "thread", "undefined"), optimize("O2"))) void* dlsym(
    void* handle, const char* name) noexcept {
  void* libcuda = __atomic_load_n(&g_libcuda, __ATOMIC_ACQUIRE);
  if (libcuda != nullptr && handle == libcuda) note_libcuda_lookup(name);
  return real_dlsym()(handle, name);
}

// ---------------------------------------------------------------------------------------------
// Kernel run by the simulated driver for `.entry add_one(` (found with dlsym(RTLD_DEFAULT)).

extern "C" void simcuda_kernel_add_one(void** params) {
  int* data = *static_cast<int**>(params[0]);
  const unsigned count = *static_cast<unsigned*>(params[1]);
  for (unsigned i = 0; i < count; ++i) data[i] += 1;
}

namespace {

constexpr char kAddOnePtx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry add_one(\n.param .u64 add_one_param_0,\n.param .u32 add_one_param_1\n)\n{\nret;\n}\n";

// Every setting a test's numbers depend on, so SIMCUDA_* variables in the caller's environment
// cannot change the expectations.
constexpr char kSettings[] = "SIMCUDA_DEVICE_COUNT=1 SIMCUDA_DEVICE_MEMORY=1GiB SIMCUDA_GRANULARITY=2MiB";

constexpr unsigned long long kMiB = 1ull << 20;
constexpr unsigned long long kGiB = 1ull << 30;

struct ProcQuery {
  std::string name;
  int version;
  unsigned long long flags;
};

std::vector<ProcQuery> proc_queries() {
  std::vector<ProcQuery> out;
  const size_t n = simcuda_proc_address_query_count();
  for (size_t i = 0; i < n; ++i) {
    char name[256] = {};
    int version = 0;
    unsigned long long flags = 0;
    if (simcuda_proc_address_query(i, name, sizeof name, &version, &flags) == 0) out.push_back({name, version, flags});
  }
  return out;
}

bool queried(const std::vector<ProcQuery>& log, const std::string& name, int version, unsigned long long flags) {
  for (const ProcQuery& q : log) {
    if (q.name == name && q.version == version && q.flags == flags) return true;
  }
  return false;
}

// What the runtime did on its very first use in this process, captured before any test resets the
// driver (which clears the driver's query log). Works whether tests run in one process or one each.
struct FirstUse {
  cudaError_t result = cudaErrorUnknown;
  std::vector<std::string> libcuda_lookups;
  std::vector<ProcQuery> queries;
};
FirstUse g_first_use;

class FirstUseEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (done_) return;  // --gtest_repeat sets environments up again; the first use happened once
    done_ = true;
    ASSERT_EQ(simcuda_reset(kSettings), 0);
    g_first_use.result = cudaFree(nullptr);
    std::lock_guard<std::mutex> lock(lookups_mutex());
    g_first_use.libcuda_lookups = libcuda_lookups();
    g_first_use.queries = proc_queries();
  }

 private:
  bool done_ = false;
};
[[maybe_unused]] ::testing::Environment* const g_environment =
    ::testing::AddGlobalTestEnvironment(new FirstUseEnvironment);

class Runtime : public ::testing::Test {
 protected:
  void SetUp() override { reset(kSettings); }

  static void reset(const char* settings) {
    ASSERT_EQ(simcuda_reset(settings), 0);
    simcudart_reset_for_tests();
  }

  // The driver's own cuGetProcAddress_v2, fetched without going through the recording hook.
  static PFN_cuGetProcAddress_v12000 driver_resolver() {
    return reinterpret_cast<PFN_cuGetProcAddress_v12000>(real_dlsym()(libcuda_handle(), "cuGetProcAddress_v2"));
  }

  static void* driver_pointer(const char* name, int version, unsigned long long flags) {
    void* pfn = nullptr;
    CUdriverProcAddressQueryResult status{};
    if (driver_resolver()(name, &pfn, version, flags, &status) != CUDA_SUCCESS) return nullptr;
    return pfn;
  }

  static void* runtime_symbol(const char* name) {
    void* handle = dlopen("libcudart.so.13", RTLD_NOLOAD | RTLD_NOW);
    if (handle == nullptr) return nullptr;
    void* sym = real_dlsym()(handle, name);
    dlclose(handle);
    return sym;
  }

  // Loads the add_one library and returns its kernel.
  static cudaKernel_t add_one_kernel(cudaLibrary_t* library) {
    cudaKernel_t kernel = nullptr;
    EXPECT_EQ(cudaLibraryLoadData(library, kAddOnePtx, nullptr, nullptr, 0, nullptr, nullptr, 0), cudaSuccess);
    EXPECT_EQ(cudaLibraryGetKernel(&kernel, *library, "add_one"), cudaSuccess);
    return kernel;
  }

  static std::vector<int> read_back(const int* device, size_t count) {
    std::vector<int> host(count, -1);
    EXPECT_EQ(cudaMemcpy(host.data(), device, count * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }
};

// ---------------------------------------------------------------------------------------------
// Resolution: the path an LD_PRELOAD interposer must hook.

TEST_F(Runtime, FirstUseLooksUpOnlyCuGetProcAddressV2OnLibcuda) {
  EXPECT_EQ(g_first_use.result, cudaSuccess);
  EXPECT_EQ(g_first_use.libcuda_lookups, std::vector<std::string>{"cuGetProcAddress_v2"});
  // Later calls never look anything up on libcuda again.
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, kMiB), cudaSuccess);
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  std::lock_guard<std::mutex> lock(lookups_mutex());
  EXPECT_EQ(libcuda_lookups(), std::vector<std::string>{"cuGetProcAddress_v2"});
}

TEST_F(Runtime, FirstQueryFetchesTheResolverAt12000) {
  ASSERT_FALSE(g_first_use.queries.empty());
  const ProcQuery& first = g_first_use.queries.front();
  EXPECT_EQ(first.name, "cuGetProcAddress");
  EXPECT_EQ(first.version, 12000);
  EXPECT_EQ(first.flags, 0u);
  size_t resolver_queries = 0;
  for (const ProcQuery& q : g_first_use.queries) resolver_queries += q.name == "cuGetProcAddress";
  EXPECT_EQ(resolver_queries, 1u);
}

TEST_F(Runtime, MemoryFunctionsAreQueriedByBaseNameAt3020) {
  const auto& log = g_first_use.queries;
  for (const char* name : {"cuMemAlloc", "cuMemFree", "cuMemGetInfo", "cuMemAllocPitch", "cuMemGetAddressRange"}) {
    EXPECT_TRUE(queried(log, name, 3020, 0)) << name;
  }
  for (const char* name : {"cuMemsetD8", "cuMemcpyHtoD", "cuMemcpyDtoH", "cuMemcpyDtoD", "cuMemcpyHtoDAsync"}) {
    EXPECT_TRUE(queried(log, name, 3020, 0)) << name;
    EXPECT_TRUE(queried(log, name, 3020, 2)) << name;
  }
  for (const ProcQuery& q : log) EXPECT_EQ(q.name.find("_v2"), std::string::npos) << q.name;
}

TEST_F(Runtime, StreamOrderedFunctionsAreQueriedLegacyAndPerThread) {
  const auto& log = g_first_use.queries;
  const std::pair<const char*, int> stream_ordered[] = {{"cuMemcpy", 4000},
                                                        {"cuMemcpyAsync", 4000},
                                                        {"cuLaunchKernel", 4000},
                                                        {"cuStreamBeginCapture", 10010},
                                                        {"cuStreamEndCapture", 10000},
                                                        {"cuStreamGetCaptureInfo", 12030},
                                                        {"cuGraphLaunch", 10000},
                                                        {"cuGraphInstantiateWithParams", 12000},
                                                        {"cuMemAllocAsync", 11020},
                                                        {"cuStreamSynchronize", 2000}};
  for (const auto& [name, version] : stream_ordered) {
    EXPECT_TRUE(queried(log, name, version, CU_GET_PROC_ADDRESS_DEFAULT)) << name;
    EXPECT_TRUE(queried(log, name, version, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) << name;
  }
  // Functions without a stream are asked for once.
  EXPECT_FALSE(queried(log, "cuMemAlloc", 3020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));
  EXPECT_TRUE(queried(log, "cuGraphInstantiateWithFlags", 11040, 0));
  EXPECT_TRUE(queried(log, "cuLibraryLoadData", 12000, 0));
  EXPECT_TRUE(queried(log, "cuDevicePrimaryCtxRetain", 7000, 0));
  EXPECT_TRUE(queried(log, "cuIpcGetMemHandle", 4010, 0));
}

TEST_F(Runtime, ResetReinitialisesWithoutResolvingAgain) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, kMiB), cudaSuccess);
  EXPECT_EQ(simcuda_call_count("cuInit"), 1u);
  EXPECT_EQ(simcuda_call_count("cuDevicePrimaryCtxRetain"), 1u);
  EXPECT_EQ(simcuda_proc_address_query_count(), 0u);
  reset(kSettings);
  ASSERT_EQ(cudaMalloc(&p, kMiB), cudaSuccess);
  EXPECT_EQ(simcuda_call_count("cuInit"), 1u);
  EXPECT_EQ(simcuda_call_count("cuDevicePrimaryCtxRetain"), 1u);
  EXPECT_EQ(simcuda_call_count("cuMemAlloc_v2"), 1u);
  EXPECT_EQ(simcuda_proc_address_query_count(), 0u);
}

// ---------------------------------------------------------------------------------------------
// Memory.

TEST_F(Runtime, MallocChargesGranularityAndMemGetInfoFollows) {
  ASSERT_EQ(cudaFree(nullptr), cudaSuccess);  // context first: it may charge memory of its own
  const unsigned long long base = simcuda_device_used_bytes(0);
  size_t free_before = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  EXPECT_EQ(total, kGiB);
  EXPECT_EQ(free_before, total - base);

  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, kMiB), cudaSuccess);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(simcuda_device_used_bytes(0), base + 2 * kMiB);
  size_t free_after = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_after, free_before - 2 * kMiB);
  EXPECT_EQ(simcuda_call_count("cuMemAlloc_v2"), 1u);

  ASSERT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(simcuda_device_used_bytes(0), base);
  EXPECT_EQ(simcuda_call_count("cuMemFree_v2"), 1u);
}

TEST_F(Runtime, OutOfMemoryIsMemoryAllocationAndSticksUntilRead) {
  void* p = reinterpret_cast<void*>(0x1234);
  EXPECT_EQ(cudaMalloc(&p, 2 * kGiB), cudaErrorMemoryAllocation);
  EXPECT_EQ(static_cast<int>(cudaErrorMemoryAllocation), 2);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorMemoryAllocation);  // peek does not clear
  void* ok = nullptr;
  ASSERT_EQ(cudaMalloc(&ok, kMiB), cudaSuccess);  // success does not clear either
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaFree(ok), cudaSuccess);
}

TEST_F(Runtime, BadArgumentsFailCleanly) {
  EXPECT_EQ(cudaMalloc(nullptr, kMiB), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  void* p = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(cudaMalloc(&p, 0), cudaSuccess);
  EXPECT_EQ(p, nullptr);
  size_t value = 0;
  EXPECT_EQ(cudaMemGetInfo(nullptr, &value), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMallocPitch(nullptr, &value, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMallocAsync(nullptr, kMiB, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamCreate(nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamIsCapturing(nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamEndCapture(nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamGetCaptureInfo(nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaThreadExchangeStreamCaptureMode(nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphInstantiate(nullptr, nullptr, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphInstantiateWithParams(nullptr, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaLibraryLoadData(nullptr, kAddOnePtx, nullptr, nullptr, 0, nullptr, nullptr, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaLibraryGetKernel(nullptr, nullptr, "add_one"), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetDriverEntryPointByVersion(nullptr, reinterpret_cast<void**>(&p), 12000, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaIpcGetMemHandle(nullptr, p), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetDevice(nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetDeviceCount(nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceGetAttribute(nullptr, cudaDevAttrMultiProcessorCount, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDriverGetVersion(nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaRuntimeGetVersion(nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(simcuda_call_count("cuMemAlloc_v2"), 0u);  // rejected before reaching the driver
}

TEST_F(Runtime, MemcpyRoundTripsThroughEveryKind) {
  std::vector<unsigned char> src(4096), dst(4096, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7);
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(cudaMalloc(&a, src.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, src.size()), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(a, src.data(), src.size(), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(b, a, src.size(), cudaMemcpyDeviceToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dst.data(), b, dst.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(dst, src);

  std::fill(dst.begin(), dst.end(), 0);
  EXPECT_EQ(cudaMemcpy(dst.data(), a, dst.size(), cudaMemcpyDefault), cudaSuccess);
  EXPECT_EQ(dst, src);
  std::vector<unsigned char> host_copy(src.size(), 0);
  EXPECT_EQ(cudaMemcpy(host_copy.data(), src.data(), src.size(), cudaMemcpyHostToHost), cudaSuccess);
  EXPECT_EQ(host_copy, src);

  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(stream), cudaSuccess) << "an idle stream";
  std::fill(dst.begin(), dst.end(), 0);
  EXPECT_EQ(cudaMemcpyAsync(dst.data(), a, dst.size(), cudaMemcpyDeviceToHost, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(dst, src);

  EXPECT_EQ(cudaMemcpy(dst.data(), a, dst.size(), static_cast<cudaMemcpyKind>(7)), cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(cudaFree(a), cudaSuccess);
  EXPECT_EQ(cudaFree(b), cudaSuccess);
}

TEST_F(Runtime, MemsetAndMemsetAsyncSetBytes) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 1024), cudaSuccess);
  EXPECT_EQ(cudaMemset(p, 0x1AB, 1024), cudaSuccess);  // only the low byte counts
  std::vector<unsigned char> host(1024, 0);
  ASSERT_EQ(cudaMemcpy(host.data(), p, host.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(host, std::vector<unsigned char>(1024, 0xAB));

  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(static_cast<unsigned char*>(p) + 512, 0x5C, 512, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(host.data(), p, host.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(host[511], 0xAB);
  EXPECT_EQ(host[512], 0x5C);
  EXPECT_EQ(host[1023], 0x5C);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
}

TEST_F(Runtime, MallocPitchAndStreamOrderedAllocation) {
  void* p = nullptr;
  size_t pitch = 0;
  ASSERT_EQ(cudaMallocPitch(&p, &pitch, 100, 8), cudaSuccess);
  EXPECT_NE(p, nullptr);
  EXPECT_GE(pitch, 100u);
  EXPECT_EQ(cudaFree(p), cudaSuccess);

  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  void* q = nullptr;
  ASSERT_EQ(cudaMallocAsync(&q, kMiB, stream), cudaSuccess);
  EXPECT_NE(q, nullptr);
  EXPECT_EQ(cudaMemsetAsync(q, 1, kMiB, stream), cudaSuccess);
  EXPECT_EQ(cudaFreeAsync(q, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(simcuda_call_count("cuMemAllocAsync"), 1u);
  EXPECT_EQ(simcuda_call_count("cuMemFreeAsync"), 1u);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST_F(Runtime, IpcHandleWorksOnMallocMemoryOnly) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, kMiB), cudaSuccess);
  cudaIpcMemHandle_t handle{};
  EXPECT_EQ(cudaIpcGetMemHandle(&handle, p), cudaSuccess);

  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  void* pooled = nullptr;
  ASSERT_EQ(cudaMallocAsync(&pooled, kMiB, stream), cudaSuccess);
  EXPECT_EQ(cudaIpcGetMemHandle(&handle, pooled), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeAsync(pooled, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
}

// ---------------------------------------------------------------------------------------------
// Kernels, capture, graphs.

TEST_F(Runtime, LaunchKernelRunsTheRegisteredHostFunction) {
  cudaLibrary_t library = nullptr;
  cudaKernel_t kernel = add_one_kernel(&library);
  ASSERT_NE(kernel, nullptr);
  int* data = nullptr;
  unsigned count = 16;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&data), count * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMemset(data, 0, count * sizeof(int)), cudaSuccess);
  void* args[] = {&data, &count};
  EXPECT_EQ(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(1), dim3(32), args, 0, nullptr), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(read_back(data, count), std::vector<int>(count, 1));

  // Not a kernel handle (e.g. an nvcc host stub this runtime never registered).
  EXPECT_EQ(cudaLaunchKernel(reinterpret_cast<const void*>(&count), dim3(1), dim3(1), args, 0, nullptr),
            cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(cudaLaunchKernel(nullptr, dim3(1), dim3(1), args, 0, nullptr), cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(0), dim3(1), args, 0, nullptr),
            cudaErrorInvalidConfiguration);
  cudaKernel_t missing = nullptr;
  EXPECT_NE(cudaLibraryGetKernel(&missing, library, "no_such_kernel"), cudaSuccess);
  EXPECT_EQ(cudaFree(data), cudaSuccess);
  EXPECT_EQ(cudaLibraryUnload(library), cudaSuccess);
}

TEST_F(Runtime, CapturedKernelReplaysThroughEveryInstantiateEntry) {
  cudaLibrary_t library = nullptr;
  cudaKernel_t kernel = add_one_kernel(&library);
  ASSERT_NE(kernel, nullptr);
  int* data = nullptr;
  unsigned count = 8;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&data), count * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMemset(data, 0, count * sizeof(int)), cudaSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);

  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  void* args[] = {&data, &count};
  ASSERT_EQ(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(1), dim3(8), args, 0, stream), cudaSuccess);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  EXPECT_EQ(cudaStreamIsCapturing(stream, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  unsigned long long id = 0;
  cudaGraph_t capturing = nullptr;
  EXPECT_EQ(cudaStreamGetCaptureInfo(stream, &status, &id, &capturing), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  EXPECT_NE(id, 0u);
  EXPECT_NE(capturing, nullptr);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(cudaStreamIsCapturing(stream, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  EXPECT_EQ(read_back(data, count), std::vector<int>(count, 0));  // recorded, not run

  cudaGraphExec_t plain = nullptr, with_flags = nullptr, with_params = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&plain, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiateWithFlags(&with_flags, graph, 0), cudaSuccess);
  cudaGraphInstantiateParams params{};
  ASSERT_EQ(cudaGraphInstantiateWithParams(&with_params, graph, &params), cudaSuccess);
  EXPECT_EQ(params.result_out, cudaGraphInstantiateSuccess);
  for (cudaGraphExec_t exec : {plain, with_flags, with_params}) {
    EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  }
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(read_back(data, count), std::vector<int>(count, 3));

  for (cudaGraphExec_t exec : {plain, with_flags, with_params}) EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(cudaFree(data), cudaSuccess);
  EXPECT_EQ(cudaLibraryUnload(library), cudaSuccess);
}

TEST_F(Runtime, MallocDuringGlobalCaptureNeedsRelaxedMode) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph = nullptr;
  void* p = nullptr;

  // Strict: the allocation fails and breaks the capture.
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&p, kMiB), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaGetLastError(), cudaErrorStreamCaptureUnsupported);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  EXPECT_EQ(cudaStreamIsCapturing(stream, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusInvalidated);
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated);

  // Relaxed, as PyTorch's caching allocator does: allowed, and the capture survives.
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  ASSERT_EQ(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
  EXPECT_EQ(mode, cudaStreamCaptureModeGlobal);  // the previous mode comes back
  EXPECT_EQ(cudaMalloc(&p, kMiB), cudaSuccess);
  ASSERT_EQ(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
  EXPECT_EQ(mode, cudaStreamCaptureModeRelaxed);
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// ---------------------------------------------------------------------------------------------
// Per-thread default stream exports.

TEST_F(Runtime, PerThreadExportsExistAndUseThePerThreadStream) {
  for (const char* name :
       {"cudaMemcpy_ptds", "cudaMemset_ptds", "cudaMemcpyAsync_ptsz", "cudaMemsetAsync_ptsz", "cudaMallocAsync_ptsz",
        "cudaFreeAsync_ptsz", "cudaStreamSynchronize_ptsz", "cudaStreamQuery_ptsz", "cudaStreamBeginCapture_ptsz",
        "cudaStreamEndCapture_ptsz", "cudaStreamIsCapturing_ptsz", "cudaStreamGetCaptureInfo_ptsz",
        "cudaGraphInstantiateWithParams_ptsz", "cudaGraphLaunch_ptsz", "cudaLaunchKernel_ptsz",
        "cudaGetDriverEntryPoint_ptsz", "cudaGetDriverEntryPointByVersion_ptsz"}) {
    EXPECT_NE(runtime_symbol(name), nullptr) << name;
  }
  // Internal helpers stay hidden.
  EXPECT_EQ(runtime_symbol("_ZN9simcudart12driver_tableEv"), nullptr);

  // Stream 0 is the legacy stream for the plain export (capture refused) and the per-thread
  // stream for the _ptsz export (capture allowed).
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal), cudaErrorStreamCaptureUnsupported);
  using BeginCaptureFn = cudaError_t (*)(cudaStream_t, cudaStreamCaptureMode);
  auto begin_ptsz = reinterpret_cast<BeginCaptureFn>(runtime_symbol("cudaStreamBeginCapture_ptsz"));
  ASSERT_NE(begin_ptsz, nullptr);
  ASSERT_EQ(begin_ptsz(nullptr, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  EXPECT_EQ(cudaStreamIsCapturing_ptsz(nullptr, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  EXPECT_EQ(cudaStreamIsCapturing(cudaStreamPerThread, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture_ptsz(nullptr, &graph), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);

  // Copies, sets and launches through the per-thread exports.
  int* data = nullptr;
  unsigned count = 4;
  ASSERT_EQ(cudaMallocAsync_ptsz(reinterpret_cast<void**>(&data), count * sizeof(int), nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemset_ptds(data, 0, count * sizeof(int)), cudaSuccess);
  cudaLibrary_t library = nullptr;
  cudaKernel_t kernel = add_one_kernel(&library);
  void* args[] = {&data, &count};
  EXPECT_EQ(cudaLaunchKernel_ptsz(reinterpret_cast<const void*>(kernel), dim3(1), dim3(4), args, 0, nullptr),
            cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync_ptsz(data, 0, sizeof(int), nullptr), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize_ptsz(nullptr), cudaSuccess);
  std::vector<int> host(count, -1);
  EXPECT_EQ(cudaMemcpyAsync_ptsz(host.data(), data, count * sizeof(int), cudaMemcpyDefault, nullptr), cudaSuccess);
  EXPECT_EQ(host, (std::vector<int>{0, 1, 1, 1}));
  std::fill(host.begin(), host.end(), -1);
  EXPECT_EQ(cudaMemcpy_ptds(host.data(), data, count * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(host, (std::vector<int>{0, 1, 1, 1}));
  EXPECT_EQ(cudaFreeAsync_ptsz(data, nullptr), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize_ptsz(nullptr), cudaSuccess);
  EXPECT_EQ(cudaLibraryUnload(library), cudaSuccess);
  EXPECT_EQ(simcuda_call_count("cuLaunchKernel"), 1u);
}

// ---------------------------------------------------------------------------------------------
// Driver entry points.

TEST_F(Runtime, DriverEntryPointsComeFromTheSameResolver) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  ASSERT_EQ(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 12000, cudaEnableDefault, &status), cudaSuccess);
  EXPECT_EQ(status, cudaDriverEntryPointSuccess);
  EXPECT_NE(fn, nullptr);
  EXPECT_EQ(fn, driver_pointer("cuMemAlloc", 12000, 0));
  EXPECT_EQ(fn, real_dlsym()(libcuda_handle(), "cuMemAlloc_v2"));
  EXPECT_TRUE(queried(proc_queries(), "cuMemAlloc", 12000, 0));

  // Flags pass through; the _ptsz export makes "default" mean per-thread.
  void* legacy = nullptr;
  void* per_thread = nullptr;
  void* ptsz_default = nullptr;
  ASSERT_EQ(cudaGetDriverEntryPointByVersion("cuMemcpyAsync", &legacy, 12000, cudaEnableLegacyStream), cudaSuccess);
  ASSERT_EQ(cudaGetDriverEntryPointByVersion("cuMemcpyAsync", &per_thread, 12000, cudaEnablePerThreadDefaultStream),
            cudaSuccess);
  ASSERT_EQ(cudaGetDriverEntryPointByVersion_ptsz("cuMemcpyAsync", &ptsz_default, 12000, cudaEnableDefault, nullptr),
            cudaSuccess);
  EXPECT_EQ(legacy, real_dlsym()(libcuda_handle(), "cuMemcpyAsync"));
  EXPECT_EQ(per_thread, real_dlsym()(libcuda_handle(), "cuMemcpyAsync_ptsz"));
  EXPECT_EQ(ptsz_default, per_thread);
  EXPECT_TRUE(queried(proc_queries(), "cuMemcpyAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));

  // The deprecated form asks at the runtime's version (13000).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  void* deprecated = nullptr;
  ASSERT_EQ(cudaGetDriverEntryPoint("cuMemAlloc", &deprecated, cudaEnableDefault, &status), cudaSuccess);
#pragma GCC diagnostic pop
  EXPECT_EQ(deprecated, fn);
  EXPECT_TRUE(queried(proc_queries(), "cuMemAlloc", 13000, 0));

  // Unknown symbols: success, NULL, and the driver's status.
  fn = reinterpret_cast<void*>(0x1);
  ASSERT_EQ(cudaGetDriverEntryPointByVersion("cuNoSuchFunction", &fn, 12000, 0, &status), cudaSuccess);
  EXPECT_EQ(fn, nullptr);
  EXPECT_EQ(status, cudaDriverEntryPointSymbolNotFound);
  // A version above the driver's is refused by the driver (CUDA_ERROR_INVALID_VALUE).
  EXPECT_EQ(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 99000, 0, &status), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  // Too old a version for the ABI asked for.
  ASSERT_EQ(cudaGetDriverEntryPointByVersion("cuLibraryLoadData", &fn, 11000, 0, &status), cudaSuccess);
  EXPECT_EQ(fn, nullptr);
  EXPECT_EQ(status, cudaDriverEntryPointVersionNotSufficent);
}

// ---------------------------------------------------------------------------------------------
// Devices, versions, errors, threads.

TEST_F(Runtime, DevicesAreSelectedPerThread) {
  reset("SIMCUDA_DEVICE_COUNT=2 SIMCUDA_DEVICE_MEMORY=1GiB SIMCUDA_GRANULARITY=2MiB");
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(count, 2);
  int device = -1;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(device, 0);
  EXPECT_EQ(cudaSetDevice(2), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);

  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(device, 1);
  const unsigned long long used0 = simcuda_device_used_bytes(0);
  const unsigned long long used1 = simcuda_device_used_bytes(1);
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, kMiB), cudaSuccess);
  EXPECT_EQ(simcuda_device_used_bytes(1), used1 + 2 * kMiB);
  EXPECT_EQ(simcuda_device_used_bytes(0), used0);

  // Another thread starts on device 0 with its own last error.
  std::thread other([&] {
    int d = -1;
    EXPECT_EQ(cudaGetDevice(&d), cudaSuccess);
    EXPECT_EQ(d, 0);
    void* q = nullptr;
    EXPECT_EQ(cudaMalloc(&q, kMiB), cudaSuccess);
    EXPECT_EQ(simcuda_device_used_bytes(1), used1 + 2 * kMiB);  // charged to device 0, not 1
    EXPECT_GE(simcuda_device_used_bytes(0), used0 + 2 * kMiB);
    EXPECT_EQ(cudaFree(q), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&q, 4 * kGiB), cudaErrorMemoryAllocation);
    EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
  });
  other.join();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);                     // the other thread's failure is not ours
  EXPECT_EQ(simcuda_call_count("cuDevicePrimaryCtxRetain"), 2u);  // once per device, not per thread
  EXPECT_EQ(cudaFree(p), cudaSuccess);

  int value = 0;
  EXPECT_EQ(cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, 1), cudaSuccess);
  EXPECT_GT(value, 0);
  EXPECT_EQ(cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, 5), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceGetAttribute(&value, static_cast<cudaDeviceAttr>(0), 0), cudaErrorInvalidValue);
}

TEST_F(Runtime, VersionsAreReported) {
  int runtime = 0, driver = 0;
  ASSERT_EQ(cudaRuntimeGetVersion(&runtime), cudaSuccess);
  EXPECT_EQ(runtime, 13000);
  ASSERT_EQ(cudaDriverGetVersion(&driver), cudaSuccess);
  EXPECT_GE(driver, 13000);
}

TEST_F(Runtime, ErrorNamesAndStrings) {
  EXPECT_STREQ(cudaGetErrorName(cudaSuccess), "cudaSuccess");
  EXPECT_STREQ(cudaGetErrorName(cudaErrorMemoryAllocation), "cudaErrorMemoryAllocation");
  EXPECT_STREQ(cudaGetErrorName(cudaErrorStreamCaptureUnsupported), "cudaErrorStreamCaptureUnsupported");
  EXPECT_STREQ(cudaGetErrorName(cudaErrorInvalidDeviceFunction), "cudaErrorInvalidDeviceFunction");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory");
  for (cudaError_t e :
       {cudaErrorInvalidValue, cudaErrorInitializationError, cudaErrorInsufficientDriver,
        cudaErrorCallRequiresNewerDriver, cudaErrorInvalidMemcpyDirection, cudaErrorInvalidConfiguration,
        cudaErrorInvalidDevice, cudaErrorInvalidKernelImage, cudaErrorDeviceUninitialized,
        cudaErrorInvalidResourceHandle, cudaErrorIllegalState, cudaErrorSymbolNotFound, cudaErrorNotSupported,
        cudaErrorStreamCaptureInvalidated, cudaErrorCapturedEvent, cudaErrorUnknown}) {
    ASSERT_NE(cudaGetErrorName(e), nullptr);
    EXPECT_EQ(std::strncmp(cudaGetErrorName(e), "cuda", 4), 0) << static_cast<int>(e);
    EXPECT_STRNE(cudaGetErrorString(e), "unrecognized error code") << static_cast<int>(e);
  }
  EXPECT_STREQ(cudaGetErrorName(static_cast<cudaError_t>(1000)), "unrecognized error code");
  EXPECT_STREQ(cudaGetErrorString(static_cast<cudaError_t>(1000)), "unrecognized error code");
}

TEST_F(Runtime, DriverErrorsMapToRuntimeErrors) {
  // CUDA_ERROR_INVALID_HANDLE -> cudaErrorInvalidResourceHandle.
  EXPECT_EQ(cudaStreamDestroy(reinterpret_cast<cudaStream_t>(0xdead0)), cudaErrorInvalidResourceHandle);
  // CUDA_ERROR_INVALID_IMAGE / INVALID_PTX for code that is not PTX.
  cudaLibrary_t library = nullptr;
  const cudaError_t bad_image = cudaLibraryLoadData(&library, "not a module", nullptr, nullptr, 0, nullptr, nullptr, 0);
  EXPECT_TRUE(bad_image == cudaErrorInvalidKernelImage || bad_image == cudaErrorInvalidPtx)
      << cudaGetErrorName(bad_image);
  // Ending a capture that was never begun: CUDA_ERROR_ILLEGAL_STATE -> cudaErrorIllegalState.
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorIllegalState);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST_F(Runtime, InjectedDriverFailuresArriveTranslated) {
  reset(
      "SIMCUDA_DEVICE_COUNT=1 SIMCUDA_DEVICE_MEMORY=1GiB SIMCUDA_GRANULARITY=2MiB "
      "SIMCUDA_FAIL=cuDevicePrimaryCtxRetain:1:CUDA_ERROR_OUT_OF_MEMORY,"
      "cuMemAlloc_v2:1:CUDA_ERROR_INVALID_CONTEXT,cuMemGetInfo_v2:1:CUDA_ERROR_NOT_INITIALIZED,"
      "cuStreamCreate:1:CUDA_ERROR_NOT_SUPPORTED,cuLibraryGetKernel:1:CUDA_ERROR_NOT_FOUND,"
      "cuLaunchKernel:1:CUDA_ERROR_LAUNCH_FAILED,cuStreamBeginCapture_v2:1:CUDA_ERROR_STREAM_CAPTURE_ISOLATION");
  // A failed context retain is not cached: the next call retains again and succeeds.
  EXPECT_EQ(cudaFree(nullptr), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaFree(nullptr), cudaSuccess);
  EXPECT_EQ(simcuda_call_count("cuDevicePrimaryCtxRetain"), 2u);

  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, kMiB), cudaErrorDeviceUninitialized);
  size_t free = 0, total = 0;
  EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaErrorInitializationError);
  cudaStream_t stream = nullptr;
  EXPECT_EQ(cudaStreamCreate(&stream), cudaErrorNotSupported);
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaErrorStreamCaptureIsolation);

  cudaLibrary_t library = nullptr;
  ASSERT_EQ(cudaLibraryLoadData(&library, kAddOnePtx, nullptr, nullptr, 0, nullptr, nullptr, 0), cudaSuccess);
  cudaKernel_t kernel = nullptr;
  EXPECT_EQ(cudaLibraryGetKernel(&kernel, library, "add_one"), cudaErrorSymbolNotFound);
  ASSERT_EQ(cudaLibraryGetKernel(&kernel, library, "add_one"), cudaSuccess);
  int* data = nullptr;
  unsigned count = 1;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&data), sizeof(int)), cudaSuccess);
  void* args[] = {&data, &count};
  EXPECT_EQ(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(1), dim3(1), args, 0, stream),
            cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);  // the most recent failure wins
  EXPECT_EQ(cudaFree(data), cudaSuccess);
  EXPECT_EQ(cudaLibraryUnload(library), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST_F(Runtime, ConcurrentFirstCallsInitialiseOnce) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < 20; ++i) {
        void* p = nullptr;
        EXPECT_EQ(cudaMalloc(&p, kMiB), cudaSuccess);
        EXPECT_EQ(cudaFree(p), cudaSuccess);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(simcuda_call_count("cuInit"), 1u);
  EXPECT_EQ(simcuda_call_count("cuDevicePrimaryCtxRetain"), 1u);
  EXPECT_EQ(simcuda_call_count("cuCtxSetCurrent"), 8u);  // once per thread
  EXPECT_EQ(simcuda_call_count("cuMemAlloc_v2"), 160u);
}

TEST_F(Runtime, FailedDriverInitialisationIsReportedAndRetried) {
  reset("SIMCUDA_DEVICE_COUNT=1 SIMCUDA_DEVICE_MEMORY=1GiB SIMCUDA_FAIL=cuInit:1:CUDA_ERROR_NO_DEVICE");
  int count = 7;
  EXPECT_EQ(cudaGetDeviceCount(&count), cudaErrorNoDevice);
  EXPECT_EQ(count, 0);
  EXPECT_EQ(cudaGetLastError(), cudaErrorNoDevice);
  EXPECT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(simcuda_call_count("cuInit"), 2u);
}

// ---------------------------------------------------------------------------------------------
// The serving oracle, reached through the runtime (programs that link only libcudart.so.13).

TEST_F(Runtime, MarkServingForwardsToTheDriversOracleWithOneLookup) {
  size_t before = 0;
  {
    std::lock_guard<std::mutex> lock(lookups_mutex());
    before = libcuda_lookups().size();
  }
  EXPECT_EQ(simcuda_serving_marked(), 0);
  EXPECT_EQ(simcudart_mark_serving(), 0);
  EXPECT_EQ(simcuda_serving_marked(), 1);
  std::lock_guard<std::mutex> lock(lookups_mutex());
  auto& lookups = libcuda_lookups();
  ASSERT_EQ(lookups.size(), before + 1);
  EXPECT_EQ(lookups.back(), "simcuda_mark_serving");
  // A test control, not part of the resolution path the tests above check: leave their log as it was.
  lookups.pop_back();
}

TEST_F(Runtime, RuntimeCopyIntoAliasedMemoryAfterMarkServingDies) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a forked child would start a fresh driver
  ASSERT_EQ(cudaFree(nullptr), cudaSuccess);       // initialises the driver and binds the context
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  CUmemAccessDesc rw{};
  rw.location = prop.location;
  rw.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CUdeviceptr va = 0;
  ASSERT_EQ(cuMemAddressReserve(&va, 4 * kMiB, 0, 0, 0), CUDA_SUCCESS);
  CUmemGenericAllocationHandle scratch = 0;
  ASSERT_EQ(cuMemCreate(&scratch, 2 * kMiB, &prop, 0), CUDA_SUCCESS);
  for (CUdeviceptr at : {va, va + 2 * kMiB}) ASSERT_EQ(cuMemMap(at, 2 * kMiB, 0, scratch, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemSetAccess(va, 4 * kMiB, &rw, 1), CUDA_SUCCESS);
  std::vector<int> host(16, 1);
  void* alias = reinterpret_cast<void*>(va + 2 * kMiB);
  ASSERT_EQ(cudaMemcpy(alias, host.data(), host.size() * sizeof(int), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EXIT(
      {
        simcudart_mark_serving();
        cudaMemcpy(alias, host.data(), host.size() * sizeof(int), cudaMemcpyHostToDevice);
      },
      ::testing::ExitedWithCode(86),
      "simcuda: serving oracle: cuMemcpy[A-Za-z_0-9]* touched 0x[0-9a-f]+ which maps a handle mapped at 2 addresses");
}

}  // namespace

TEST_F(Runtime, EventsTimeWorkAndStreamsWaitOnThem) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t start = nullptr, end = nullptr;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&end, cudaEventBlockingSync), cudaSuccess);
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 32 * kMiB), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(start, s), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(p, 3, 32 * kMiB, s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(end, s), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(nullptr, end, 0), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(end), cudaSuccess);
  ASSERT_EQ(cudaEventQuery(end), cudaSuccess);
  float ms = -1;
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, end), cudaSuccess);
  EXPECT_GE(ms, 0.0f);
  ASSERT_EQ(cudaEventDestroy(start), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(start), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  int can = -1;
  ASSERT_EQ(cudaDeviceCanAccessPeer(&can, 0, 0), cudaSuccess);
  EXPECT_EQ(can, 0) << "a device is not its own peer";
  ASSERT_EQ(cudaEventDestroy(end), cudaSuccess);
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST_F(Runtime, IpcHandleOpensInAnotherProcessOverSharedMemory) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 4 * kMiB), cudaSuccess);
  ASSERT_EQ(cudaMemset(p, 0x3c, 4 * kMiB), cudaSuccess);
  cudaIpcMemHandle_t handle;
  ASSERT_EQ(cudaIpcGetMemHandle(&handle, p), cudaSuccess);
  void* self = nullptr;
  EXPECT_NE(cudaIpcOpenMemHandle(&self, handle, cudaIpcMemLazyEnablePeerAccess), cudaSuccess)
      << "the exporting process cannot open its own handle";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // A second process of the simulator: the forked child's driver starts fresh, and so must the
    // runtime (a real runtime cannot be used across fork at all).
    simcudart_reset_for_tests();
    void* q = nullptr;
    unsigned char byte = 0;
    int rc = cudaIpcOpenMemHandle(&q, handle, cudaIpcMemLazyEnablePeerAccess) == cudaSuccess ? 0 : 1;
    if (rc == 0 && cudaMemcpy(&byte, static_cast<char*>(q) + 3 * kMiB, 1, cudaMemcpyDeviceToHost) != cudaSuccess) rc = 2;
    if (rc == 0 && byte != 0x3c) rc = 3;
    if (rc == 0 && cudaMemset(q, 0x11, 1) != cudaSuccess) rc = 4;
    if (rc == 0 && cudaIpcCloseMemHandle(q) != cudaSuccess) rc = 5;
    _exit(rc);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  unsigned char byte = 0;
  ASSERT_EQ(cudaMemcpy(&byte, p, 1, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(byte, 0x11) << "the child's write is visible to the exporter";
  ASSERT_EQ(cudaFree(p), cudaSuccess);
}

TEST_F(Runtime, PinnedHostMemoryAndStreamPriorities) {
  void* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(&pinned, kMiB, cudaHostAllocMapped), cudaSuccess);
  void* mapped = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(&mapped, pinned, 0), cudaSuccess);
  EXPECT_EQ(mapped, pinned) << "unified addressing: the same address on the device";
  std::vector<char> user(kMiB, 5);
  ASSERT_EQ(cudaHostRegister(user.data(), user.size(), cudaHostRegisterDefault), cudaSuccess);
  EXPECT_EQ(cudaHostRegister(user.data(), 64, cudaHostRegisterDefault), cudaErrorHostMemoryAlreadyRegistered);
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, kMiB), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d, user.data(), kMiB, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(pinned, d, kMiB, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(static_cast<char*>(pinned)[kMiB - 1], 5);
  ASSERT_EQ(cudaHostUnregister(user.data()), cudaSuccess);
  ASSERT_EQ(cudaFreeHost(pinned), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(pinned), cudaErrorInvalidValue);
  cudaGetLastError();
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, -100), cudaSuccess);
  int priority = 0;
  ASSERT_EQ(cudaStreamGetPriority(s, &priority), cudaSuccess);
  EXPECT_EQ(priority, -5) << "clamped to the greatest priority";
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  ASSERT_EQ(cudaFree(d), cudaSuccess);
}

// ---------------------------------------------------------------------------------------------
// Strided and peer copies, 2D sets, peer access and device properties.

TEST_F(Runtime, Memcpy2DAndMemset2DMoveExactlyTheirRows) {
  void* device = nullptr;
  size_t pitch = 0;
  ASSERT_EQ(cudaMallocPitch(&device, &pitch, 100, 4), cudaSuccess);
  ASSERT_GE(pitch, 100u);
  ASSERT_EQ(cudaMemset2D(device, pitch, 0, pitch, 4), cudaSuccess);
  EXPECT_EQ(cudaMemset2D(device, pitch, 0x5a, 100, 3), cudaSuccess);
  std::vector<unsigned char> all(pitch * 4);
  ASSERT_EQ(cudaMemcpy(all.data(), device, all.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t row = 0; row < 4; ++row)
    for (size_t col = 0; col < pitch; ++col)
      ASSERT_EQ(all[row * pitch + col], row < 3 && col < 100 ? 0x5a : 0) << row << "," << col;

  // Host rows of 64 bytes every 80 into the device rows, and back into a packed buffer.
  std::vector<unsigned char> src(80 * 4);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i + 1);
  EXPECT_EQ(cudaMemcpy2D(device, pitch, src.data(), 80, 64, 4, cudaMemcpyHostToDevice), cudaSuccess);
  std::vector<unsigned char> packed(64 * 4, 0);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  EXPECT_EQ(cudaMemcpy2DAsync(packed.data(), 64, device, pitch, 64, 4, cudaMemcpyDefault, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  for (size_t row = 0; row < 4; ++row)
    EXPECT_EQ(std::memcmp(&packed[row * 64], &src[row * 80], 64), 0) << row;
  EXPECT_EQ(cudaMemset2DAsync(device, pitch, 1, 8, 2, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_GT(simcuda_call_count("cuMemsetD2D8Async"), 0u) << "through the driver's 2D set";

  EXPECT_EQ(cudaMemcpy2D(device, pitch, src.data(), 80, 81, 4, cudaMemcpyHostToDevice), cudaErrorInvalidPitchValue)
      << "wider than the source pitch";
  EXPECT_EQ(cudaMemcpy2D(device, pitch, src.data(), 80, 64, 4, static_cast<cudaMemcpyKind>(9)),
            cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaMemcpy2D(device, pitch, src.data(), 80, 0, 4, cudaMemcpyHostToDevice), cudaSuccess) << "nothing";
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(cudaFree(device), cudaSuccess);
}

TEST_F(Runtime, PeerCopiesAndPeerAccessNameDevices) {
  reset("SIMCUDA_DEVICE_COUNT=2 SIMCUDA_DEVICE_MEMORY=1GiB SIMCUDA_GRANULARITY=2MiB");
  void* on0 = nullptr;
  void* on1 = nullptr;
  ASSERT_EQ(cudaMalloc(&on0, 4096), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&on1, 4096), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaMemset(on0, 0x3c, 4096), cudaSuccess);
  EXPECT_EQ(cudaMemcpyPeer(on1, 1, on0, 0, 4096), cudaSuccess);
  std::vector<unsigned char> back(4096, 0);
  ASSERT_EQ(cudaMemcpy(back.data(), on1, back.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_TRUE(std::all_of(back.begin(), back.end(), [](unsigned char v) { return v == 0x3c; }));
  EXPECT_EQ(cudaMemcpyPeerAsync(on0, 0, on1, 1, 4096, nullptr), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpyPeer(on1, 5, on0, 0, 16), cudaErrorInvalidDevice);

  EXPECT_EQ(cudaDeviceEnablePeerAccess(0, 0), cudaErrorInvalidDevice) << "a device is not its own peer";
  EXPECT_EQ(cudaDeviceEnablePeerAccess(1, 1), cudaErrorInvalidValue) << "flags must be 0";
  EXPECT_EQ(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess);
  EXPECT_EQ(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled);
  EXPECT_EQ(cudaDeviceDisablePeerAccess(1), cudaSuccess);
  EXPECT_EQ(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled);
  EXPECT_EQ(cudaFree(on0), cudaSuccess);
  EXPECT_EQ(cudaFree(on1), cudaSuccess);
}

TEST_F(Runtime, DevicePropertiesComeFromTheDriver) {
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  char name[256] = {};
  CUdevice device = 0;
  ASSERT_EQ(cuDeviceGet(&device, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuDeviceGetName(name, sizeof name, device), CUDA_SUCCESS);
  EXPECT_STREQ(prop.name, name);
  size_t total = 0;
  ASSERT_EQ(cuDeviceTotalMem(&total, device), CUDA_SUCCESS);
  EXPECT_EQ(prop.totalGlobalMem, total);
  CUuuid uuid{};
  ASSERT_EQ(cuDeviceGetUuid(&uuid, device), CUDA_SUCCESS);
  EXPECT_EQ(std::memcmp(prop.uuid.bytes, uuid.bytes, sizeof uuid.bytes), 0);
  for (const auto& [field, attribute] :
       {std::pair{prop.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR},
        std::pair{prop.minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR},
        std::pair{prop.multiProcessorCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
        std::pair{prop.warpSize, CU_DEVICE_ATTRIBUTE_WARP_SIZE}}) {
    int value = -1;
    ASSERT_EQ(cuDeviceGetAttribute(&value, attribute, device), CUDA_SUCCESS);
    EXPECT_EQ(field, value) << attribute;
  }
  EXPECT_GT(prop.major, 0);
  EXPECT_EQ(cudaGetDeviceProperties(nullptr, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetDeviceProperties(&prop, 3), cudaErrorInvalidDevice);
}

TEST_F(Runtime, PoolsAllocateStreamOrderedAndTrim) {
  cudaMemPool_t default_pool = nullptr, current = nullptr;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&default_pool, 0), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetMemPool(&current, 0), cudaSuccess);
  EXPECT_EQ(current, default_pool);
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t pool = nullptr;
  ASSERT_EQ(cudaMemPoolCreate(&pool, &props), cudaSuccess);
  cuuint64_t keep = 16 * kMiB;
  EXPECT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), cudaSuccess);
  const unsigned long long before = simcuda_device_used_bytes(0);
  void* p = nullptr;
  ASSERT_EQ(cudaMallocFromPoolAsync(&p, 4 * kMiB, pool, nullptr), cudaSuccess);
  EXPECT_EQ(simcuda_device_used_bytes(0), before + 4 * kMiB);
  cuuint64_t used = 0;
  EXPECT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used), cudaSuccess);
  EXPECT_EQ(used, 4 * kMiB);
  EXPECT_EQ(cudaFreeAsync(p, nullptr), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(simcuda_device_used_bytes(0), before + 4 * kMiB) << "idle under the release threshold";
  EXPECT_EQ(cudaMemPoolTrimTo(pool, 0), cudaSuccess);
  EXPECT_EQ(simcuda_device_used_bytes(0), before);
  EXPECT_EQ(cudaDeviceSetMemPool(0, pool), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetMemPool(&current, 0), cudaSuccess);
  EXPECT_EQ(current, pool);
  EXPECT_EQ(cudaDeviceSetMemPool(0, default_pool), cudaSuccess);
  EXPECT_EQ(cudaMemPoolDestroy(pool), cudaSuccess);
  EXPECT_EQ(cudaMemPoolDestroy(default_pool), cudaErrorInvalidValue) << "the default pool stays";
}

TEST_F(Runtime, IpcEventHandlesNeedInterprocessEvents) {
  cudaEvent_t timed = nullptr, shared = nullptr;
  ASSERT_EQ(cudaEventCreate(&timed), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&shared, cudaEventInterprocess | cudaEventDisableTiming), cudaSuccess);
  cudaIpcEventHandle_t handle{};
  EXPECT_EQ(cudaIpcGetEventHandle(&handle, timed), cudaErrorInvalidValue);
  ASSERT_EQ(cudaIpcGetEventHandle(&handle, shared), cudaSuccess);
  cudaEvent_t opened = nullptr;
  EXPECT_EQ(cudaIpcOpenEventHandle(&opened, handle), cudaErrorDeviceUninitialized)
      << "CUDA_ERROR_INVALID_CONTEXT: not in the exporting process";
  EXPECT_EQ(cudaEventDestroy(timed), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(shared), cudaSuccess);
}
