// PyTorch's fill kernel, as torch.zeros runs it on a CUDA tensor: its shape, its mangled name, its launches.
//
// Tensor.zero_() is fill_(0) on every device but the CPU (aten/src/ATen/native/Fill.cpp), and the CUDA fill
// is gpu_kernel over FillFunctor<T>(value) (native/cuda/FillKernel.cu), which for a contiguous tensor
// launches vectorized_elementwise_kernel<vec_size>(int N, FillFunctor<T> f, array data) with a 32-bit
// element count, splitting a larger tensor into several launches at interior pointers
// (native/cuda/CUDALoops.cuh, TensorIterator::with_32bit_indexing). The replica keeps that shape (its
// array type is its own, so the mangled name differs from PyTorch's in that part only).
#pragma once

#include <cstdint>

namespace at::native {

template <typename T>
struct FillFunctor {
  T value;
};

template <typename T, int n>
struct Array {
  T data[n];
};

#ifdef __CUDACC__
template <int vec_size, typename func_t, typename array_t>
__global__ void vectorized_elementwise_kernel(int N, func_t f, array_t data) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < N) reinterpret_cast<decltype(f.value)*>(data.data[0])[i] = f.value;
}
#endif

}  // namespace at::native

namespace vllm_like {

// The int8 instance torch.zeros(..., dtype=torch.int8) launches (vLLM's KV cache bytes).
inline constexpr const char* kTorchFillKernel =
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIaEENS0_5ArrayIPcLi1EEEEEviT0_T1_";
// The most elements one launch covers (a 32-bit index), rounded down to whole MiB.
inline constexpr std::uint64_t kTorchFillMaxElements = (std::uint64_t{1} << 31) - (std::uint64_t{1} << 20);

}  // namespace vllm_like
