// policy::is_cuda_library: the CUDA runtime's and driver's files against other interposers' libraries.
#include <gtest/gtest.h>

#include "policy/stacked.h"

namespace {

using kvremap::policy::is_cuda_library;

TEST(StackedInterposer, TheRuntimeAndTheDriverAreCuda) {
  EXPECT_TRUE(is_cuda_library("/usr/local/cuda/lib64/libcudart.so.13"));
  EXPECT_TRUE(is_cuda_library("/usr/local/cuda/lib64/libcudart.so.12.8.90"));
  EXPECT_TRUE(is_cuda_library("libcudart.so"));
  EXPECT_TRUE(is_cuda_library("/usr/lib/x86_64-linux-gnu/libcuda.so.1"));
  EXPECT_TRUE(is_cuda_library("/build/simcuda/libcuda.so.1"));
  EXPECT_TRUE(is_cuda_library("/opt/x/libcuda.so"));
}

TEST(StackedInterposer, OtherLibrariesAreNot) {
  EXPECT_FALSE(is_cuda_library("/site-packages/torch_memory_saver_hook_mode_preload.abi3.so"));
  EXPECT_FALSE(is_cuda_library("/build/tests/libmemory_saver_standin.so"));
  EXPECT_FALSE(is_cuda_library("/opt/lib/libcudart_static.a"));
  EXPECT_FALSE(is_cuda_library("/opt/lib/libcuda.so_wrapper"));
  EXPECT_FALSE(is_cuda_library("/opt/lib/libcuda.so."));
  EXPECT_FALSE(is_cuda_library("/opt/libcudart.so.13/libshim.so"));  // a directory named like it
  EXPECT_FALSE(is_cuda_library("/opt/lib/libcudawrap.so"));
  EXPECT_FALSE(is_cuda_library(""));
}

}  // namespace
