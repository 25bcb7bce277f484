// Simulated driver entry points: cuGetProcAddress versions/flags, init and context rules, faults, settings, fork.
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "simcuda_fixture.h"

#undef cuGetProcAddress
extern "C" CUresult cuGetProcAddress(const char*, void**, int, cuuint64_t);
extern "C" CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                        unsigned, CUstream, void**, void**);
extern "C" CUresult cuStreamGetCaptureInfo_v2(CUstream, CUstreamCaptureStatus*, cuuint64_t*, CUgraph*,
                                              const CUgraphNode**, size_t*);

using DriverTest = SimDriver;

namespace {
void* Lookup(const char* name, int version, cuuint64_t flags, CUdriverProcAddressQueryResult* status = nullptr) {
  void* fn = reinterpret_cast<void*>(0x1);
  CUdriverProcAddressQueryResult local{};
  EXPECT_CU(cuGetProcAddress_v2(name, &fn, version, flags, status ? status : &local));
  return fn;
}
template <typename F>
void* Addr(F* f) {
  return reinterpret_cast<void*>(f);
}
}  // namespace

TEST_F(DriverTest, ProcAddressResolvesBaseNamesToTheVersionedAbi) {
  EXPECT_EQ(Lookup("cuMemAlloc", 3020, 0), Addr(cuMemAlloc_v2));
  EXPECT_EQ(Lookup("cuMemGetInfo", 12000, 0), Addr(cuMemGetInfo_v2));
  EXPECT_EQ(Lookup("cuStreamBeginCapture", 10010, 0), Addr(cuStreamBeginCapture_v2));
  EXPECT_EQ(Lookup("cuGraphInstantiateWithFlags", 12000, 0), Addr(cuGraphInstantiateWithFlags));
}

TEST_F(DriverTest, ProcAddressPicksTheNewestAbiNotNewerThanAsked) {
  EXPECT_EQ(Lookup("cuStreamGetCaptureInfo", 11030, 0), Addr(cuStreamGetCaptureInfo_v2));
  EXPECT_EQ(Lookup("cuStreamGetCaptureInfo", 12000, 0), Addr(cuStreamGetCaptureInfo_v2));
  EXPECT_EQ(Lookup("cuStreamGetCaptureInfo", 12030, 0), Addr(cuStreamGetCaptureInfo_v3));
  EXPECT_EQ(Lookup("cuCtxSynchronize", 12080, 0), Addr(cuCtxSynchronize));
  EXPECT_EQ(Lookup("cuCtxSynchronize", 13000, 0), Addr(cuCtxSynchronize_v2));
  CUdriverProcAddressQueryResult status{};
  EXPECT_EQ(Lookup("cuMemCreate", 10010, 0, &status), nullptr);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
}

TEST_F(DriverTest, PerThreadFlagSelectsPtszVariantsOnlyForStreamFunctions) {
  EXPECT_EQ(Lookup("cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM), Addr(cuLaunchKernel_ptsz));
  EXPECT_EQ(Lookup("cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_DEFAULT), Addr(cuLaunchKernel));
  EXPECT_EQ(Lookup("cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM), Addr(cuLaunchKernel));
  EXPECT_EQ(Lookup("cuMemAlloc", 3020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM), Addr(cuMemAlloc_v2));
}

TEST_F(DriverTest, UnknownSymbolsSucceedWithNullAndBadArgumentsAreRejected) {
  CUdriverProcAddressQueryResult status{};
  EXPECT_EQ(Lookup("cuNoSuchFunction", 12000, 0, &status), nullptr);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  void* fn = nullptr;
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuGetProcAddress_v2("cuMemAlloc", &fn, 14000, 0, &status)) << "newer than driver";
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuGetProcAddress_v2("cuMemAlloc", &fn, 12000, 8, &status)) << "unknown flag";
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuGetProcAddress_v2(nullptr, &fn, 12000, 0, &status));
}

TEST_F(DriverTest, GetProcAddressResolvesItselfInBothForms) {
  EXPECT_EQ(Lookup("cuGetProcAddress", 11030, 0), Addr(cuGetProcAddress));
  EXPECT_EQ(Lookup("cuGetProcAddress", 12000, 0), Addr(cuGetProcAddress_v2));
  void* fn = nullptr;
  ASSERT_CU(cuGetProcAddress("cuMemFree", &fn, 11030, 0));  // the 4-argument form
  EXPECT_EQ(fn, Addr(cuMemFree_v2));
}

TEST_F(DriverTest, ProcAddressQueriesAreLoggedInOrder) {
  Lookup("cuMemAlloc", 3020, 0);
  Lookup("cuLaunchKernel", 12000, 2);
  ASSERT_EQ(simcuda_proc_address_query_count(), 2u);
  char name[64];
  int version = 0;
  unsigned long long flags = 9;
  ASSERT_EQ(0, simcuda_proc_address_query(1, name, sizeof name, &version, &flags));
  EXPECT_STREQ(name, "cuLaunchKernel");
  EXPECT_EQ(version, 12000);
  EXPECT_EQ(flags, 2u);
  EXPECT_EQ(-1, simcuda_proc_address_query(2, name, sizeof name, &version, &flags));
}

TEST_F(DriverTest, CallsBeforeInitAndWithoutAContextFailWithTheRealCodes) {
  ASSERT_EQ(0, simcuda_reset(kBase));
  CUdeviceptr p = 0;
  EXPECT_EQ(CUDA_ERROR_NOT_INITIALIZED, cuMemAlloc(&p, kMiB));
  int count = 0;
  EXPECT_EQ(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGetCount(&count));
  ASSERT_CU(cuInit(0));
  EXPECT_EQ(CUDA_ERROR_INVALID_CONTEXT, cuMemAlloc(&p, kMiB));
  size_t f = 0, t = 0;
  EXPECT_EQ(CUDA_ERROR_INVALID_CONTEXT, cuMemGetInfo(&f, &t));
  CUdevice dev = 0;
  EXPECT_EQ(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&dev, 1));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuInit(1));
}

TEST_F(DriverTest, DevicesAreConfigurable) {
  Restart("SIMCUDA_DEVICE_COUNT=2 SIMCUDA_DEVICE_MEMORY=3GiB SIMCUDA_DEVICE_NAME=TestGPU");
  int count = 0;
  ASSERT_CU(cuDeviceGetCount(&count));
  EXPECT_EQ(count, 2);
  size_t total = 0;
  ASSERT_CU(cuDeviceTotalMem(&total, 1));
  EXPECT_EQ(total, 3 * kGiB);
  char name[64];
  ASSERT_CU(cuDeviceGetName(name, sizeof name, 1));
  EXPECT_STREQ(name, "TestGPU");
  CUcontext second = nullptr;
  ASSERT_CU(cuDevicePrimaryCtxRetain(&second, 1));
  ASSERT_CU(cuCtxSetCurrent(second));
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAlloc(&p, 4 * kMiB));
  EXPECT_EQ(simcuda_device_used_bytes(1), 4 * kMiB);
  EXPECT_EQ(simcuda_device_used_bytes(0), 0u);
  CUdevice dev = -1;
  ASSERT_CU(cuCtxGetDevice(&dev));
  EXPECT_EQ(dev, 1);
  int version = 0;
  ASSERT_CU(cuDriverGetVersion(&version));
  EXPECT_EQ(version, 13000);
  ASSERT_CU(cuMemFree(p));
}

TEST_F(DriverTest, FaultInjectionFailsExactlyTheNthCall) {
  Restart("SIMCUDA_FAIL=cuMemCreate:2:CUDA_ERROR_OUT_OF_MEMORY,cuMemMap:3+:CUDA_ERROR_INVALID_VALUE");
  CUmemAllocationProp prop = DeviceProp();
  CUmemGenericAllocationHandle h[3] = {};
  EXPECT_CU(cuMemCreate(&h[0], 2 * kMiB, &prop, 0));
  EXPECT_EQ(CUDA_ERROR_OUT_OF_MEMORY, cuMemCreate(&h[1], 2 * kMiB, &prop, 0));
  EXPECT_CU(cuMemCreate(&h[2], 2 * kMiB, &prop, 0));
  EXPECT_EQ(Used(), 4 * kMiB) << "the injected failure charged nothing";
  CUdeviceptr va = Reserve(8 * kMiB);
  for (int call = 1; call <= 2; ++call) {
    EXPECT_CU(cuMemMap(va, 2 * kMiB, 0, h[0], 0)) << "call " << call;
    EXPECT_CU(cuMemUnmap(va, 2 * kMiB));
  }
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemMap(va, 2 * kMiB, 0, h[0], 0));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemMap(va, 2 * kMiB, 0, h[0], 0)) << "3+ means every later call too";
  EXPECT_EQ(simcuda_call_count("cuMemMap"), 4u);
  EXPECT_CU(cuMemRelease(h[0]));
  EXPECT_CU(cuMemRelease(h[2]));
}

TEST_F(DriverTest, FaultsAcceptErrorNumbersAndCountPerThreadVariantsWithTheirBase) {
  Restart("SIMCUDA_FAIL=cuLaunchKernel:1:999");
  EXPECT_EQ(CUDA_ERROR_UNKNOWN, cuLaunchKernel_ptsz(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr));
  EXPECT_EQ(simcuda_call_count("cuLaunchKernel"), 1u);
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr));
}

TEST_F(DriverTest, BadSettingsAreRejectedWithOneLineNamingThem) {
  testing::internal::CaptureStderr();
  EXPECT_EQ(-1, simcuda_reset("SIMCUDA_DEVICE_MEMORY=lots"));
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("SIMCUDA_DEVICE_MEMORY='lots'"), std::string::npos) << err;
  EXPECT_NE(err.find("expected a size"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), err.size() - 1) << "one line";
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuInit(0)) << "a misconfigured driver refuses to start";

  testing::internal::CaptureStderr();
  EXPECT_EQ(-1, simcuda_reset("SIMCUDA_DEVICE_MEM=1GiB"));
  err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("unknown setting SIMCUDA_DEVICE_MEM"), std::string::npos) << err;
  EXPECT_NE(err.find("did you mean SIMCUDA_DEVICE_MEMORY"), std::string::npos) << err;

  for (const char* bad :
       {"SIMCUDA_GRANULARITY=3MiB", "SIMCUDA_FAIL=cuMemMap:0:1", "SIMCUDA_FAIL=cuMemMap:1:NOPE",
        "SIMCUDA_LATENCY_US=cuMemMap", "SIMCUDA_DEVICE_COUNT=0", "SIMCUDA_HOST_VMM=maybe", "garbage"}) {
    testing::internal::CaptureStderr();
    EXPECT_EQ(-1, simcuda_reset(bad)) << bad;
    EXPECT_FALSE(testing::internal::GetCapturedStderr().empty()) << bad;
  }
}

TEST_F(DriverTest, LatencySettingSlowsOnlyTheNamedCall) {
  Restart("SIMCUDA_LATENCY_US=cuMemCreate=20000");
  CUmemAllocationProp prop = DeviceProp();
  CUmemGenericAllocationHandle h = 0;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_CU(cuMemCreate(&h, 2 * kMiB, &prop, 0));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  // A lower bound only: the busy-wait guarantees at least the configured time, whatever the load.
  EXPECT_GE(elapsed, std::chrono::milliseconds(20));
  ASSERT_CU(cuMemRelease(h));
}

TEST_F(DriverTest, ErrorNamesAndStrings) {
  const char* name = nullptr;
  const char* text = nullptr;
  ASSERT_CU(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &name));
  ASSERT_CU(cuGetErrorString(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, &text));
  EXPECT_STREQ(name, "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_NE(std::string(text).find("capture"), std::string::npos);
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuGetErrorName(static_cast<CUresult>(123456), &name));
}

TEST_F(DriverTest, AForkedChildStartsWithAFreshDriver) {
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAlloc(&p, 64 * kMiB));
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Exit codes: 0 ok; 1..4 which check failed.
    CUdeviceptr q = 0;
    if (cuMemAlloc(&q, kMiB) != CUDA_ERROR_NOT_INITIALIZED) _exit(1);
    if (cuInit(0) != CUDA_SUCCESS) _exit(2);
    CUcontext c = nullptr;
    if (cuDevicePrimaryCtxRetain(&c, 0) != CUDA_SUCCESS || cuCtxSetCurrent(c) != CUDA_SUCCESS) _exit(3);
    size_t f = 0, t = 0;
    if (cuMemGetInfo(&f, &t) != CUDA_SUCCESS || f != t) _exit(4);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(Used(), 64 * kMiB) << "the parent is unaffected";
  ASSERT_CU(cuMemFree(p));
}

TEST_F(DriverTest, DocsCarryTheGeneratedSettingsTable) {
  std::ifstream doc(KVREMAP_SOURCE_DIR "/docs/simulator.md");
  ASSERT_TRUE(doc.good()) << "docs/simulator.md is missing";
  std::stringstream text;
  text << doc.rdbuf();
  EXPECT_NE(text.str().find(simcuda_settings_markdown()), std::string::npos)
      << "docs/simulator.md is out of date; paste this table:\n"
      << simcuda_settings_markdown();
}
