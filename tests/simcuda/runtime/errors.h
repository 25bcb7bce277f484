// Driver-to-runtime error translation and the per-thread "last error" every cuda* call updates.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

namespace simcudart {

// The cudaError_t the real runtime reports for a driver result (CUDA_SUCCESS -> cudaSuccess;
// results with no runtime counterpart -> cudaErrorUnknown).
cudaError_t to_runtime_error(CUresult result) noexcept;

// Stores a failure as the calling thread's last error (cudaGetLastError / cudaPeekAtLastError);
// success leaves it alone, as in the real runtime. Returns `error` unchanged.
cudaError_t record_error(cudaError_t error) noexcept;

// Clears the calling thread's last error (test reset hook).
void clear_last_error() noexcept;

// Returned when libcuda.so.1 cannot be loaded or offers no cuGetProcAddress_v2: what the real
// runtime reports on a machine without a (recent enough) driver.
inline constexpr cudaError_t kNoDriver = cudaErrorInsufficientDriver;
// Returned when the driver loaded but resolved one needed entry point to NULL: that call, and only
// that call, needs a newer driver.
inline constexpr cudaError_t kMissingDriverFunction = cudaErrorCallRequiresNewerDriver;

}  // namespace simcudart
