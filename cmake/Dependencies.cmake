# Finds every third-party dependency; a missing one stops configuration naming its Debian package.

set(KVREMAP_INSTALL_HINT "run scripts/install-deps.sh (or: apt-get install <package>)")

macro(kvremap_require found debian_package what)
  if(NOT ${found})
    message(FATAL_ERROR
      "kvremap: ${what} not found: install the Debian package '${debian_package}' — ${KVREMAP_INSTALL_HINT}")
  endif()
endmacro()

# CUDA toolkit: headers only. Nothing here links libcuda or libcudart; real symbols are resolved at run time.
if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS /usr/local/cuda/include/cuda.h)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_package(CUDAToolkit QUIET)
kvremap_require(CUDAToolkit_FOUND "nvidia-cuda-toolkit (or NVIDIA's cuda-toolkit at /usr/local/cuda)" "CUDA toolkit headers")
add_library(kvremap_cuda_headers INTERFACE)
target_include_directories(kvremap_cuda_headers SYSTEM INTERFACE ${CUDAToolkit_INCLUDE_DIRS})

find_package(Threads REQUIRED)
find_package(PkgConfig QUIET)
kvremap_require(PKG_CONFIG_FOUND pkg-config "pkg-config")
pkg_check_modules(LIBUNWIND QUIET IMPORTED_TARGET libunwind)
kvremap_require(LIBUNWIND_FOUND libunwind-dev "libunwind")

find_package(TBB CONFIG QUIET)
kvremap_require(TBB_FOUND libtbb-dev "oneTBB")
find_package(fmt CONFIG QUIET)
kvremap_require(fmt_FOUND libfmt-dev "fmt")
find_package(spdlog CONFIG QUIET)
kvremap_require(spdlog_FOUND libspdlog-dev "spdlog")
find_package(nlohmann_json CONFIG QUIET)
kvremap_require(nlohmann_json_FOUND nlohmann-json3-dev "nlohmann-json")
find_package(CLI11 CONFIG QUIET)
kvremap_require(CLI11_FOUND libcli11-dev "CLI11")

if(KVREMAP_BUILD_TESTS)
  find_package(GTest QUIET)
  kvremap_require(GTest_FOUND "libgtest-dev libgmock-dev" "GoogleTest/GoogleMock")
  find_package(benchmark CONFIG QUIET)
  kvremap_require(benchmark_FOUND libbenchmark-dev "Google Benchmark")
endif()
