// What a kernel launch's parameters reveal: the addresses they carry, and PyTorch's zero fill.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace kvremap::policy {

// One kernel parameter as the launch passes it (by value): where it sits in the device-side parameter
// layout (cuFuncGetParamInfo's offset) and its bytes.
struct KernelParameter {
  std::size_t offset = 0;
  std::span<const std::byte> bytes;
};

// Whether any parameter carries an address in [begin, end). A pointer sits at an 8-byte-aligned offset
// of the layout whether it is a parameter itself (Triton, PyTorch's data arrays) or a member of a
// by-value parameter struct (FlashAttention's and FlashInfer's params), so each 8-byte-aligned word is
// read. A word that only looks like an address in the range counts too: the answer can be a false
// "yes", never a false "no".
bool carries_address_in(std::span<const KernelParameter> parameters, std::uint64_t begin, std::uint64_t end);

// Calls `visit(address)` for each 8-byte-aligned word in [begin, end), as carries_address_in reads them.
template <typename Visit>
void for_each_address_in(std::span<const KernelParameter> parameters, std::uint64_t begin, std::uint64_t end,
                         Visit&& visit);

// PyTorch's fill kernel writing zeros, as `torch.zeros` and `Tensor.zero_()` run it on a CUDA tensor:
// zero_ is fill_(0) for every device but the CPU (aten/src/ATen/native/Fill.cpp), and the CUDA fill is
// gpu_kernel over FillFunctor<T>(value) (native/cuda/FillKernel.cu), launched as
// vectorized_elementwise_kernel(int N, FillFunctor<T> f, array data) for a contiguous tensor, or
// unrolled_elementwise_kernel(N, f, data, ...) otherwise (native/cuda/CUDALoops.cuh): the functor, which
// holds only the value, is parameter 1. True when the kernel's (mangled) name has both the functor and
// an elementwise kernel and every byte of that parameter is zero; any other fill (a non-zero value,
// -0.0, a kernel of another shape) is a write kvremap cannot replay.
bool is_zero_fill_kernel(std::string_view name, std::span<const KernelParameter> parameters);

template <typename Visit>
void for_each_address_in(std::span<const KernelParameter> parameters, std::uint64_t begin, std::uint64_t end,
                         Visit&& visit) {
  for (const KernelParameter& p : parameters) {
    std::size_t at = (8 - p.offset % 8) % 8;  // the parameter's first 8-byte-aligned word
    for (; at + 8 <= p.bytes.size(); at += 8) {
      std::uint64_t word = 0;
      for (std::size_t i = 0; i < 8; ++i)
        word |= static_cast<std::uint64_t>(std::to_integer<std::uint8_t>(p.bytes[at + i])) << (8 * i);
      if (word >= begin && word < end) visit(word);
    }
  }
}

}  // namespace kvremap::policy
