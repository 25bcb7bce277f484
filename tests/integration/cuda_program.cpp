// A CUDA program exercising every route to the driver; run by the integration tests with and without kvremap.
// Usage: cuda_program routes|captures|oom|faults|fork|fork-without-cuda|fork-while-kv-busy|wait|interrupt|tagged|two-devices|churn|lifetimes|
//        successive-threads|capture-ended-elsewhere|interleaved-captures|memory-saver|vmm-kv-handles|
//        vmm-kv-edges|vmm-kv-host-tail
// Prints what it did; the output must be identical with and without LD_PRELOAD=libkvremap.so.
// The deprecated cudaGetDriverEntryPoint is one of the routes engines still use.
#define CUDA_ENABLE_DEPRECATED 1
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#undef cuGetProcAddress
extern "C" CUresult cuGetProcAddress(const char*, void**, int, cuuint64_t);

constexpr std::size_t kMiB = 1 << 20;

extern "C" __attribute__((visibility("default"))) void simcuda_kernel_touch(void** params) {
  auto* p = *static_cast<unsigned char**>(params[0]);
  p[0] = 1;
}

// PyTorch's int8 fill kernel, as torch.zeros and Tensor.fill_ launch it on a contiguous tensor
// (vectorized_elementwise_kernel(int N, FillFunctor<int8_t> f, array<char*, 1> data), ATen's
// native/cuda/FillKernel.cu and CUDALoops.cuh; the array type is this program's own).
#define TORCH_FILL_NAME \
  _ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIaEENS0_5ArrayIPcLi1EEEEEviT0_T1_
#define TORCH_FILL_TEXT(name) #name
#define TORCH_FILL_STRING(name) TORCH_FILL_TEXT(name)
#define TORCH_FILL_TWIN(name) TORCH_FILL_TWIN_(name)
#define TORCH_FILL_TWIN_(name) simcuda_kernel_##name
extern "C" __attribute__((visibility("default"))) void TORCH_FILL_TWIN(TORCH_FILL_NAME)(void** params) {
  const int n = *static_cast<int*>(params[0]);
  const auto value = *static_cast<unsigned char*>(params[1]);
  auto* data = *static_cast<unsigned char**>(params[2]);
  if (n > 0) std::memset(data, value, static_cast<std::size_t>(n));
}

namespace {

const char* kPtx =
    ".version 8.0\n.target sm_90\n.address_size 64\n// simcuda-module-bytes: 10MiB\n"
    ".visible .entry touch(.param .u64 p)\n{\nret;\n}\n"
    ".visible .entry " TORCH_FILL_STRING(TORCH_FILL_NAME) "(.param .u32 n, .param .align 1 .b8 f[1], "
    ".param .align 8 .b8 data[8])\n{\nret;\n}\n";

int failures = 0;

// kvremap's tagging API where the library is preloaded (RTLD_DEFAULT finds its exports); without it
// both are null and the tags are skipped, as an engine's would be.
struct TagApi {
  int (*push)(const char*) = nullptr;
  int (*pop)() = nullptr;
  void open_kv() const {
    if (push) push("kv");
  }
  void close() const {
    if (pop) pop();
  }
};

TagApi tag_api() {
  return {reinterpret_cast<int (*)(const char*)>(dlsym(RTLD_DEFAULT, "kvremap_tag_push")),
          reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "kvremap_tag_pop"))};
}

void check(bool ok, const char* what) {
  std::printf("%s: %s\n", what, ok ? "ok" : "FAILED");
  if (!ok) ++failures;
}

using AllocFn = CUresult (*)(CUdeviceptr*, size_t);

void alloc_through(AllocFn fn, std::size_t bytes, const char* route) {
  CUdeviceptr p = 0;
  check(fn && fn(&p, bytes) == CUDA_SUCCESS && p != 0, route);
}

int routes() {
  void* p = nullptr;
  check(cudaMalloc(&p, 3 * kMiB) == cudaSuccess, "runtime cudaMalloc 3MiB");
  alloc_through(&cuMemAlloc_v2, 5 * kMiB, "direct symbol cuMemAlloc_v2 5MiB");

  void* driver = dlopen("libcuda.so.1", RTLD_NOW);
  alloc_through(reinterpret_cast<AllocFn>(dlsym(driver, "cuMemAlloc_v2")), 7 * kMiB, "dlsym cuMemAlloc_v2 7MiB");

  auto gpa = reinterpret_cast<decltype(&cuGetProcAddress_v2)>(dlsym(driver, "cuGetProcAddress_v2"));
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status{};
  check(gpa && gpa("cuMemAlloc", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status) == CUDA_SUCCESS, "resolve 12000/0");
  alloc_through(reinterpret_cast<AllocFn>(fn), 9 * kMiB, "cuGetProcAddress 12000 flags 0 9MiB");
  check(gpa("cuMemAlloc", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status) == CUDA_SUCCESS,
        "resolve 12000/2");
  alloc_through(reinterpret_cast<AllocFn>(fn), 11 * kMiB, "cuGetProcAddress 12000 flags 2 11MiB");
  auto gpa4 = reinterpret_cast<decltype(&cuGetProcAddress)>(dlsym(driver, "cuGetProcAddress"));
  check(gpa4 && gpa4("cuMemAlloc", &fn, 11030, 0) == CUDA_SUCCESS, "resolve 11030 (4 arguments)");
  alloc_through(reinterpret_cast<AllocFn>(fn), 13 * kMiB, "cuGetProcAddress 11030 13MiB");

  cudaDriverEntryPointQueryResult rt_status{};
  check(cudaGetDriverEntryPoint("cuMemAlloc", &fn, cudaEnableDefault, &rt_status) == cudaSuccess, "entry point");
  alloc_through(reinterpret_cast<AllocFn>(fn), 15 * kMiB, "cudaGetDriverEntryPoint 15MiB");
  check(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 12000, cudaEnableDefault, &rt_status) == cudaSuccess,
        "entry point by version");
  alloc_through(reinterpret_cast<AllocFn>(fn), 17 * kMiB, "cudaGetDriverEntryPointByVersion 17MiB");

  void* pooled = nullptr;
  check(cudaMallocAsync(&pooled, 19 * kMiB, nullptr) == cudaSuccess, "cudaMallocAsync 19MiB");
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  CUmemGenericAllocationHandle handle = 0;
  check(cuMemCreate(&handle, 2 * kMiB, &prop, 0) == CUDA_SUCCESS, "cuMemCreate 2MiB");

  size_t free_bytes = 0, total = 0;
  check(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess, "cudaMemGetInfo");
  std::printf("free %zu MiB of %zu MiB\n", free_bytes / kMiB, total / kMiB);
  check(cudaFree(p) == cudaSuccess, "cudaFree 3MiB");
  check(cudaFreeAsync(pooled, nullptr) == cudaSuccess, "cudaFreeAsync 19MiB");
  return failures;
}

// Captures a one-kernel graph on `stream`, allocating `inside` bytes during the capture (relaxed
// thread mode, as PyTorch does); returns the graph.
cudaGraph_t capture_with_allocation(cudaStream_t stream, cudaStreamCaptureMode mode, std::size_t inside,
                                    cudaKernel_t kernel, void* target) {
  check(cudaStreamBeginCapture(stream, mode) == cudaSuccess, "begin capture");
  cudaStreamCaptureMode relaxed = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&relaxed);
  void* p = nullptr;
  check(cudaMalloc(&p, inside) == cudaSuccess, "allocation inside capture");
  cudaThreadExchangeStreamCaptureMode(&relaxed);
  void* args[] = {&target};
  check(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(1), dim3(1), args, 0, stream) == cudaSuccess,
        "captured launch");
  cudaGraph_t graph = nullptr;
  check(cudaStreamEndCapture(stream, &graph) == cudaSuccess && graph, "end capture");
  return graph;
}

// Loads kPtx (a 10 MiB module) and returns its `touch` kernel.
cudaKernel_t touch_kernel() {
  cudaLibrary_t library = nullptr;
  check(cudaLibraryLoadData(&library, kPtx, nullptr, nullptr, 0, nullptr, nullptr, 0) == cudaSuccess,
        "library load (10MiB)");
  cudaKernel_t kernel = nullptr;
  check(cudaLibraryGetKernel(&kernel, library, "touch") == cudaSuccess, "get kernel");
  return kernel;
}

// The library of kPtx once, and its PyTorch fill kernel.
cudaKernel_t torch_fill_kernel() {
  static cudaKernel_t kernel = [] {
    cudaLibrary_t library = nullptr;
    cudaKernel_t k = nullptr;
    check(cudaLibraryLoadData(&library, kPtx, nullptr, nullptr, 0, nullptr, nullptr, 0) == cudaSuccess &&
              cudaLibraryGetKernel(&k, library, TORCH_FILL_STRING(TORCH_FILL_NAME)) == cudaSuccess,
          "PyTorch's fill kernel");
    return k;
  }();
  return kernel;
}

// Tensor.fill_(value) of `bytes` int8 elements at `base`, one launch (a 32-bit element count).
bool torch_fill(void* base, std::size_t bytes, unsigned char value) {
  int n = static_cast<int>(bytes);
  unsigned char functor = value;
  void* data = base;
  void* args[] = {&n, &functor, &data};
  return cudaLaunchKernel(reinterpret_cast<const void*>(torch_fill_kernel()), dim3(1), dim3(1), args, 0, nullptr) ==
         cudaSuccess;
}

int captures() {
  cudaKernel_t kernel = touch_kernel();
  void* target = nullptr;
  check(cudaMalloc(&target, 1 * kMiB) == cudaSuccess, "outside capture 1MiB");

  cudaGraph_t graph_a = nullptr, graph_b = nullptr;
  std::thread a([&] {
    cudaStream_t s = nullptr;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    graph_a = capture_with_allocation(s, cudaStreamCaptureModeGlobal, 4 * kMiB, kernel, target);
  });
  a.join();
  std::thread b([&] {
    cudaStream_t s = nullptr;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    graph_b = capture_with_allocation(s, cudaStreamCaptureModeRelaxed, 8 * kMiB, kernel, target);
  });
  b.join();
  void* after = nullptr;
  check(cudaMalloc(&after, 2 * kMiB) == cudaSuccess, "outside capture 2MiB");

  cudaGraphExec_t exec_a = nullptr, exec_b = nullptr;
  check(cudaGraphInstantiate(&exec_a, graph_a, 0) == cudaSuccess, "instantiate a");
  check(cudaGraphInstantiateWithFlags(&exec_b, graph_b, 0) == cudaSuccess, "instantiate b");
  check(cudaGraphLaunch(exec_a, nullptr) == cudaSuccess, "launch a");
  check(cudaGraphLaunch(exec_b, nullptr) == cudaSuccess, "launch b");
  check(cudaDeviceSynchronize() == cudaSuccess, "synchronize");
  check(static_cast<unsigned char*>(target)[0] == 1, "graph wrote through the captured pointer");
  check(cudaGraphExecDestroy(exec_b) == cudaSuccess, "destroy exec b");
  return failures;
}

int oom() {
  void* p = nullptr;
  const cudaError_t r = cudaMalloc(&p, std::size_t(1) << 50);
  std::printf("huge cudaMalloc: %d (%s)\n", static_cast<int>(r), cudaGetErrorName(r));
  const cudaError_t last = cudaGetLastError();
  std::printf("last error: %d\n", static_cast<int>(last));
  return r == cudaErrorMemoryAllocation ? 0 : 1;
}

int faults() {
  // Run with SIMCUDA_FAIL naming the driver calls below: the program sees the injected errors.
  void* p = nullptr;
  std::printf("cudaMalloc: %d\n", static_cast<int>(cudaMalloc(&p, kMiB)));
  CUdeviceptr d = 0;
  std::printf("cuMemAlloc: %d\n", static_cast<int>(cuMemAlloc_v2(&d, kMiB)));
  size_t f = 0, t = 0;
  std::printf("cudaMemGetInfo: %d\n", static_cast<int>(cudaMemGetInfo(&f, &t)));
  return 0;
}

int fork_workers() {
  // Engines start their workers before touching CUDA (a CUDA context does not survive fork); then
  // parent and worker each use CUDA on their own.
  std::fflush(stdout);
  const pid_t child = fork();
  if (child == 0) {
    void* q = nullptr;
    const bool ok = cudaMalloc(&q, 12 * kMiB) == cudaSuccess;
    std::printf("child allocation: %s\n", ok ? "ok" : "FAILED");
    std::fflush(stdout);
    std::exit(ok ? 0 : 1);
  }
  void* p = nullptr;
  check(cudaMalloc(&p, 6 * kMiB) == cudaSuccess, "parent allocation");
  int status = 0;
  waitpid(child, &status, 0);
  check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child exited cleanly");
  return failures;
}

// A child forked after the parent's first CUDA call that exits without one (a helper process: a
// compiler, a tokenizer): it inherits the parent's exit handlers, and std::exit runs them.
int fork_without_cuda() {
  void* p = nullptr;
  check(cudaMalloc(&p, 6 * kMiB) == cudaSuccess, "parent allocation");
  std::fflush(stdout);
  const pid_t child = fork();
  if (child == 0) {
    std::printf("child exits without CUDA\n");
    std::fflush(stdout);
    std::exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child exited cleanly");
  return failures;
}

// A fork while another thread is inside kvremap's KV state (placing a tagged KV tensor: run with
// SIMCUDA_LATENCY_US=cuMemMap=..., so the placement holds the state's lock for that long): the child has
// only the forking thread, and its own KV-sized allocation must not wait for a lock nobody in it will
// release. The child gives up after 20 s (SIGALRM kills it).
int fork_while_kv_busy() {
  check(cudaFree(nullptr) == cudaSuccess, "context");
  std::atomic<bool> placing{false};
  std::thread placer([&] {
    check(cudaSetDevice(0) == cudaSuccess, "placer device");
    const TagApi tags = tag_api();
    tags.open_kv();
    placing = true;
    void* kv = nullptr;
    check(cudaMalloc(&kv, 32 * kMiB) == cudaSuccess, "tagged KV tensor");
    tags.close();
  });
  while (!placing) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // well inside the placement's slow mapping
  std::fflush(stdout);
  const pid_t child = fork();
  if (child == 0) {
    alarm(20);
    CUdevice device = 0;
    CUcontext context = nullptr;
    const bool context_ok = cuInit(0) == CUDA_SUCCESS && cuDeviceGet(&device, 0) == CUDA_SUCCESS &&
                            cuDevicePrimaryCtxRetain(&context, device) == CUDA_SUCCESS &&
                            cuCtxSetCurrent(context) == CUDA_SUCCESS;
    void* q = nullptr;
    const bool ok = context_ok && cudaMalloc(&q, 96 * kMiB) == cudaSuccess;
    std::printf("child KV-sized allocation: %s\n", ok ? "ok" : "FAILED");
    std::fflush(stdout);
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child exited cleanly");
  if (WIFSIGNALED(status)) std::printf("child killed by signal %d\n", WTERMSIG(status));
  placer.join();
  return failures;
}

// With TAGGED_REPORT=1: the simulated driver's VMM objects still alive and its call counts, for
// the fault-injection test (leaks, and how many calls of each function there are to fail).
void report_driver_state() {
  using Count = unsigned long long (*)();
  using Calls = unsigned long long (*)(const char*);
  auto get = [](const char* name) { return dlsym(RTLD_DEFAULT, name); };
  auto handles = reinterpret_cast<Count>(get("simcuda_live_handles"));
  auto reservations = reinterpret_cast<Count>(get("simcuda_live_reservations"));
  auto mappings = reinterpret_cast<Count>(get("simcuda_live_mappings"));
  auto host = reinterpret_cast<Count>(get("simcuda_host_used_bytes"));
  auto calls = reinterpret_cast<Calls>(get("simcuda_call_count"));
  if (!handles || !reservations || !mappings || !host || !calls) return;
  std::printf("live: handles=%llu reservations=%llu mappings=%llu host_bytes=%llu\n", handles(), reservations(),
              mappings(), host());
  std::printf("calls:");
  for (const char* fn : {"cuMemAddressReserve", "cuMemCreate", "cuMemMap", "cuMemUnmap", "cuMemSetAccess",
                         "cuMemsetD8_v2", "cuMemRelease", "cuMemAddressFree", "cuCtxSynchronize", "cuMemGetInfo_v2",
                         "cuDeviceGetAttribute", "cuMemGetAllocationGranularity"})
    std::printf(" %s=%llu", fn, calls(fn));
  std::printf("\n");
}

// An engine that tags its KV cache explicitly (as a plugin would through ctypes), then captures a
// graph writing into it, queries memory and replays the graph. With TAGGED_CALL_COMMIT=1 it calls
// kvremap_commit() before the replay. The output is the same with or without kvremap.
int tagged() {
  const TagApi tags = tag_api();
  auto commit = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "kvremap_commit"));
  // Stops at the first failure: an injected driver error must not turn into a crash of this program.
#define TAGGED_STEP(expr, what) \
  do {                          \
    check((expr), what);        \
    if (failures) return 1;     \
  } while (0)
  void* warm = nullptr;
  TAGGED_STEP(cudaMalloc(&warm, kMiB) == cudaSuccess, "warm-up allocation");
  tags.open_kv();
  unsigned char* kv[3] = {};
  for (auto& t : kv) {
    TAGGED_STEP(cudaMalloc(reinterpret_cast<void**>(&t), 32 * kMiB) == cudaSuccess, "KV tensor");
    TAGGED_STEP(cudaMemset(t, 0, 32 * kMiB) == cudaSuccess, "KV zeroed");
  }
  tags.close();
  void* autotune = nullptr;
  TAGGED_STEP(cudaMalloc(&autotune, 8 * kMiB) == cudaSuccess, "post-KV allocation");
  cudaStream_t s = nullptr;
  TAGGED_STEP(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
  TAGGED_STEP(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "begin capture");
  TAGGED_STEP(cudaMemsetAsync(kv[1] + 4096, 0x7a, 4096, s) == cudaSuccess, "captured write into KV");
  cudaGraph_t graph = nullptr;
  TAGGED_STEP(cudaStreamEndCapture(s, &graph) == cudaSuccess, "end capture");
  cudaGraphExec_t exec = nullptr;
  TAGGED_STEP(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
  size_t free_bytes = 0, total = 0;
  TAGGED_STEP(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess, "memory query");
  if (commit && std::getenv("TAGGED_CALL_COMMIT")) TAGGED_STEP(commit() == 0, "kvremap_commit");
  TAGGED_STEP(cudaGraphLaunch(exec, s) == cudaSuccess, "replay");
  TAGGED_STEP(cudaStreamSynchronize(s) == cudaSuccess, "synchronize");
  unsigned char back[2] = {};
  TAGGED_STEP(cudaMemcpy(&back[0], kv[1] + 4096, 1, cudaMemcpyDeviceToHost) == cudaSuccess &&
                  cudaMemcpy(&back[1], kv[1], 1, cudaMemcpyDeviceToHost) == cudaSuccess,
              "read back");
  TAGGED_STEP(back[0] == 0x7a && back[1] == 0, "the replay wrote into the KV cache, the rest is zero");
  for (auto& t : kv) TAGGED_STEP(cudaFree(t) == cudaSuccess, "KV freed");
  if (std::getenv("TAGGED_REPORT")) report_driver_state();
  return failures;
#undef TAGGED_STEP
}

// One way of reaching a KV tensor; each that writes checks its bytes read back.
void touch_kv(const std::string& touch, unsigned char* kv[2], unsigned char* device_scratch) {
  if (touch == "ipc") {
    cudaIpcMemHandle_t handle{};
    std::printf("ipc handle of KV: %d\n", static_cast<int>(cudaIpcGetMemHandle(&handle, kv[1])));
  } else if (touch == "retain") {
    CUmemGenericAllocationHandle handle = 0;
    const CUresult r = cuMemRetainAllocationHandle(&handle, kv[1] + 4096);
    std::printf("retained the handle of KV: %d\n", static_cast<int>(r));
    if (r == CUDA_SUCCESS) check(cuMemRelease(handle) == CUDA_SUCCESS, "release the retained handle");
  } else if (touch == "retain2") {
    // The handles behind two addresses 16 MiB apart in one tensor: one handle backs both only when
    // the tensor is one allocation.
    CUmemGenericAllocationHandle first = 0, second = 0;
    check(cuMemRetainAllocationHandle(&first, kv[1] + 4096) == CUDA_SUCCESS &&
              cuMemRetainAllocationHandle(&second, kv[1] + 20 * kMiB) == CUDA_SUCCESS,
          "retain the handles behind KV");
    std::printf("one handle behind the tensor: %d\n", first == second ? 1 : 0);
    check(cuMemRelease(first) == CUDA_SUCCESS && cuMemRelease(second) == CUDA_SUCCESS, "release the retained handles");
  } else if (touch == "dmabuf") {
    int fd = -1;
    std::printf("dma-buf of KV: %d\n",
                static_cast<int>(cuMemGetHandleForAddressRange(&fd, reinterpret_cast<CUdeviceptr>(kv[1]), 2 * kMiB,
                                                               CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0)));
  } else if (touch == "attributes") {
    CUpointer_attribute attributes[2] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    CUdeviceptr start = 0;
    size_t size = 0;
    void* data[2] = {&start, &size};
    std::printf("attributes of KV: %d\n",
                static_cast<int>(cuPointerGetAttributes(2, attributes, data, reinterpret_cast<CUdeviceptr>(kv[1]))));
  } else if (touch == "triton") {
    // What Triton's launcher asks of every tensor argument before every launch: attributes that describe
    // the address, not what backs it. Answered as for any cudaMalloc.
    for (int launch = 0; launch < 100; ++launch) {
      const auto inside = reinterpret_cast<CUdeviceptr>(kv[launch % 2]) + static_cast<CUdeviceptr>(launch) * 4096;
      CUdeviceptr device_pointer = 0;
      check(cuPointerGetAttribute(&device_pointer, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, inside) == CUDA_SUCCESS &&
                device_pointer == inside,
            "the device pointer of a KV address is itself");
      unsigned int memory_type = 0;
      int ordinal = -1;
      CUcontext context = nullptr;
      CUpointer_attribute attributes[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                           CU_POINTER_ATTRIBUTE_CONTEXT};
      void* data[3] = {&memory_type, &ordinal, &context};
      check(cuPointerGetAttributes(3, attributes, data, inside) == CUDA_SUCCESS &&
                memory_type == CU_MEMORYTYPE_DEVICE && ordinal == 0,
            "a KV address is device memory of device 0");
    }
    std::printf("pointer queries of KV: 100 launches' worth\n");
  } else if (touch == "ranges") {
    // Every range query, twice (the first may commit the deferred cache), from an address deep inside
    // the tensor: the whole tensor, as for any cudaMalloc of its size.
    const auto inside = reinterpret_cast<CUdeviceptr>(kv[1]) + 20 * kMiB + 123;
    for (int round = 0; round < 2; ++round) {
      CUdeviceptr base = 0, start = 0, start2 = 0;
      size_t size = 0, size2 = 0, size3 = 0;
      check(cuMemGetAddressRange(&base, &size, inside) == CUDA_SUCCESS, "cuMemGetAddressRange");
      check(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, inside) == CUDA_SUCCESS &&
                cuPointerGetAttribute(&size2, CU_POINTER_ATTRIBUTE_RANGE_SIZE, inside) == CUDA_SUCCESS,
            "cuPointerGetAttribute");
      CUpointer_attribute attributes[2] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
      void* data[2] = {&start2, &size3};
      check(cuPointerGetAttributes(2, attributes, data, inside) == CUDA_SUCCESS, "cuPointerGetAttributes");
      const auto whole = reinterpret_cast<CUdeviceptr>(kv[1]);
      check(base == whole && start == whole && start2 == whole, "range start is the KV tensor's");
      check(size == 32 * kMiB && size2 == 32 * kMiB && size3 == 32 * kMiB, "range size is the KV tensor's");
      std::printf("range of KV (round %d): +%llu, %zu bytes\n", round, static_cast<unsigned long long>(base - whole),
                  size);
    }
  } else if (touch == "memset32") {
    const auto at = reinterpret_cast<CUdeviceptr>(kv[1]) + kMiB;
    check(cuMemsetD32(at, 0x01020304u, 16) == CUDA_SUCCESS, "cuMemsetD32 on KV");
    std::uint32_t back[16] = {};
    check(cudaMemcpy(back, kv[1] + kMiB, sizeof back, cudaMemcpyDeviceToHost) == cudaSuccess, "read the memset back");
    check(std::all_of(std::begin(back), std::end(back), [](auto v) { return v == 0x01020304u; }),
          "the 32-bit memset is in the KV cache");
    std::printf("memset32 of KV read back\n");
  } else if (touch == "memset2d") {
    const auto at = reinterpret_cast<CUdeviceptr>(kv[1]) + 2 * kMiB;
    check(cuMemsetD2D8(at, 256, 0x5a, 16, 4) == CUDA_SUCCESS, "cuMemsetD2D8 on KV");
    unsigned char row[16] = {};
    check(cudaMemcpy(row, kv[1] + 2 * kMiB + 3 * 256, sizeof row, cudaMemcpyDeviceToHost) == cudaSuccess,
          "read the last row back");
    check(std::all_of(std::begin(row), std::end(row), [](auto v) { return v == 0x5a; }),
          "the 2D memset is in the KV cache");
    std::printf("memset2d of KV read back\n");
  } else if (touch == "copy2d") {
    unsigned char rows[4][32];
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 32; ++c) rows[r][c] = static_cast<unsigned char>(r * 32 + c + 1);
    CUDA_MEMCPY2D copy{};
    copy.srcMemoryType = CU_MEMORYTYPE_HOST;
    copy.srcHost = rows;
    copy.srcPitch = 32;
    copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.dstDevice = reinterpret_cast<CUdeviceptr>(kv[1]) + 3 * kMiB;
    copy.dstPitch = 4096;
    copy.WidthInBytes = 32;
    copy.Height = 4;
    check(cuMemcpy2D(&copy) == CUDA_SUCCESS, "cuMemcpy2D into KV");
    unsigned char last[32] = {};
    check(cudaMemcpy(last, kv[1] + 3 * kMiB + 3 * 4096, sizeof last, cudaMemcpyDeviceToHost) == cudaSuccess,
          "read the last row back");
    check(std::memcmp(last, rows[3], sizeof last) == 0, "the 2D copy is in the KV cache");
    std::printf("copy2d into KV read back\n");
  } else if (touch == "peer") {
    CUcontext ctx = nullptr;
    check(cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx, "current context");
    check(cudaMemset(device_scratch, 0x77, 64) == cudaSuccess, "fill the source");
    check(cuMemcpyPeer(reinterpret_cast<CUdeviceptr>(kv[1]) + 4 * kMiB, ctx,
                       reinterpret_cast<CUdeviceptr>(device_scratch), ctx, 64) == CUDA_SUCCESS,
          "cuMemcpyPeer into KV");
    unsigned char back[64] = {};
    check(cudaMemcpy(back, kv[1] + 4 * kMiB, sizeof back, cudaMemcpyDeviceToHost) == cudaSuccess, "read back");
    check(std::all_of(std::begin(back), std::end(back), [](auto v) { return v == 0x77; }),
          "the peer copy is in the KV cache");
    std::printf("peer copy into KV read back\n");
  } else if (touch == "rt-memset2d") {
    check(cudaMemset2D(kv[1] + 6 * kMiB, 512, 0x42, 64, 3) == cudaSuccess, "cudaMemset2D on KV");
    unsigned char row[64] = {};
    check(cudaMemcpy(row, kv[1] + 6 * kMiB + 2 * 512, sizeof row, cudaMemcpyDeviceToHost) == cudaSuccess,
          "read the last row back");
    check(std::all_of(std::begin(row), std::end(row), [](auto v) { return v == 0x42; }),
          "the runtime's 2D memset is in the KV cache");
    std::printf("runtime memset2d of KV read back\n");
  } else if (touch == "rt-copy2d") {
    unsigned char rows[3][16];
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 16; ++c) rows[r][c] = static_cast<unsigned char>(0x80 + r * 16 + c);
    check(cudaMemcpy2D(kv[1] + 7 * kMiB, 1024, rows, 16, 16, 3, cudaMemcpyHostToDevice) == cudaSuccess,
          "cudaMemcpy2D into KV");
    unsigned char last[16] = {};
    check(cudaMemcpy(last, kv[1] + 7 * kMiB + 2 * 1024, sizeof last, cudaMemcpyDeviceToHost) == cudaSuccess,
          "read the last row back");
    check(std::memcmp(last, rows[2], sizeof last) == 0, "the runtime's 2D copy is in the KV cache");
    std::printf("runtime copy2d into KV read back\n");
  } else if (touch == "rt-peer") {
    check(cudaMemset(device_scratch, 0x66, 32) == cudaSuccess, "fill the source");
    check(cudaMemcpyPeer(kv[1] + 9 * kMiB, 0, device_scratch, 0, 32) == cudaSuccess, "cudaMemcpyPeer into KV");
    unsigned char back[32] = {};
    check(cudaMemcpy(back, kv[1] + 9 * kMiB, sizeof back, cudaMemcpyDeviceToHost) == cudaSuccess, "read back");
    check(std::all_of(std::begin(back), std::end(back), [](auto v) { return v == 0x66; }),
          "the runtime's peer copy is in the KV cache");
    std::printf("runtime peer copy into KV read back\n");
  } else if (touch == "copy") {
    const unsigned char one = 0x33;
    unsigned char back = 0;
    check(cudaMemcpy(kv[1] + 5 * kMiB, &one, 1, cudaMemcpyHostToDevice) == cudaSuccess &&
              cudaMemcpy(&back, kv[1] + 5 * kMiB, 1, cudaMemcpyDeviceToHost) == cudaSuccess && back == one,
          "a byte copied into KV reads back");
  } else {
    check(false, ("unknown TOUCH " + touch).c_str());
  }
}

// After its tagged KV burst, the engine's first touch of the cache is a host-to-device copy into it
// (a KV connector loading a cached prefix): the copy must land in committed memory, and read back.
// TOUCH=ipc|retain|retain2|dmabuf|attributes: an IPC handle, the VMM handle(s) (cuMemRetainAllocationHandle), a
// dma-buf or pointer attributes of a KV tensor come first; TOUCH=ranges: every range query, checked;
// TOUCH=memset32|memset2d|copy2d|peer (driver) or rt-memset2d|rt-copy2d|rt-peer (runtime): a write by
// that family, read back. A comma-separated list touches in that order.
int kv_copy() {
  const TagApi tags = tag_api();
  void* warm = nullptr;
  check(cudaMalloc(&warm, kMiB) == cudaSuccess, "warm-up allocation");
  const std::string burst_write = std::getenv("BURST_WRITE") ? std::getenv("BURST_WRITE") : "";
  const bool zeros_by_kernel = std::getenv("KV_ZEROS") && std::string(std::getenv("KV_ZEROS")) == "kernel";
  if (zeros_by_kernel || burst_write == "fill-kernel") torch_fill_kernel();  // its module loads before the KV
  tags.open_kv();
  unsigned char* kv[2] = {};
  // BURST_WRITE (memset, copy): the engine writes into the second tensor right after allocating it,
  // inside its KV burst.
  // fill-kernel: PyTorch's fill kernel with a non-zero value. KV_ZEROS=kernel zeroes each tensor as
  // torch.zeros does on a GPU (the fill kernel with zero) instead of cudaMemset.
  unsigned char written[4096];
  for (std::size_t i = 0; i < sizeof written; ++i) written[i] = static_cast<unsigned char>(0x5a ^ (i * 13));
  for (auto& t : kv) {
    check(cudaMalloc(reinterpret_cast<void**>(&t), 32 * kMiB) == cudaSuccess, "KV tensor");
    check(zeros_by_kernel ? torch_fill(t, 32 * kMiB, 0) : (cudaMemset(t, 0, 32 * kMiB) == cudaSuccess), "KV zeroed");
  }
  if (burst_write == "memset")
    check(cudaMemset(kv[1] + 65536, 0x5a, sizeof written) == cudaSuccess, "memset in the burst");
  if (burst_write == "fill-kernel") check(torch_fill(kv[1] + 65536, sizeof written, 0x5a), "fill kernel in the burst");
  if (burst_write == "memset" || burst_write == "fill-kernel") std::memset(written, 0x5a, sizeof written);
  if (burst_write == "copy")
    check(cudaMemcpy(kv[1] + 65536, written, sizeof written, cudaMemcpyHostToDevice) == cudaSuccess,
          "copy in the burst");
  tags.close();
  void* autotune = nullptr;
  check(cudaMalloc(&autotune, 8 * kMiB) == cudaSuccess, "post-KV allocation");
  // Each touch of TOUCH (comma-separated, in order): the first reaches the deferred cache, later ones
  // the committed one.
  const std::string touches = std::getenv("TOUCH") ? std::getenv("TOUCH") : "copy";
  for (std::size_t at = 0; at <= touches.size();) {
    const std::size_t end = std::min(touches.find(',', at), touches.size());
    touch_kv(touches.substr(at, end - at), kv, static_cast<unsigned char*>(warm));
    at = end + 1;
  }
  unsigned char pattern[4096];
  for (std::size_t i = 0; i < sizeof pattern; ++i) pattern[i] = static_cast<unsigned char>(i * 7 + 1);
  check(cudaMemcpy(kv[1] + 8192, pattern, sizeof pattern, cudaMemcpyHostToDevice) == cudaSuccess, "copy into KV");
  unsigned char back[4096] = {};
  unsigned char other = 0xff;
  check(cudaMemcpy(back, kv[1] + 8192, sizeof back, cudaMemcpyDeviceToHost) == cudaSuccess &&
            cudaMemcpy(&other, kv[0] + 8192, 1, cudaMemcpyDeviceToHost) == cudaSuccess,
        "read back");
  check(std::memcmp(back, pattern, sizeof back) == 0, "the copy is in the KV cache");
  check(other == 0, "the rest of the KV cache is zero");
  if (!burst_write.empty()) {
    unsigned char kept[sizeof written] = {};
    check(cudaMemcpy(kept, kv[1] + 65536, sizeof kept, cudaMemcpyDeviceToHost) == cudaSuccess &&
              std::memcmp(kept, written, sizeof kept) == 0,
          "what the burst wrote is still there");
  }
  std::printf("kv-copy done\n");
  return failures;
}

// vLLM >= 0.29 with Model Runner V2 (ENGINES-2026.md sequence A): the sizing query after the profiling
// forward, the whole KV cache in one allocation (KV_MIB, default 1536: 41% of the free memory on a
// 4 GiB device), then the compile warm-up, whose forward allocates a run of equal activation buffers of
// 64 MiB and more and writes them while it runs. Those buffers must keep their data: they are
// activations, not KV. The KV cache must read back what the engine wrote into it after start-up.
int activations_after_kv() {
  cudaKernel_t kernel = touch_kernel();
  void* target = nullptr;
  check(cudaMalloc(&target, kMiB) == cudaSuccess, "set-up buffer");
  const auto forward = [&](int launches) {
    void* args[] = {&target};
    for (int i = 0; i < launches; ++i)
      if (cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(1), dim3(1), args, 0, nullptr) != cudaSuccess)
        return false;
    return true;
  };
  size_t free_bytes = 0, total = 0;
  check(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess, "baseline memory query");
  void* weights = nullptr;
  check(cudaMalloc(&weights, 256 * kMiB) == cudaSuccess, "weights");
  {
    // The checkpoint's bytes arrive by host-to-device copies (64 MiB of them stand for it).
    const std::vector<unsigned char> checkpoint(64 * kMiB, 1);
    check(cudaMemcpy(weights, checkpoint.data(), checkpoint.size(), cudaMemcpyHostToDevice) == cudaSuccess,
          "weights copied in");
  }
  check(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess, "memory query before profiling");
  check(forward(100), "profiling forward");
  check(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess, "sizing memory query after profiling");
  const char* kv_mib = std::getenv("KV_MIB");
  const size_t kv_bytes = (kv_mib ? std::strtoull(kv_mib, nullptr, 10) : 1536) * kMiB;
  unsigned char* kv = nullptr;
  check(
      cudaMalloc(reinterpret_cast<void**>(&kv), kv_bytes) == cudaSuccess && cudaMemset(kv, 0, kv_bytes) == cudaSuccess,
      "the KV cache in one allocation");
  check(forward(100), "compile warm-up forward");
  unsigned char* activations[4] = {};
  for (auto& a : activations) {
    check(cudaMalloc(reinterpret_cast<void**>(&a), 64 * kMiB) == cudaSuccess, "activation buffer");
    check(cudaMemset(a, 0x5a, 4096) == cudaSuccess && cudaMemset(a + 64 * kMiB - 4096, 0x5a, 4096) == cudaSuccess,
          "written by the forward");
  }
  void* other = nullptr;
  check(cudaMalloc(&other, 8 * kMiB) == cudaSuccess, "an allocation of another size");
  check(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess, "memory query after the warm-up");
  check(forward(10), "more of the forward");
  bool kept = true;
  for (auto& a : activations) {
    unsigned char first = 0, last = 0;
    kept = kept && cudaMemcpy(&first, a, 1, cudaMemcpyDeviceToHost) == cudaSuccess &&
           cudaMemcpy(&last, a + 64 * kMiB - 1, 1, cudaMemcpyDeviceToHost) == cudaSuccess && first == 0x5a &&
           last == 0x5a;
  }
  check(kept, "every activation buffer kept what the forward wrote");
  // Serving writes the first and the last layer's blocks and reads them back.
  const unsigned char pattern[4] = {1, 2, 3, 4};
  unsigned char first[4] = {}, last[4] = {}, zero[4] = {9, 9, 9, 9};
  check(cudaMemcpy(kv + 4096, pattern, sizeof pattern, cudaMemcpyHostToDevice) == cudaSuccess &&
            cudaMemcpy(kv + kv_bytes - 4096, pattern, sizeof pattern, cudaMemcpyHostToDevice) == cudaSuccess &&
            cudaMemcpy(first, kv + 4096, sizeof first, cudaMemcpyDeviceToHost) == cudaSuccess &&
            cudaMemcpy(last, kv + kv_bytes - 4096, sizeof last, cudaMemcpyDeviceToHost) == cudaSuccess &&
            cudaMemcpy(zero, kv + kv_bytes / 2, sizeof zero, cudaMemcpyDeviceToHost) == cudaSuccess &&
            std::memcmp(first, pattern, 4) == 0 && std::memcmp(last, pattern, 4) == 0 && zero[0] == 0 && zero[3] == 0,
        "the KV cache reads back what serving wrote, and zeros elsewhere");
  return failures;
}

// cudaMalloc(0) succeeds with a null pointer and allocates nothing; cudaFree(nullptr) frees nothing.
int malloc_zero() {
  void* p = reinterpret_cast<void*>(0x1);
  check(cudaMalloc(&p, 0) == cudaSuccess, "cudaMalloc(0)");
  check(p == nullptr, "a null pointer");
  check(cudaFree(p) == cudaSuccess, "cudaFree(nullptr)");
  void* q = nullptr;
  check(cudaMalloc(&q, kMiB) == cudaSuccess && cudaFree(q) == cudaSuccess, "an ordinary pair");
  return failures;
}

// Two devices in one process, each with its own tagged KV cache, captured graph and replay.
int two_devices() {
  const TagApi tags = tag_api();
  int count = 0;
  check(cudaGetDeviceCount(&count) == cudaSuccess && count >= 2, "two devices");
  if (failures) return 1;
  unsigned char* kv[2][2] = {};
  cudaStream_t stream[2] = {};
  cudaGraphExec_t exec[2] = {};
  for (int d = 0; d < 2; ++d) {
    check(cudaSetDevice(d) == cudaSuccess, "set device");
    void* warm = nullptr;
    check(cudaMalloc(&warm, kMiB) == cudaSuccess, "warm-up allocation");
    tags.open_kv();
    for (auto& t : kv[d]) {
      check(cudaMalloc(reinterpret_cast<void**>(&t), 48 * kMiB) == cudaSuccess, "KV tensor");
      check(cudaMemset(t, 0, 48 * kMiB) == cudaSuccess, "KV zeroed");
    }
    tags.close();
    std::printf("device %d KV at %p %p\n", d, static_cast<void*>(kv[d][0]), static_cast<void*>(kv[d][1]));
    void* autotune = nullptr;
    check(cudaMalloc(&autotune, 8 * kMiB) == cudaSuccess, "post-KV allocation");
    check(cudaStreamCreateWithFlags(&stream[d], cudaStreamNonBlocking) == cudaSuccess, "stream");
    check(cudaStreamBeginCapture(stream[d], cudaStreamCaptureModeThreadLocal) == cudaSuccess, "begin capture");
    check(cudaMemsetAsync(kv[d][1] + 8192, 0x40 + d, 4096, stream[d]) == cudaSuccess, "captured write into KV");
    cudaGraph_t graph = nullptr;
    check(cudaStreamEndCapture(stream[d], &graph) == cudaSuccess, "end capture");
    check(cudaGraphInstantiate(&exec[d], graph, 0) == cudaSuccess, "instantiate");
  }
  for (int d = 0; d < 2; ++d) {
    check(cudaSetDevice(d) == cudaSuccess, "set device");
    check(cudaGraphLaunch(exec[d], stream[d]) == cudaSuccess, "replay");
    check(cudaStreamSynchronize(stream[d]) == cudaSuccess, "synchronize");
    unsigned char back[2] = {};
    check(cudaMemcpy(&back[0], kv[d][1] + 8192, 1, cudaMemcpyDeviceToHost) == cudaSuccess &&
              cudaMemcpy(&back[1], kv[d][0], 1, cudaMemcpyDeviceToHost) == cudaSuccess,
          "read back");
    check(back[0] == 0x40 + d && back[1] == 0, "the replay wrote into this device's KV cache, the rest is zero");
  }
  return failures;
}

// Threads allocating and freeing at once, as an engine's allocator threads do: the driver hands an
// address freed by one thread straight to another thread's allocation, over and over.
int churn() {
  constexpr int kThreads = 8;
  constexpr int kPairs = 1500;
  std::vector<std::thread> threads;
  std::atomic<int> failed{0};
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      cudaSetDevice(0);
      cudaStream_t stream = nullptr;
      cudaGraph_t graph = nullptr;  // an empty captured graph, instantiated again and again below
      if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess ||
          cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed) != cudaSuccess ||
          cudaStreamEndCapture(stream, &graph) != cudaSuccess)
        ++failed;
      for (int i = 0; i < kPairs; ++i) {
        void* p = nullptr;
        const std::size_t bytes = (t % 2 ? 256 : 512) << 10;  // two sizes: a mixed-up entry shows in the bytes
        if (cudaMalloc(&p, bytes) != cudaSuccess || cudaFree(p) != cudaSuccess) ++failed;
        if (i % 10 == 0) {  // graph execs are driver objects whose handles come back the same way
          cudaGraphExec_t exec = nullptr;
          if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess || cudaGraphExecDestroy(exec) != cudaSuccess)
            ++failed;
        }
      }
    });
  for (auto& t : threads) t.join();
  check(failed == 0, "every allocation and free succeeded");
  std::printf("churn: %d pairs\n", kThreads * kPairs);
  return failures;
}

// Worker threads keep allocating (holding a third of it) while one of them calls exit(): the
// summary written at exit and the events before it must tell the same story.
int exit_from_worker() {
  constexpr int kThreads = 6;
  std::atomic<int> warmed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      cudaSetDevice(0);
      std::vector<void*> held;
      for (int i = 0;; ++i) {
        void* p = nullptr;
        if (cudaMalloc(&p, static_cast<std::size_t>(1 + t) << 20) != cudaSuccess) continue;
        if (i % 3 == 0) {
          held.push_back(p);
        } else {
          cudaFree(p);
        }
        if (i == 200) ++warmed;
        if (t == 0 && warmed.load() == kThreads) std::exit(0);
      }
    });
  for (auto& t : threads) t.join();
  return 1;
}

// Allocation lifetimes of every shape on one thread: interleaved (a, b, free a, free b), back to
// back (c, free c), and across capture windows (allocated before a capture and freed inside it,
// allocated inside and freed after it). Only back-to-back pairs may become one lifetime event.
int lifetimes() {
  constexpr int kRounds = 2000;
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess, "stream");
  bool interleaved = true, back_to_back = true, around_captures = true;  // one line each, not one per call
  for (int i = 0; i < kRounds; ++i) {
    void *a = nullptr, *b = nullptr, *c = nullptr;
    interleaved &= cudaMalloc(&a, 64 << 10) == cudaSuccess && cudaMalloc(&b, 128 << 10) == cudaSuccess &&
                   cudaFree(a) == cudaSuccess && cudaFree(b) == cudaSuccess;
    back_to_back &= cudaMalloc(&c, 256 << 10) == cudaSuccess && cudaFree(c) == cudaSuccess;
    if (i % 100 != 0) continue;
    void *before = nullptr, *inside = nullptr;
    cudaGraph_t graph = nullptr;
    around_captures &= cudaMalloc(&before, 384 << 10) == cudaSuccess &&
                       cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed) == cudaSuccess &&
                       cudaFree(before) == cudaSuccess && cudaMalloc(&inside, 512 << 10) == cudaSuccess &&
                       cudaStreamEndCapture(stream, &graph) == cudaSuccess && cudaFree(inside) == cudaSuccess;
  }
  check(interleaved, "interleaved pairs");
  check(back_to_back, "back-to-back pairs");
  check(around_captures, "pairs around captures");
  return failures;
}

// Pairs and nothing else, as fast as the driver allows: run without host backing, the thread fills
// its trace ring (2048 records) long before the background writer's next drain, and must then write
// out its own records without losing one.
int burst() {
  constexpr int kPairs = 20000;
  bool ok = true;  // one line, not one per call
  for (int i = 0; i < kPairs; ++i) {
    void* p = nullptr;
    ok &= cudaMalloc(&p, 64 << 10) == cudaSuccess && cudaFree(p) == cudaSuccess;
  }
  check(ok, "burst of pairs");
  return failures;
}

// Threads started one after another, as a pool that replaces its workers does: each must appear in
// the trace under its own thread id even where it inherits an exited thread's trace buffer.
int successive_threads() {
  constexpr int kThreads = 20, kPairs = 50;
  std::atomic<int> failed{0};
  for (int t = 0; t < kThreads; ++t) {
    std::thread([&] {
      for (int i = 0; i < kPairs; ++i) {
        void* p = nullptr;
        if (cudaMalloc(&p, 64 << 10) != cudaSuccess || cudaFree(p) != cudaSuccess) ++failed;
      }
    }).join();
  }
  check(failed == 0, "successive threads' pairs");
  return failures;
}

// Relaxed captures begun by one thread and ended by another while the first keeps allocating: the
// window must still nest with the first thread's allocation lifetimes, and once it is over the first
// thread's allocations are no longer graph-pool memory.
int capture_ended_elsewhere() {
  constexpr int kRounds = 20, kAfter = 100;
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess, "stream");
  std::atomic<int> begun{-1}, ended{-1}, pairs_in_round{0}, failed{0};
  std::thread ender([&] {
    for (int round = 0; round < kRounds; ++round) {
      while (begun.load() != round || pairs_in_round.load() < 10) std::this_thread::yield();
      cudaGraph_t graph = nullptr;
      if (cudaStreamEndCapture(stream, &graph) != cudaSuccess) ++failed;
      ended.store(round);
    }
  });
  const auto pair = [&](std::size_t bytes) {
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess || cudaFree(p) != cudaSuccess) ++failed;
  };
  for (int round = 0; round < kRounds; ++round) {
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed) != cudaSuccess) ++failed;
    pairs_in_round.store(0);
    begun.store(round);
    while (ended.load() != round) {  // allocating while the other thread ends the capture
      pair(64 << 10);
      pairs_in_round.fetch_add(1);
    }
  }
  ender.join();
  for (int i = 0; i < kAfter; ++i) pair(128 << 10);
  check(failed == 0, "captures ended by another thread");
  return failures;
}

// One thread capturing two streams in interleaved windows (begin 1, begin 2, end 1, end 2), then in
// nested ones (begin 3, begin 4, end 4, end 3), with allocations in between.
int interleaved_captures() {
  cudaStream_t s[4] = {};
  bool ok = true;
  for (auto& stream : s) ok &= cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess;
  const auto pair = [&] {
    void* p = nullptr;
    ok &= cudaMalloc(&p, 64 << 10) == cudaSuccess && cudaFree(p) == cudaSuccess;
  };
  const auto begin = [&](int i) { ok &= cudaStreamBeginCapture(s[i], cudaStreamCaptureModeRelaxed) == cudaSuccess; };
  const auto end = [&](int i) {
    cudaGraph_t graph = nullptr;
    ok &= cudaStreamEndCapture(s[i], &graph) == cudaSuccess;
  };
  pair();
  begin(0);
  pair();
  begin(1);
  pair();
  end(0);
  pair();
  end(1);
  pair();
  begin(2);
  pair();
  begin(3);
  pair();
  end(3);
  pair();
  end(2);
  pair();
  check(ok, "interleaved and nested captures");
  return failures;
}

volatile sig_atomic_t g_interrupted = 0;

// Like an engine that handles Ctrl-C itself: its handler runs, and it exits cleanly on its own.
int handle_interrupt() {
  signal(SIGINT, [](int) { g_interrupted = 1; });
  void* p = nullptr;
  check(cudaMalloc(&p, 5 * kMiB) == cudaSuccess, "allocation before waiting");
  std::printf("waiting\n");
  std::fflush(stdout);
  while (!g_interrupted) pause();
  std::printf("interrupted, exiting cleanly\n");
  return 0;
}

int wait_forever() {
  void* p = nullptr;
  check(cudaMalloc(&p, 5 * kMiB) == cudaSuccess, "allocation before waiting");
  size_t f = 0, t = 0;
  cudaMemGetInfo(&f, &t);
  std::printf("waiting\n");
  std::fflush(stdout);
  for (;;) pause();
}

// A KV connector's export of committed KV (ENGINES-2026.md finding 9): the engine's two KV tensors, a
// pattern written after the burst (which commits them), the handle behind the second one retained and
// exported as a POSIX file descriptor, and a second process — started by exec, as CUDA cannot continue in
// a forked child — that imports it, maps it and reads the pattern back. Run with KVREMAP_KV_ONE_HANDLE=1,
// so that one handle is the whole 32 MiB tensor.
constexpr std::size_t kExportBytes = 32 * kMiB;
constexpr std::size_t kExportOffset = 8192;

unsigned char export_pattern(std::size_t i) { return static_cast<unsigned char>(i * 11 + 3); }

int kv_export() {
  const TagApi tags = tag_api();
  void* warm = nullptr;
  check(cudaMalloc(&warm, kMiB) == cudaSuccess, "warm-up allocation");
  tags.open_kv();
  unsigned char* kv[2] = {};
  for (auto& t : kv)
    check(cudaMalloc(reinterpret_cast<void**>(&t), kExportBytes) == cudaSuccess &&
              cudaMemset(t, 0, kExportBytes) == cudaSuccess,
          "KV tensor");
  tags.close();
  void* autotune = nullptr;
  check(cudaMalloc(&autotune, 8 * kMiB) == cudaSuccess, "post-KV allocation");
  unsigned char pattern[4096];
  for (std::size_t i = 0; i < sizeof pattern; ++i) pattern[i] = export_pattern(i);
  check(cudaMemcpy(kv[1] + kExportOffset, pattern, sizeof pattern, cudaMemcpyHostToDevice) == cudaSuccess,
        "copy into KV");
  CUmemGenericAllocationHandle handle = 0;
  check(cuMemRetainAllocationHandle(&handle, kv[1]) == CUDA_SUCCESS, "retained the handle of KV");
  int fd = -1;
  check(
      cuMemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) == CUDA_SUCCESS && fd >= 0,
      "exported KV as a POSIX fd");
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    // The descriptor the importer finds, without close-on-exec.
    if (dup2(fd, 100) != 100) _exit(2);
    execl("/proc/self/exe", "cuda_program", "kv-import", "100", static_cast<char*>(nullptr));
    _exit(3);
  }
  int status = 0;
  check(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "the importing process finished");
  close(fd);
  cuMemRelease(handle);
  std::printf("kv-export done\n");
  return failures;
}

int kv_import(int fd) {
  CUdevice device = 0;
  CUcontext context = nullptr;
  check(cuInit(0) == CUDA_SUCCESS && cuDeviceGet(&device, 0) == CUDA_SUCCESS &&
            cuDevicePrimaryCtxRetain(&context, device) == CUDA_SUCCESS && cuCtxSetCurrent(context) == CUDA_SUCCESS,
        "importer context");
  CUmemGenericAllocationHandle imported = 0;
  check(cuMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)),
                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == CUDA_SUCCESS,
        "imported the KV handle");
  CUdeviceptr va = 0;
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  check(cuMemAddressReserve(&va, kExportBytes, 0, 0, 0) == CUDA_SUCCESS &&
            cuMemMap(va, kExportBytes, 0, imported, 0) == CUDA_SUCCESS &&
            cuMemSetAccess(va, kExportBytes, &access, 1) == CUDA_SUCCESS,
        "mapped the imported handle");
  unsigned char back[4096] = {};
  check(cuMemcpyDtoH(back, va + kExportOffset, sizeof back) == CUDA_SUCCESS, "read the imported KV");
  bool same = true;
  for (std::size_t i = 0; i < sizeof back; ++i) same = same && back[i] == export_pattern(i);
  check(same, "the importing process reads the engine's bytes");
  cuMemUnmap(va, kExportBytes);
  cuMemAddressFree(va, kExportBytes);
  cuMemRelease(imported);
  return failures;
}

// A torch_memory_saver-like library's KV cycle (tests/integration/memory_saver_standin.cpp, preloaded):
// a 1 GiB KV tensor allocated inside its region, paused (its memory goes back to the device, the
// address is kept), resumed at the same address and used again. Without the stand-in loaded, the same
// tensor is allocated and used without a region, pause or resume.
int memory_saver() {
  constexpr std::size_t kKvBytes = std::size_t{1} << 30;
  auto begin = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "standin_region_begin"));
  auto end = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "standin_region_end"));
  auto pause = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "standin_pause"));
  auto resume = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "standin_resume"));
  const bool standin = begin && end && pause && resume;
  std::printf("memory saver stand-in: %s\n", standin ? "loaded" : "absent");
  void* warm = nullptr;
  check(cudaMalloc(&warm, kMiB) == cudaSuccess, "warm-up allocation");
  // SGLang's start-up before its KV pool: a baseline query, weights copied in, the post-weights query,
  // then the sizing query.
  std::size_t sizing_free = 0, sizing_total = 0;
  check(cudaMemGetInfo(&sizing_free, &sizing_total) == cudaSuccess, "baseline memory query");
  void* weights = nullptr;
  check(cudaMalloc(&weights, 256 * kMiB) == cudaSuccess, "weights");
  {
    const std::vector<unsigned char> checkpoint(64 * kMiB, 1);
    check(cudaMemcpy(weights, checkpoint.data(), checkpoint.size(), cudaMemcpyHostToDevice) == cudaSuccess,
          "weights copied in");
  }
  check(cudaMemGetInfo(&sizing_free, &sizing_total) == cudaSuccess, "post-weights memory query");
  check(cudaMemGetInfo(&sizing_free, &sizing_total) == cudaSuccess, "sizing memory query");
  if (standin) begin();
  unsigned char* kv = nullptr;
  const bool allocated = cudaMalloc(reinterpret_cast<void**>(&kv), kKvBytes) == cudaSuccess && kv != nullptr;
  if (standin) end();
  check(allocated, "KV tensor");
  if (!allocated) return failures;
  // A pattern at both ends of the tensor, read back.
  const auto write_and_read = [&](unsigned char seed) {
    unsigned char pattern[4096], back[4096] = {};
    for (std::size_t i = 0; i < sizeof pattern; ++i) pattern[i] = static_cast<unsigned char>(seed + i * 7);
    bool same = true;
    for (std::size_t at : {std::size_t{0}, kKvBytes - sizeof pattern}) {
      same = same && cudaMemcpy(kv + at, pattern, sizeof pattern, cudaMemcpyHostToDevice) == cudaSuccess &&
             cudaMemcpy(back, kv + at, sizeof back, cudaMemcpyDeviceToHost) == cudaSuccess &&
             std::memcmp(back, pattern, sizeof back) == 0;
    }
    return same;
  };
  check(write_and_read(3), "KV written and read back");
  if (standin) {
    std::size_t before = 0, paused = 0, resumed = 0, total = 0;
    check(cudaMemGetInfo(&before, &total) == cudaSuccess, "free memory before the pause");
    check(pause() == 0, "pause");
    check(cudaMemGetInfo(&paused, &total) == cudaSuccess, "free memory while paused");
    std::printf("pause freed %lld MiB\n",
                (static_cast<long long>(paused) - static_cast<long long>(before)) / static_cast<long long>(kMiB));
    check(paused >= before + kKvBytes, "pause gave the KV memory back");
    check(resume() == 0, "resume");
    check(cudaMemGetInfo(&resumed, &total) == cudaSuccess, "free memory after the resume");
    check(resumed + kKvBytes <= paused, "resume took the KV memory again");
    CUdeviceptr base = 0;
    std::size_t size = 0;
    check(cuMemGetAddressRange(&base, &size, reinterpret_cast<CUdeviceptr>(kv)) == CUDA_SUCCESS &&
              base == reinterpret_cast<CUdeviceptr>(kv) && size == kKvBytes,
          "the KV tensor is mapped at the same address");
    check(write_and_read(11), "KV usable after the resume");
  }
  check(cudaFree(kv) == cudaSuccess && cudaFree(weights) == cudaSuccess && cudaFree(warm) == cudaSuccess, "freed");
  return failures;
}

// Device 0's pinned memory, as an engine's VMM allocator asks for it.
CUmemAllocationProp device_memory(CUmemAllocationHandleType handle_types = CU_MEM_HANDLE_TYPE_NONE, bool rdma = false) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = handle_types;
  prop.allocFlags.gpuDirectRDMACapable = rdma ? 1 : 0;
  return prop;
}

CUmemAccessDesc read_write_for(int device) {
  CUmemAccessDesc grant{};
  grant.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  grant.location.id = device;
  grant.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return grant;
}

// A KV tensor as an engine's own VMM allocator makes it (vLLM's CuMemAllocator): its own reservation, a
// cuMemCreate of `prop` under the `kv` tag, mapped, granted as `grants` say, zeroed by PyTorch's fill kernel.
struct VmmTensor {
  CUdeviceptr va = 0;
  CUmemGenericAllocationHandle handle = 0;
};
VmmTensor engine_vmm_tensor(const TagApi& tags, std::size_t bytes, const CUmemAllocationProp& prop,
                            const std::vector<CUmemAccessDesc>& grants) {
  VmmTensor t;
  check(cuMemAddressReserve(&t.va, bytes, 0, 0, 0) == CUDA_SUCCESS, "reserve");
  tags.open_kv();
  check(cuMemCreate(&t.handle, bytes, &prop, 0) == CUDA_SUCCESS, "create");
  tags.close();
  check(cuMemMap(t.va, bytes, 0, t.handle, 0) == CUDA_SUCCESS &&
            cuMemSetAccess(t.va, bytes, grants.data(), grants.size()) == CUDA_SUCCESS,
        "map and grant");
  check(torch_fill(reinterpret_cast<void*>(t.va), bytes, 0), "zeroed by PyTorch's fill kernel");
  return t;
}

// A 4 KiB pattern (from `seed`) written at `write_at` reads back at `read_at`: the same address, or the same
// memory through another mapping.
bool round_trip(CUdeviceptr write_at, CUdeviceptr read_at, unsigned char seed) {
  unsigned char pattern[4096], back[4096] = {};
  for (std::size_t i = 0; i < sizeof pattern; ++i) pattern[i] = static_cast<unsigned char>(seed + i * 13);
  return cuMemcpyHtoD(write_at, pattern, sizeof pattern) == CUDA_SUCCESS &&
         cuMemcpyDtoH(back, read_at, sizeof back) == CUDA_SUCCESS && std::memcmp(back, pattern, sizeof back) == 0;
}

// KV the engine maps itself (kv_vmm.h), every call taking its handle: a tagged 64 MiB cuMemCreate with POSIX
// fd export and RDMA, mapped, granted to devices 0 and 1, zeroed by PyTorch's fill kernel; an allocation
// after it ends the burst. While deferred: its properties are the engine's, a retain at an interior
// address gives the same handle; the export (which commits first) imports into a second mapping that sees
// what the first writes; device 1 keeps its grant. Two releases while mapped keep the memory until the
// unmap; a third is refused. Run with SIMCUDA_DEVICE_COUNT=2; the same checks pass without kvremap.
int vmm_kv_handles() {
  const TagApi tags = tag_api();
  constexpr std::size_t kBytes = 64 * kMiB;
  check(cudaSetDevice(0) == cudaSuccess && cudaFree(nullptr) == cudaSuccess, "CUDA initialisation");
  void* warm = nullptr;
  check(cudaMalloc(&warm, kMiB) == cudaSuccess, "warm-up allocation");
  torch_fill_kernel();  // its module loads before the KV, as an engine's kernels do
  const CUmemAllocationProp prop = device_memory(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, true);
  const std::vector<CUmemAccessDesc> grants = {read_write_for(0), read_write_for(1)};
  const auto [x, h] = engine_vmm_tensor(tags, kBytes, prop, grants);
  void* after = nullptr;
  check(cudaMalloc(&after, 8 * kMiB) == cudaSuccess, "an allocation after the KV burst");

  CUmemAllocationProp got{};
  check(cuMemGetAllocationPropertiesFromHandle(&got, h) == CUDA_SUCCESS && got.type == prop.type &&
            got.location.type == prop.location.type && got.location.id == 0 &&
            got.requestedHandleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR &&
            got.allocFlags.gpuDirectRDMACapable == 1,
        "properties are the engine's");
  CUmemGenericAllocationHandle retained = 0;
  check(cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(x + 4 * kMiB)) == CUDA_SUCCESS && retained == h,
        "retain at an interior address gives the same handle");
  int fd = -1;
  check(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) == CUDA_SUCCESS && fd >= 0,
        "export as a POSIX fd");
  unsigned long long flags = 0;
  CUmemLocation device1{};
  device1.type = CU_MEM_LOCATION_TYPE_DEVICE;
  device1.id = 1;
  check(cuMemGetAccess(&flags, &device1, x) == CUDA_SUCCESS && flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        "device 1 keeps its grant");
  CUmemGenericAllocationHandle imported = 0;
  CUdeviceptr y = 0;
  check(cuMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)),
                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == CUDA_SUCCESS &&
            cuMemAddressReserve(&y, kBytes, 0, 0, 0) == CUDA_SUCCESS &&
            cuMemMap(y, kBytes, 0, imported, 0) == CUDA_SUCCESS &&
            cuMemSetAccess(y, kBytes, grants.data(), 1) == CUDA_SUCCESS,
        "the export imported and mapped again");
  check(round_trip(x + kBytes - 4096, y + kBytes - 4096, 5), "the imported mapping sees what the engine's writes");
  check(cuMemUnmap(y, kBytes) == CUDA_SUCCESS && cuMemRelease(imported) == CUDA_SUCCESS &&
            cuMemAddressFree(y, kBytes) == CUDA_SUCCESS,
        "the imported mapping released");
  close(fd);
  check(cuMemRelease(h) == CUDA_SUCCESS && cuMemRelease(h) == CUDA_SUCCESS, "two releases while mapped");
  check(round_trip(x + kBytes - 4096, x + kBytes - 4096, 9), "the memory stays while mapped");
  std::size_t mapped_free = 0, unmapped_free = 0, total = 0;
  check(cudaMemGetInfo(&mapped_free, &total) == cudaSuccess, "free memory while mapped");
  check(cuMemUnmap(x, kBytes) == CUDA_SUCCESS, "unmap");
  check(cudaMemGetInfo(&unmapped_free, &total) == cudaSuccess && unmapped_free >= mapped_free + kBytes,
        "the unmap frees the released memory");
  check(cuMemRelease(h) == CUDA_ERROR_INVALID_VALUE, "a third release is refused");
  check(cuMemAddressFree(x, kBytes) == CUDA_SUCCESS, "reservation freed");
  check(cudaFree(after) == cudaSuccess && cudaFree(warm) == cudaSuccess, "freed");
  return failures;
}

// The edges of a mapping kvremap adopted (kv_vmm.h), each answered as the driver answers the engine's own:
// an unmap of part of it is refused and leaves it whole; a second mapping of its handle elsewhere sees the
// same memory (kvremap commits first); an unmap while deferred, then the same handle mapped again, gives
// usable memory at that address. Two tagged 64 MiB tensors, PyTorch's fill kernel, an allocation ending the
// burst; run named as vLLM (graphs expected) so only these calls can commit.
int vmm_kv_edges() {
  const TagApi tags = tag_api();
  constexpr std::size_t kBytes = 64 * kMiB;
  check(cudaSetDevice(0) == cudaSuccess && cudaFree(nullptr) == cudaSuccess, "CUDA initialisation");
  torch_fill_kernel();
  const CUmemAccessDesc grant = read_write_for(0);
  CUdeviceptr va[2] = {};
  CUmemGenericAllocationHandle h[2] = {};
  for (int i = 0; i < 2; ++i) {
    const VmmTensor t = engine_vmm_tensor(tags, kBytes, device_memory(), {grant});
    va[i] = t.va;
    h[i] = t.handle;
  }
  void* after = nullptr;
  check(cudaMalloc(&after, 8 * kMiB) == cudaSuccess, "an allocation after the KV burst");

  check(cuMemUnmap(va[0], 2 * kMiB) == CUDA_ERROR_INVALID_VALUE, "an unmap of part of a mapping is refused");
  check(cuMemUnmap(va[0] + kBytes - 2 * kMiB, 2 * kMiB) == CUDA_ERROR_INVALID_VALUE, "also at its end");
  // Tensor 1, still deferred: unmapped (its memory goes), then its handle mapped again at the same address.
  check(cuMemUnmap(va[1], kBytes) == CUDA_SUCCESS, "unmap of a whole tensor");
  check(cuMemMap(va[1], kBytes, 0, h[1], 0) == CUDA_SUCCESS && cuMemSetAccess(va[1], kBytes, &grant, 1) == CUDA_SUCCESS,
        "the same handle mapped again");
  check(round_trip(va[1] + kBytes / 2, va[1] + kBytes / 2, 21), "memory usable after mapping it again");
  // Tensor 0: a second mapping of its handle at another address sees the same bytes as the first.
  CUdeviceptr alias = 0;
  check(cuMemAddressReserve(&alias, kBytes, 0, 0, 0) == CUDA_SUCCESS &&
            cuMemMap(alias, kBytes, 0, h[0], 0) == CUDA_SUCCESS &&
            cuMemSetAccess(alias, kBytes, &grant, 1) == CUDA_SUCCESS,
        "a second mapping of the handle");
  check(round_trip(va[0] + 3 * kMiB, alias + 3 * kMiB, 43), "the second mapping sees what the first writes");
  check(round_trip(alias + kBytes - 4096, va[0] + kBytes - 4096, 65), "and the other way round");
  check(round_trip(va[0] + 3 * kMiB + 2 * kMiB, va[0] + 3 * kMiB + 2 * kMiB, 87) &&
            round_trip(va[0] + 3 * kMiB, va[0] + 3 * kMiB, 43),
        "its granules are distinct memory, not aliases of one scratch");
  check(cuMemUnmap(alias, kBytes) == CUDA_SUCCESS && cuMemAddressFree(alias, kBytes) == CUDA_SUCCESS, "alias gone");
  for (int i = 0; i < 2; ++i)
    check(cuMemUnmap(va[i], kBytes) == CUDA_SUCCESS && cuMemRelease(h[i]) == CUDA_SUCCESS &&
              cuMemAddressFree(va[i], kBytes) == CUDA_SUCCESS,
          "tensor freed");
  check(cudaFree(after) == cudaSuccess, "freed");
  return failures;
}

// A tagged 256 MiB tensor in its own reservation (POSIX fd export asked), then, after the burst, a ballast
// that leaves 128 MiB free: under kvremap the commit (at the export) can hold only part of the tensor on
// the device, and its end goes to host memory as a second handle. Prints what the export answered; the
// tensor stays usable either way. Run with SIMCUDA_DEVICE_MEMORY=1GiB, named as vLLM.
int vmm_kv_host_tail() {
  const TagApi tags = tag_api();
  constexpr std::size_t kBytes = 256 * kMiB;
  check(cudaSetDevice(0) == cudaSuccess && cudaFree(nullptr) == cudaSuccess, "CUDA initialisation");
  torch_fill_kernel();
  const auto [va, h] =
      engine_vmm_tensor(tags, kBytes, device_memory(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), {read_write_for(0)});
  std::size_t free_bytes = 0, total = 0;
  check(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess, "free memory after the burst");
  void* ballast = nullptr;
  check(free_bytes > 128 * kMiB && cudaMalloc(&ballast, free_bytes - 128 * kMiB) == cudaSuccess, "ballast");
  int fd = -1;
  const CUresult exported = cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  const char* name = nullptr;
  cuGetErrorName(exported, &name);
  std::printf("export: %s\n", name ? name : "?");
  if (fd >= 0) close(fd);
  check(round_trip(va + kBytes - 4096, va + kBytes - 4096, 1), "the tensor's end usable");
  check(cuMemUnmap(va, kBytes) == CUDA_SUCCESS && cuMemRelease(h) == CUDA_SUCCESS &&
            cuMemAddressFree(va, kBytes) == CUDA_SUCCESS && cudaFree(ballast) == cudaSuccess,
        "freed");
  return failures;
}
}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "routes") return routes();
  if (mode == "captures") return captures();
  if (mode == "oom") return oom();
  if (mode == "faults") return faults();
  if (mode == "fork") return fork_workers();
  if (mode == "fork-without-cuda") return fork_without_cuda();
  if (mode == "fork-while-kv-busy") return fork_while_kv_busy();
  if (mode == "wait") return wait_forever();
  if (mode == "interrupt") return handle_interrupt();
  if (mode == "tagged") return tagged();
  if (mode == "two-devices") return two_devices();
  if (mode == "kv-copy") return kv_copy();
  if (mode == "kv-export") return kv_export();
  if (mode == "kv-import" && argc > 2) return kv_import(std::atoi(argv[2]));
  if (mode == "activations-after-kv") return activations_after_kv();
  if (mode == "malloc-zero") return malloc_zero();
  if (mode == "exit-from-worker") return exit_from_worker();
  if (mode == "churn") return churn();
  if (mode == "lifetimes") return lifetimes();
  if (mode == "successive-threads") return successive_threads();
  if (mode == "burst") return burst();
  if (mode == "capture-ended-elsewhere") return capture_ended_elsewhere();
  if (mode == "interleaved-captures") return interleaved_captures();
  if (mode == "memory-saver") return memory_saver();
  if (mode == "vmm-kv-handles") return vmm_kv_handles();
  if (mode == "vmm-kv-edges") return vmm_kv_edges();
  if (mode == "vmm-kv-host-tail") return vmm_kv_host_tail();
  std::fprintf(stderr,
               "usage: cuda_program "
               "routes|captures|oom|faults|fork|fork-without-cuda|fork-while-kv-busy|wait|interrupt|tagged|kv-copy|kv-export|activations-after-kv|malloc-"
               "zero|exit-from-worker|"
               "two-devices|churn|"
               "lifetimes|successive-threads|burst|capture-ended-elsewhere|interleaved-captures|memory-saver|"
               "vmm-kv-handles|vmm-kv-edges|vmm-kv-host-tail\n");
  return 2;
}
