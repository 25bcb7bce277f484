// Declares the PTX text of demo_kernels.cu, generated at build time into demo_kernels_ptx.cpp.
#pragma once

namespace remap_demo {

// NUL-terminated PTX, as cudaLibraryLoadData expects for text input.
extern const char kDemoKernelsPtx[];

}  // namespace remap_demo
