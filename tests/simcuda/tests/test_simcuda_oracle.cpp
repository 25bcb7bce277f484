// The simulated driver's serving oracle: work on an aliased scratch handle after serving began ends the process.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <cudaTypedefs.h>
#include <gmock/gmock.h>

#include "simcuda_fixture.h"

// Adds 1 to the first word its pointer argument names (exported: the simulator finds it with dlsym).
extern "C" __attribute__((visibility("default"))) void simcuda_kernel_oracle_touch(void** params) {
  auto* p = *static_cast<std::uint32_t**>(params[0]);
  p[0] += 1;
}

namespace {

const char* const kPtx = R"(
.version 8.0
.target sm_90
.address_size 64
.visible .entry oracle_touch(
  .param .u64 oracle_touch_param_0
)
{
  ret;
}
)";

constexpr int kOracleExit = 86;
constexpr size_t kAlias = 2 * kMiB;
constexpr int kAliases = 4;

// The oracle's line, for any address.
std::string Fired(const char* call, int mappings) {
  return std::string("simcuda: serving oracle: ") + call + " touched 0x[0-9a-f]+ which maps a handle mapped at " +
         std::to_string(mappings) + " addresses \\(scratch-backed memory used after serving began\\)";
}

class OracleTest : public SimDriver {
 protected:
  void SetUp() override {
    // A forked death-test child would start a fresh simulated driver (CUDA state does not survive
    // fork); re-executing the test builds the mappings again in the child.
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    SimDriver::SetUp();
    ASSERT_CU(cuModuleLoadData(&module_, kPtx));
    ASSERT_CU(cuModuleGetFunction(&touch_, module_, "oracle_touch"));
    ASSERT_CU(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
    // The scratch: one handle mapped at kAliases consecutive addresses, as kvremap backs deferred KV.
    scratch_va_ = Reserve(kAliases * kAlias);
    scratch_ = Create(kAlias);
    for (int i = 0; i < kAliases; ++i) MapRW(scratch_va_ + i * kAlias, kAlias, scratch_);
    // Real backing right after it: one handle mapped once.
    single_va_ = Reserve(kAlias);
    single_ = Create(kAlias);
    MapRW(single_va_, kAlias, single_);
  }

  CUresult Touch(CUdeviceptr p, CUstream stream) {
    void* params[] = {&p};
    return cuLaunchKernel(touch_, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr);
  }

  static std::uint32_t At(CUdeviceptr p) { return *reinterpret_cast<const std::uint32_t*>(p); }

  CUdeviceptr Alias(int i) const { return scratch_va_ + static_cast<CUdeviceptr>(i) * kAlias; }

  CUmodule module_ = nullptr;
  CUfunction touch_ = nullptr;
  CUstream stream_ = nullptr;
  CUdeviceptr scratch_va_ = 0;
  CUdeviceptr single_va_ = 0;
  CUmemGenericAllocationHandle scratch_ = 0;
  CUmemGenericAllocationHandle single_ = 0;
};

}  // namespace

TEST_F(OracleTest, ServingIsUnmarkedUntilMarkedAndResetClearsIt) {
  EXPECT_EQ(simcuda_serving_marked(), 0);
  EXPECT_EQ(simcuda_mark_serving(), 0);
  EXPECT_EQ(simcuda_serving_marked(), 1);
  ASSERT_EQ(0, simcuda_reset(kBase));
  EXPECT_EQ(simcuda_serving_marked(), 0);
}

TEST_F(OracleTest, KernelOnAliasedMemoryBeforeServingRuns) {
  ASSERT_CU(Touch(Alias(2) + 64, stream_));
  ASSERT_CU(Touch(Alias(0) + 64, nullptr));
  EXPECT_EQ(At(Alias(1) + 64), 2u) << "every alias shares the scratch's bytes";
}

TEST_F(OracleTest, KernelOnAliasedMemoryAfterServingDies) {
  EXPECT_EXIT(
      {
        simcuda_mark_serving();
        Touch(Alias(3) + 128, stream_);
      },
      ::testing::ExitedWithCode(kOracleExit), Fired("cuLaunchKernel", kAliases));
}

TEST_F(OracleTest, LaunchKernelExOnAliasedMemoryAfterServingDies) {
  EXPECT_EXIT(
      {
        simcuda_mark_serving();
        CUdeviceptr p = Alias(1);
        void* params[] = {&p};
        CUlaunchConfig config{};
        config.gridDimX = config.gridDimY = config.gridDimZ = 1;
        config.blockDimX = config.blockDimY = config.blockDimZ = 1;
        config.hStream = stream_;
        cuLaunchKernelEx(&config, touch_, params, nullptr);
      },
      ::testing::ExitedWithCode(kOracleExit), Fired("cuLaunchKernelEx", kAliases));
}

TEST_F(OracleTest, PerThreadStreamVariantsAreCheckedToo) {
  // What the runtime's _ptsz exports call: the driver's per-thread-default-stream variants.
  void* pfn = nullptr;
  CUdriverProcAddressQueryResult status{};
  ASSERT_CU(cuGetProcAddress("cuLaunchKernel", &pfn, 4000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status));
  ASSERT_NE(pfn, nullptr);
  auto launch_ptsz = reinterpret_cast<PFN_cuLaunchKernel_v4000>(pfn);
  ASSERT_CU(cuGetProcAddress("cuMemsetD8", &pfn, 3020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status));
  ASSERT_NE(pfn, nullptr);
  auto memset_ptds = reinterpret_cast<PFN_cuMemsetD8_v3020>(pfn);
  EXPECT_EXIT(
      {
        simcuda_mark_serving();
        CUdeviceptr p = Alias(2);
        void* params[] = {&p};
        launch_ptsz(touch_, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr);
      },
      ::testing::ExitedWithCode(kOracleExit), Fired("cuLaunchKernel", kAliases));
  EXPECT_EXIT(
      {
        simcuda_mark_serving();
        memset_ptds(Alias(0), 0, 16);
      },
      ::testing::ExitedWithCode(kOracleExit), Fired("cuMemsetD8_v2", kAliases));
}

TEST_F(OracleTest, KernelOnSinglyMappedMemoryAfterServingRuns) {
  ASSERT_EQ(simcuda_mark_serving(), 0);
  ASSERT_CU(Touch(single_va_ + 64, stream_));
  CUdeviceptr plain = 0;
  ASSERT_CU(cuMemAlloc(&plain, 4096));
  ASSERT_CU(cuMemsetD8(plain, 0, 4096));
  ASSERT_CU(Touch(plain, stream_));
  EXPECT_EQ(At(single_va_ + 64), 1u);
  EXPECT_EQ(At(plain), 1u);
  ASSERT_CU(cuMemFree(plain));
}

TEST_F(OracleTest, CopyIntoAliasedMemoryAfterServingDies) {
  std::vector<unsigned char> host(256, 7);
  EXPECT_EXIT(
      {
        simcuda_mark_serving();
        cuMemcpyHtoD(Alias(0) + 4096, host.data(), host.size());
      },
      ::testing::ExitedWithCode(kOracleExit), Fired("cuMemcpyHtoD_v2", kAliases));
  EXPECT_EXIT(
      {
        simcuda_mark_serving();
        cuMemcpyHtoDAsync(Alias(2), host.data(), host.size(), stream_);
      },
      ::testing::ExitedWithCode(kOracleExit), Fired("cuMemcpyHtoDAsync_v2", kAliases));
}

TEST_F(OracleTest, CopyOutOfAliasedMemoryAfterServingDies) {
  std::vector<unsigned char> host(256, 0);
  EXPECT_EXIT(
      {
        simcuda_mark_serving();
        cuMemcpyDtoD(single_va_, Alias(1), 256);
      },
      ::testing::ExitedWithCode(kOracleExit), Fired("cuMemcpyDtoD_v2", kAliases));
  EXPECT_EXIT(
      {
        simcuda_mark_serving();
        cuMemcpy(reinterpret_cast<CUdeviceptr>(host.data()), Alias(3), 256);
      },
      ::testing::ExitedWithCode(kOracleExit), Fired("cuMemcpy", kAliases));
}

TEST_F(OracleTest, MemsetOnAliasedMemoryAfterServingDies) {
  EXPECT_EXIT(
      {
        simcuda_mark_serving();
        cuMemsetD8(Alias(1) + 100, 0, 1);
      },
      ::testing::ExitedWithCode(kOracleExit), Fired("cuMemsetD8_v2", kAliases));
  EXPECT_EXIT(
      {
        simcuda_mark_serving();
        cuMemsetD8Async(Alias(0), 0, kAlias, stream_);
      },
      ::testing::ExitedWithCode(kOracleExit), Fired("cuMemsetD8Async", kAliases));
}

TEST_F(OracleTest, ARangeReachingOneByteIntoAnAliasDiesAtThatByte) {
  // The last byte of the reservation in front of the scratch is not mapped; put real backing there.
  const CUdeviceptr va = Reserve(2 * kAlias);
  CUmemGenericAllocationHandle a = Create(kAlias);
  CUmemGenericAllocationHandle b = Create(kAlias);
  MapRW(va, kAlias, a);
  MapRW(va + kAlias, kAlias, b);
  ASSERT_CU(cuMemUnmap(va + kAlias, kAlias));
  MapRW(va + kAlias, kAlias, scratch_);  // the scratch's fifth alias, right after a singly mapped handle
  ASSERT_EQ(simcuda_mark_serving(), 0);
  ASSERT_CU(cuMemsetD8(va, 1, kAlias)) << "ends exactly at the alias: untouched";
  // A death-test child re-executes the test and gets other addresses: it names the byte it expects
  // first, and the oracle's line must name that same address.
  EXPECT_EXIT(
      {
        std::fprintf(stderr, "expect 0x%llx\n", static_cast<unsigned long long>(va + kAlias));
        cuMemsetD8(va + 1, 1, kAlias);
      },
      ::testing::ExitedWithCode(kOracleExit), ::testing::Truly([](const std::string& err) {
        const auto at = err.find("expect ");
        if (at == std::string::npos) return false;
        const std::string address = err.substr(at + 7, err.find('\n', at) - at - 7);
        return err.find("simcuda: serving oracle: cuMemsetD8_v2 touched " + address +
                        " which maps a handle mapped at " + std::to_string(kAliases + 1) + " addresses") !=
               std::string::npos;
      }));
}

TEST_F(OracleTest, CopiesAndMemsetsOnSinglyMappedMemoryAfterServingRun) {
  std::vector<unsigned char> host(kAlias, 3);
  ASSERT_EQ(simcuda_mark_serving(), 0);
  ASSERT_CU(cuMemcpyHtoD(single_va_, host.data(), host.size()));
  ASSERT_CU(cuMemsetD8Async(single_va_ + 8, 0, 8, stream_));
  ASSERT_CU(cuMemcpyDtoH(host.data(), single_va_, 16));
  EXPECT_EQ(host[0], 3);
  EXPECT_EQ(host[8], 0);
}

TEST_F(OracleTest, GraphReplayOfANodeOnAliasedMemoryAfterServingDies) {
  // Captured and replayed during start-up (allowed), then replayed once serving began.
  ASSERT_CU(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ASSERT_CU(Touch(single_va_, stream_));
  ASSERT_CU(Touch(Alias(2) + 8, stream_));
  CUgraph graph = nullptr;
  ASSERT_CU(cuStreamEndCapture(stream_, &graph));
  CUgraphExec exec = nullptr;
  ASSERT_CU(cuGraphInstantiate(&exec, graph, 0));
  ASSERT_CU(cuGraphLaunch(exec, stream_));
  EXPECT_EQ(At(Alias(2) + 8), 1u);
  EXPECT_EXIT(
      {
        simcuda_mark_serving();
        cuGraphLaunch(exec, stream_);
      },
      ::testing::ExitedWithCode(kOracleExit), Fired("cuGraphLaunch", kAliases));
  ASSERT_CU(cuGraphExecDestroy(exec));
  ASSERT_CU(cuGraphDestroy(graph));
}

TEST_F(OracleTest, GraphReplayOfAMemsetNodeOnAliasedMemoryAfterServingDies) {
  ASSERT_CU(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ASSERT_CU(cuMemsetD8Async(Alias(3), 0, 64, stream_));
  CUgraph graph = nullptr;
  ASSERT_CU(cuStreamEndCapture(stream_, &graph));
  CUgraphExec exec = nullptr;
  ASSERT_CU(cuGraphInstantiate(&exec, graph, 0));
  EXPECT_EXIT(
      {
        simcuda_mark_serving();
        cuGraphLaunch(exec, stream_);
      },
      ::testing::ExitedWithCode(kOracleExit), Fired("cuGraphLaunch", kAliases));
  ASSERT_CU(cuGraphExecDestroy(exec));
  ASSERT_CU(cuGraphDestroy(graph));
}

TEST_F(OracleTest, CapturingAfterServingRecordsWithoutFiring) {
  ASSERT_EQ(simcuda_mark_serving(), 0);
  ASSERT_CU(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ASSERT_CU(Touch(Alias(0), stream_)) << "recorded, not executed";
  CUgraph graph = nullptr;
  ASSERT_CU(cuStreamEndCapture(stream_, &graph));
  EXPECT_EQ(At(Alias(0)), 0u);
  ASSERT_CU(cuGraphDestroy(graph));
}

TEST_F(OracleTest, OnceTheAliasesAreUnmappedTheHandleIsUsableAgain) {
  // Capture on the scratch during start-up; the commit keeps the addresses and swaps the backing.
  ASSERT_CU(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ASSERT_CU(Touch(Alias(1), stream_));
  CUgraph graph = nullptr;
  ASSERT_CU(cuStreamEndCapture(stream_, &graph));
  CUgraphExec exec = nullptr;
  ASSERT_CU(cuGraphInstantiate(&exec, graph, 0));
  ASSERT_CU(cuCtxSynchronize());
  for (int i = 1; i < kAliases; ++i) ASSERT_CU(cuMemUnmap(Alias(i), kAlias));
  std::vector<CUmemGenericAllocationHandle> committed;
  for (int i = 1; i < kAliases; ++i) {
    committed.push_back(Create(kAlias));
    MapRW(Alias(i), kAlias, committed.back());
  }
  ASSERT_EQ(simcuda_mark_serving(), 0);
  ASSERT_CU(Touch(Alias(0), stream_)) << "the scratch is mapped once now";
  ASSERT_CU(cuMemsetD8(Alias(0), 0, kAlias));
  ASSERT_CU(cuGraphLaunch(exec, stream_));
  ASSERT_CU(Touch(Alias(3), stream_));
  EXPECT_EQ(At(Alias(1)), 1u);
  EXPECT_EQ(At(Alias(3)), 1u);
  ASSERT_CU(cuGraphExecDestroy(exec));
  ASSERT_CU(cuGraphDestroy(graph));
}
