// Launching the sample kernels and generating module PTX for vllm_like.
#include "device_ops.h"

#include <algorithm>
#include <string>

#include "cuda_check.h"
#include "kernels_ptx.h"
#include "kv_sample.h"
#include "torch_fill.h"

namespace vllm_like {

namespace {

constexpr unsigned int kBlock = 256;

dim3 grid_for(std::uint64_t bytes) {
  const std::uint64_t n = sample_count(bytes, kSampleStride);
  return dim3(static_cast<unsigned int>((n + kBlock - 1) / kBlock));
}

}  // namespace

Kernels::Kernels(cudaStream_t stream) : stream_(stream) {
  VLLM_LIKE_CHECK(cudaLibraryLoadData(&library_, kKernelsPtx, nullptr, nullptr, 0, nullptr, nullptr, 0));
  VLLM_LIKE_CHECK(cudaLibraryGetKernel(&fill_, library_, "sample_fill"));
  VLLM_LIKE_CHECK(cudaLibraryGetKernel(&check_, library_, "sample_check"));
  VLLM_LIKE_CHECK(cudaLibraryGetKernel(&torch_fill_, library_, kTorchFillKernel));
  VLLM_LIKE_CHECK(cudaMalloc(reinterpret_cast<void**>(&mismatches_), sizeof *mismatches_));
  VLLM_LIKE_CHECK(cudaMemsetAsync(mismatches_, 0, sizeof *mismatches_, stream_));
}

void Kernels::fill(void* base, std::uint64_t bytes, std::uint32_t seed) const {
  std::uint64_t stride = kSampleStride;
  void* args[] = {&base, &bytes, &stride, &seed};
  VLLM_LIKE_CHECK(
      cudaLaunchKernel(reinterpret_cast<const void*>(fill_), grid_for(bytes), dim3(kBlock), args, 0, stream_));
}

void Kernels::check(const void* base, std::uint64_t bytes, std::uint32_t seed) const {
  std::uint64_t stride = kSampleStride;
  std::uint32_t* counter = mismatches_;
  void* args[] = {&base, &bytes, &stride, &seed, &counter};
  VLLM_LIKE_CHECK(
      cudaLaunchKernel(reinterpret_cast<const void*>(check_), grid_for(bytes), dim3(kBlock), args, 0, stream_));
}

void Kernels::torch_zeros(void* base, std::uint64_t bytes) const {
  for (std::uint64_t at = 0; at < bytes; at += kTorchFillMaxElements) {
    int n = static_cast<int>(std::min(bytes - at, kTorchFillMaxElements));
    at::native::FillFunctor<signed char> zero{0};
    at::native::Array<char*, 1> data{{static_cast<char*>(base) + at}};
    void* args[] = {&n, &zero, &data};
    const unsigned int blocks = static_cast<unsigned int>((static_cast<std::uint64_t>(n) + kBlock - 1) / kBlock);
    VLLM_LIKE_CHECK(
        cudaLaunchKernel(reinterpret_cast<const void*>(torch_fill_), dim3(blocks), dim3(kBlock), args, 0, stream_));
  }
}

std::uint32_t Kernels::take_mismatches() const {
  std::uint32_t count = 0;
  VLLM_LIKE_CHECK(cudaStreamSynchronize(stream_));
  VLLM_LIKE_CHECK(cudaMemcpy(&count, mismatches_, sizeof count, cudaMemcpyDeviceToHost));
  VLLM_LIKE_CHECK(cudaMemsetAsync(mismatches_, 0, sizeof *mismatches_, stream_));
  return count;
}

cudaLibrary_t load_generated_module(std::size_t index, std::uint64_t bytes) {
  // PTX ISA 8.0 / sm_90: accepted by CUDA 12.x and 13 drivers on H100/H200.
  const std::string ptx =
      ".version 8.0\n.target sm_90\n.address_size 64\n"
      "// simcuda-module-bytes: " +
      std::to_string(bytes) +
      "\n"
      ".visible .entry vllm_like_autotuned_" +
      std::to_string(index) + "()\n{\n\tret;\n}\n";
  cudaLibrary_t library = nullptr;
  VLLM_LIKE_CHECK(cudaLibraryLoadData(&library, ptx.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  return library;
}

}  // namespace vllm_like
