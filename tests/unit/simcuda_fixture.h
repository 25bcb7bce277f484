// Shared fixture for the simulated-driver suites: a fresh simulated device per test, and small helpers.
#pragma once

#include <cuda.h>
#include <gtest/gtest.h>

#include <string>

#include "simcuda.h"

#define ASSERT_CU(expr) ASSERT_EQ(CUDA_SUCCESS, (expr)) << #expr
#define EXPECT_CU(expr) EXPECT_EQ(CUDA_SUCCESS, (expr)) << #expr

constexpr unsigned long long kMiB = 1ULL << 20;
constexpr unsigned long long kGiB = 1ULL << 30;

class SimDriver : public ::testing::Test {
 protected:
  // Settings on top of the defaults every test here assumes; tests needing others call Restart().
  static constexpr const char* kBase =
      "SIMCUDA_DEVICE_MEMORY=1GiB SIMCUDA_GRANULARITY=2MiB SIMCUDA_CONTEXT_BYTES=0 "
      "SIMCUDA_GRAPH_EXEC_BYTES=0 SIMCUDA_GRAPH_NODE_BYTES=0 SIMCUDA_MODULE_BYTES=0";

  void SetUp() override { Restart(""); }
  void TearDown() override { simcuda_reset(nullptr); }

  void Restart(const std::string& extra) {
    ASSERT_EQ(0, simcuda_reset((std::string(kBase) + " " + extra).c_str()));
    ASSERT_CU(cuInit(0));
    ASSERT_CU(cuDevicePrimaryCtxRetain(&ctx_, 0));
    ASSERT_CU(cuCtxSetCurrent(ctx_));
  }

  static CUmemAllocationProp DeviceProp(int device = 0) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    return prop;
  }

  static CUmemAccessDesc ReadWrite(int device = 0) {
    CUmemAccessDesc desc{};
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = device;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return desc;
  }

  CUdeviceptr Reserve(size_t bytes) {
    CUdeviceptr va = 0;
    EXPECT_CU(cuMemAddressReserve(&va, bytes, 0, 0, 0));
    return va;
  }

  CUmemGenericAllocationHandle Create(size_t bytes) {
    CUmemAllocationProp prop = DeviceProp();
    CUmemGenericAllocationHandle h = 0;
    EXPECT_CU(cuMemCreate(&h, bytes, &prop, 0));
    return h;
  }

  // Maps `h` (of `bytes`) at `va` and grants read/write.
  void MapRW(CUdeviceptr va, size_t bytes, CUmemGenericAllocationHandle h) {
    CUmemAccessDesc rw = ReadWrite();
    ASSERT_CU(cuMemMap(va, bytes, 0, h, 0));
    ASSERT_CU(cuMemSetAccess(va, bytes, &rw, 1));
  }

  static unsigned long long Used() { return simcuda_device_used_bytes(0); }

  CUcontext ctx_ = nullptr;
};
