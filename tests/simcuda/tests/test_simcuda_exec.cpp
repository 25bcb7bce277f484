// Simulated driver execution semantics: capture modes and their errors, graph replay, charges, modules, launches.
#include <cstdint>
#include <thread>
#include <vector>

#include "simcuda_fixture.h"

// Host implementations of the test kernels (found by the simulator with dlsym, hence exported).
extern "C" __attribute__((visibility("default"))) void simcuda_kernel_add_u32(void** params) {
  auto* dst = *static_cast<std::uint32_t**>(params[0]);
  const std::uint32_t n = *static_cast<std::uint32_t*>(params[1]);
  const std::uint32_t addend = *static_cast<std::uint32_t*>(params[2]);
  for (std::uint32_t i = 0; i < n; ++i) dst[i] += addend;
}

namespace {

const char* const kPtx = R"(
.version 8.0
.target sm_90
.address_size 64
// simcuda-module-bytes: 6MiB
.visible .entry add_u32(
  .param .u64 add_u32_param_0,
  .param .u32 add_u32_param_1,
  .param .u32 add_u32_param_2
)
{
  ret;
}
.visible .entry no_host_impl(
  .param .u64 p0
)
{
  ret;
}
)";

class ExecTest : public SimDriver {
 protected:
  void SetUp() override {
    SimDriver::SetUp();
    ASSERT_CU(cuModuleLoadData(&module_, kPtx));
    ASSERT_CU(cuModuleGetFunction(&add_, module_, "add_u32"));
    ASSERT_CU(cuMemAlloc(&buf_, 4096));
    ASSERT_CU(cuMemsetD8(buf_, 0, 4096));
    ASSERT_CU(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
  }

  CUresult LaunchAdd(CUstream stream, std::uint32_t addend, std::uint32_t n = 16) {
    void* params[] = {&buf_, &n, &addend};
    return cuLaunchKernel(add_, 1, 1, 1, 32, 1, 1, 0, stream, params, nullptr);
  }

  std::uint32_t At(int i) const { return reinterpret_cast<const std::uint32_t*>(buf_)[i]; }

  CUmodule module_ = nullptr;
  CUfunction add_ = nullptr;
  CUdeviceptr buf_ = 0;
  CUstream stream_ = nullptr;
};

}  // namespace

TEST_F(ExecTest, KernelsRunWithTheirPointerArguments) {
  ASSERT_CU(LaunchAdd(stream_, 5));
  ASSERT_CU(cuStreamSynchronize(stream_));
  EXPECT_EQ(At(0), 5u);
  EXPECT_EQ(At(15), 5u);
  EXPECT_EQ(At(16), 0u);
}

TEST_F(ExecTest, CaptureRecordsInsteadOfRunningAndReplayUsesCapturedValues) {
  ASSERT_CU(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  std::uint32_t addend = 3;
  std::uint32_t n = 4;
  void* params[] = {&buf_, &n, &addend};
  ASSERT_CU(cuLaunchKernel(add_, 1, 1, 1, 32, 1, 1, 0, stream_, params, nullptr));
  addend = 1000;  // arguments are captured by value at launch time
  ASSERT_CU(cuMemsetD8Async(buf_ + 64, 0x01, 4, stream_));
  EXPECT_EQ(At(0), 0u) << "nothing runs during capture";
  CUgraph graph = nullptr;
  ASSERT_CU(cuStreamEndCapture(stream_, &graph));
  CUgraphExec exec = nullptr;
  ASSERT_CU(cuGraphInstantiate(&exec, graph, 0));
  ASSERT_CU(cuGraphLaunch(exec, stream_));
  ASSERT_CU(cuGraphLaunch(exec, stream_));
  ASSERT_CU(cuStreamSynchronize(stream_));
  EXPECT_EQ(At(0), 6u);
  EXPECT_EQ(At(3), 6u);
  EXPECT_EQ(At(4), 0u);
  EXPECT_EQ(At(16), 0x01010101u);
  ASSERT_CU(cuGraphExecDestroy(exec));
  ASSERT_CU(cuGraphDestroy(graph));
}

TEST_F(ExecTest, ReplayWritesThroughTheCapturedAddressAfterARemap) {
  const size_t size = 2 * kMiB;
  CUdeviceptr va = Reserve(size);
  CUmemGenericAllocationHandle first = Create(size);
  MapRW(va, size, first);
  std::uint32_t n = 8, addend = 7;
  void* params[] = {&va, &n, &addend};
  ASSERT_CU(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ASSERT_CU(cuLaunchKernel(add_, 1, 1, 1, 1, 1, 1, 0, stream_, params, nullptr));
  CUgraph graph = nullptr;
  ASSERT_CU(cuStreamEndCapture(stream_, &graph));
  CUgraphExec exec = nullptr;
  ASSERT_CU(cuGraphInstantiate(&exec, graph, 0));
  ASSERT_CU(cuCtxSynchronize());
  ASSERT_CU(cuMemUnmap(va, size));
  CUmemGenericAllocationHandle second = Create(size);
  MapRW(va, size, second);
  ASSERT_CU(cuMemsetD8(va, 0, size));
  ASSERT_CU(cuGraphLaunch(exec, stream_));
  EXPECT_EQ(reinterpret_cast<std::uint32_t*>(va)[7], 7u);
  ASSERT_CU(cuGraphExecDestroy(exec));
  ASSERT_CU(cuGraphDestroy(graph));
  ASSERT_CU(cuMemUnmap(va, size));
  ASSERT_CU(cuMemRelease(first));
  ASSERT_CU(cuMemRelease(second));
}

TEST_F(ExecTest, CapturingTheLegacyStreamIsUnsupported) {
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuStreamBeginCapture(nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL));
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
            cuStreamBeginCapture(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ASSERT_CU(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  EXPECT_EQ(CUDA_ERROR_ILLEGAL_STATE, cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUgraph graph = nullptr;
  ASSERT_CU(cuStreamEndCapture(stream_, &graph));
  EXPECT_EQ(CUDA_ERROR_ILLEGAL_STATE, cuStreamEndCapture(stream_, &graph)) << "not capturing any more";
  ASSERT_CU(cuGraphDestroy(graph));
}

TEST_F(ExecTest, AllocatingDuringGlobalCaptureFailsAndInvalidatesIt) {
  ASSERT_CU(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUdeviceptr p = 0;
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuMemAlloc(&p, kMiB));
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  ASSERT_CU(cuStreamIsCapturing(stream_, &status));
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, LaunchAdd(stream_, 1));
  CUgraph graph = reinterpret_cast<CUgraph>(0x1);
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(stream_, &graph));
  EXPECT_EQ(graph, nullptr);
  EXPECT_EQ(Used(), 8 * kMiB) << "only the fixture's module and buffer are charged";
}

TEST_F(ExecTest, RelaxedThreadModeMayAllocateDuringCaptureLikePyTorch) {
  ASSERT_CU(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  ASSERT_CU(cuThreadExchangeStreamCaptureMode(&mode));
  EXPECT_EQ(mode, CU_STREAM_CAPTURE_MODE_GLOBAL) << "the previous mode comes back";
  CUdeviceptr p = 0;
  EXPECT_CU(cuMemAlloc(&p, kMiB));
  ASSERT_CU(cuThreadExchangeStreamCaptureMode(&mode));
  ASSERT_CU(LaunchAdd(stream_, 2));
  CUgraph graph = nullptr;
  ASSERT_CU(cuStreamEndCapture(stream_, &graph));
  ASSERT_CU(cuGraphDestroy(graph));
  ASSERT_CU(cuMemFree(p));
}

TEST_F(ExecTest, AnotherThreadsGlobalCaptureBlocksUnsafeCallsUnlessThreadLocal) {
  ASSERT_CU(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUresult in_global = CUDA_SUCCESS, in_thread_local = CUDA_ERROR_UNKNOWN;
  std::thread other([&] {
    cuCtxSetCurrent(ctx_);
    CUdeviceptr p = 0;
    in_global = cuMemAlloc(&p, kMiB);
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    cuThreadExchangeStreamCaptureMode(&mode);
    in_thread_local = cuMemAlloc(&p, kMiB);
    if (in_thread_local == CUDA_SUCCESS) cuMemFree(p);
  });
  other.join();
  EXPECT_EQ(in_global, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  EXPECT_EQ(in_thread_local, CUDA_SUCCESS);
  CUgraph graph = nullptr;
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(stream_, &graph));
}

TEST_F(ExecTest, ThreadLocalCaptureDoesNotConstrainOtherThreads) {
  ASSERT_CU(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  CUresult other_result = CUDA_ERROR_UNKNOWN;
  std::thread other([&] {
    cuCtxSetCurrent(ctx_);
    CUdeviceptr p = 0;
    other_result = cuMemAlloc(&p, kMiB);
    if (other_result == CUDA_SUCCESS) cuMemFree(p);
  });
  other.join();
  EXPECT_EQ(other_result, CUDA_SUCCESS);
  CUdeviceptr p = 0;
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuMemAlloc(&p, kMiB)) << "but the capturing thread is";
  CUgraph graph = nullptr;
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(stream_, &graph));
}

TEST_F(ExecTest, LegacyStreamWorkDuringABlockingCaptureIsAnImplicitDependency) {
  CUstream blocking = nullptr;
  ASSERT_CU(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
  ASSERT_CU(cuStreamBeginCapture(blocking, CU_STREAM_CAPTURE_MODE_RELAXED));
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, LaunchAdd(nullptr, 1));
  CUstreamCaptureStatus status{};
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, cuStreamIsCapturing(nullptr, &status));
  CUgraph graph = nullptr;
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(blocking, &graph));
  // A non-blocking stream's capture does not involve the legacy stream.
  ASSERT_CU(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_RELAXED));
  EXPECT_CU(LaunchAdd(nullptr, 1));
  ASSERT_CU(cuStreamEndCapture(stream_, &graph));
  ASSERT_CU(cuGraphDestroy(graph));
  ASSERT_CU(cuStreamDestroy(blocking));
}

TEST_F(ExecTest, SynchronisingDuringCaptureFails) {
  EXPECT_CU(cuStreamQuery(stream_)) << "work runs at enqueue time: an idle stream";
  ASSERT_CU(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_RELAXED));
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuStreamQuery(stream_));
  CUgraph invalidated = nullptr;
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(stream_, &invalidated));
  ASSERT_CU(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_RELAXED));
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuStreamSynchronize(stream_));
  CUgraph graph = nullptr;
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(stream_, &graph));
  ASSERT_CU(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_RELAXED));
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuCtxSynchronize());
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(stream_, &graph));
  EXPECT_CU(cuCtxSynchronize()) << "fine once no capture is active";
}

TEST_F(ExecTest, EndingAGlobalCaptureFromAnotherThreadIsTheWrongThread) {
  ASSERT_CU(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUresult other_result = CUDA_SUCCESS;
  CUgraph graph = nullptr;
  std::thread other([&] {
    cuCtxSetCurrent(ctx_);
    other_result = cuStreamEndCapture(stream_, &graph);
  });
  other.join();
  EXPECT_EQ(other_result, CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
  ASSERT_CU(cuStreamEndCapture(stream_, &graph));
  ASSERT_CU(cuGraphDestroy(graph));
}

TEST_F(ExecTest, CaptureInfoReportsDistinctIdsAndTheGraph) {
  cuuint64_t ids[2] = {};
  for (auto& id : ids) {
    ASSERT_CU(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUstreamCaptureStatus status{};
    CUgraph building = nullptr;
    const CUgraphNode* deps = nullptr;
    size_t ndeps = 99;
    ASSERT_CU(cuStreamGetCaptureInfo(stream_, &status, &id, &building, &deps, nullptr, &ndeps));
    EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    EXPECT_NE(building, nullptr);
    CUgraph graph = nullptr;
    ASSERT_CU(cuStreamEndCapture(stream_, &graph));
    EXPECT_EQ(graph, building);
    ASSERT_CU(cuGraphDestroy(graph));
  }
  EXPECT_NE(ids[0], ids[1]);
  CUstreamCaptureStatus status{};
  ASSERT_CU(cuStreamIsCapturing(stream_, &status));
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_NONE);
}

TEST_F(ExecTest, InstantiationChargesDriverMemoryPerExecAndPerNode) {
  Restart("SIMCUDA_GRAPH_EXEC_BYTES=3MiB SIMCUDA_GRAPH_NODE_BYTES=1MiB");
  ASSERT_CU(cuModuleLoadData(&module_, kPtx));
  ASSERT_CU(cuModuleGetFunction(&add_, module_, "add_u32"));
  ASSERT_CU(cuMemAlloc(&buf_, 4096));
  ASSERT_CU(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
  const auto before = Used();
  ASSERT_CU(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  for (int i = 0; i < 5; ++i) ASSERT_CU(LaunchAdd(stream_, 1));
  CUgraph graph = nullptr;
  ASSERT_CU(cuStreamEndCapture(stream_, &graph));
  EXPECT_EQ(Used(), before) << "a captured graph holds no device memory";
  CUgraphExec a = nullptr, b = nullptr;
  ASSERT_CU(cuGraphInstantiate(&a, graph, 0));
  EXPECT_EQ(Used() - before, 8 * kMiB);
  CUDA_GRAPH_INSTANTIATE_PARAMS params{};
  ASSERT_CU(cuGraphInstantiateWithParams(&b, graph, &params));
  EXPECT_EQ(params.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
  EXPECT_EQ(Used() - before, 16 * kMiB);
  ASSERT_CU(cuGraphExecDestroy(a));
  ASSERT_CU(cuGraphExecDestroy(b));
  EXPECT_EQ(Used(), before);
  ASSERT_CU(cuGraphDestroy(graph));
}

TEST_F(ExecTest, InstantiationFailsWithOutOfMemoryWhenTheDeviceIsFull) {
  Restart("SIMCUDA_GRAPH_EXEC_BYTES=64MiB");
  ASSERT_CU(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
  CUdeviceptr hog = 0;
  ASSERT_CU(cuMemAlloc(&hog, 1000 * kMiB));
  ASSERT_CU(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUgraph graph = nullptr;
  ASSERT_CU(cuStreamEndCapture(stream_, &graph));
  CUgraphExec exec = nullptr;
  EXPECT_EQ(CUDA_ERROR_OUT_OF_MEMORY, cuGraphInstantiate(&exec, graph, 0));
  ASSERT_CU(cuMemFree(hog));
  EXPECT_CU(cuGraphInstantiate(&exec, graph, 0));
  ASSERT_CU(cuGraphExecDestroy(exec));
  ASSERT_CU(cuGraphDestroy(graph));
}

TEST_F(ExecTest, ModulesChargeTheirDeclaredBytesUntilUnloaded) {
  EXPECT_EQ(Used(), 6 * kMiB + 2 * kMiB) << "module (PTX comment: 6MiB) + fixture buffer";
  CUmodule second = nullptr;
  ASSERT_CU(cuModuleLoadData(&second, kPtx));
  EXPECT_EQ(Used(), 14 * kMiB);
  ASSERT_CU(cuModuleUnload(second));
  EXPECT_EQ(Used(), 8 * kMiB);
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, cuModuleUnload(second));
}

TEST_F(ExecTest, ModuleCostDefaultsToTheConfiguredValue) {
  Restart("SIMCUDA_MODULE_BYTES=4MiB");
  const char* plain = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 a)\n{\nret;\n}\n";
  CUmodule m = nullptr;
  ASSERT_CU(cuModuleLoadData(&m, plain));
  EXPECT_EQ(Used(), 4 * kMiB);
  ASSERT_CU(cuModuleUnload(m));
  EXPECT_EQ(Used(), 0u);
}

TEST_F(ExecTest, BadImagesAndMissingHostKernelsAreReported) {
  CUmodule m = nullptr;
  EXPECT_EQ(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadData(&m, "this is not ptx"));
  EXPECT_EQ(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadData(&m, ".entry broken(.param .weird x)"));
  CUfunction f = nullptr;
  EXPECT_EQ(CUDA_ERROR_NOT_FOUND, cuModuleGetFunction(&f, module_, "no_host_impl"));
  EXPECT_EQ(CUDA_ERROR_NOT_FOUND, cuModuleGetFunction(&f, module_, "absent"));
}

TEST_F(ExecTest, LibraryKernelsLaunchAsFunctions) {
  CUlibrary lib = nullptr;
  ASSERT_CU(cuLibraryLoadData(&lib, kPtx, nullptr, nullptr, 0, nullptr, nullptr, 0));
  CUkernel kernel = nullptr;
  ASSERT_CU(cuLibraryGetKernel(&kernel, lib, "add_u32"));
  std::uint32_t n = 2, addend = 9;
  void* params[] = {&buf_, &n, &addend};
  ASSERT_CU(cuLaunchKernel(reinterpret_cast<CUfunction>(kernel), 1, 1, 1, 1, 1, 1, 0, stream_, params, nullptr));
  EXPECT_EQ(At(1), 9u);
  CUfunction f = nullptr;
  ASSERT_CU(cuKernelGetFunction(&f, kernel));
  CUlaunchConfig config{};
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = config.blockDimY = config.blockDimZ = 1;
  config.hStream = stream_;
  ASSERT_CU(cuLaunchKernelEx(&config, f, params, nullptr));
  EXPECT_EQ(At(1), 18u);
  ASSERT_CU(cuLibraryUnload(lib));
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE,
            cuLaunchKernel(reinterpret_cast<CUfunction>(kernel), 1, 1, 1, 1, 1, 1, 0, stream_, params, nullptr));
}

TEST_F(ExecTest, LaunchArgumentsAreValidated) {
  std::uint32_t n = 1, addend = 1;
  void* params[] = {&buf_, &n, &addend};
  int not_a_kernel = 0;
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE,
            cuLaunchKernel(reinterpret_cast<CUfunction>(&not_a_kernel), 1, 1, 1, 1, 1, 1, 0, stream_, params, nullptr));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuLaunchKernel(add_, 0, 1, 1, 1, 1, 1, 0, stream_, params, nullptr));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuLaunchKernel(add_, 1, 1, 1, 2048, 1, 1, 0, stream_, params, nullptr));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuLaunchKernel(add_, 1, 1, 1, 1, 1, 1, 0, stream_, nullptr, nullptr));
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE,
            cuLaunchKernel(add_, 1, 1, 1, 1, 1, 1, 0, reinterpret_cast<CUstream>(&n), params, nullptr));
}

TEST_F(ExecTest, PerThreadDefaultStreamIsItsOwnStream) {
  // The per-thread default stream can be captured, unlike the legacy one.
  ASSERT_CU(cuStreamBeginCapture(CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ASSERT_CU(LaunchAdd(CU_STREAM_PER_THREAD, 4));
  EXPECT_EQ(At(0), 0u);
  CUgraph graph = nullptr;
  ASSERT_CU(cuStreamEndCapture(CU_STREAM_PER_THREAD, &graph));
  CUgraphExec exec = nullptr;
  ASSERT_CU(cuGraphInstantiate(&exec, graph, 0));
  ASSERT_CU(cuGraphLaunch(exec, CU_STREAM_PER_THREAD));
  EXPECT_EQ(At(0), 4u);
  ASSERT_CU(cuGraphExecDestroy(exec));
  ASSERT_CU(cuGraphDestroy(graph));
}
