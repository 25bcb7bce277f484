// Proves test binaries run on the simulated libcudart/libcuda, never on the toolkit's real libraries.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <link.h>

#include <string>
#include <vector>

namespace {
std::vector<std::string> LoadedObjects() {
  std::vector<std::string> paths;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        if (info->dlpi_name && *info->dlpi_name)
          static_cast<std::vector<std::string>*>(out)->push_back(info->dlpi_name);
        return 0;
      },
      &paths);
  return paths;
}

bool IsCudaLibrary(const std::string& path) {
  return path.find("libcudart.so") != std::string::npos || path.find("libcuda.so") != std::string::npos;
}
}  // namespace

TEST(SimcudaLoading, OnlyTheSimulatedCudaLibrariesAreLoaded) {
  ASSERT_EQ(cudaSuccess, cudaFree(nullptr));  // makes the runtime dlopen libcuda.so.1
  int cuda_objects = 0;
  for (const std::string& path : LoadedObjects()) {
    if (!IsCudaLibrary(path)) continue;
    ++cuda_objects;
    EXPECT_EQ(path.rfind(SIMCUDA_DIR "/", 0), 0u) << "loaded a CUDA library from outside the simulator: " << path;
    EXPECT_EQ(path.find("/usr/local/cuda"), std::string::npos) << path;
  }
  EXPECT_EQ(cuda_objects, 2) << "expected exactly the simulated libcudart.so.13 and libcuda.so.1";
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(driver, nullptr);
  EXPECT_NE(dlsym(driver, "simcuda_reset"), nullptr) << "libcuda.so.1 is not the simulated driver";
  dlclose(driver);
}
