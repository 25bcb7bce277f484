// Declares the PTX text of kernels.cu, generated at build time into kernels_ptx.cpp.
#pragma once

namespace vllm_like {

// NUL-terminated PTX, as cudaLibraryLoadData expects for text input.
extern const char kKernelsPtx[];

}  // namespace vllm_like
