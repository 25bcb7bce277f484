// Runtime initialisation: cuInit once, per-thread current device, primary context made current.
#pragma once

#include <cuda_runtime_api.h>

#include "driver_table.h"

namespace simcudart {

// Loads the driver and calls cuInit(0) once; what every call that talks to the driver needs.
cudaError_t ensure_initialised() noexcept;

// ensure_initialised, then makes the current device's primary context current on this thread
// (retaining it on the first use in the process), as the real runtime does lazily before any
// call that works in a context.
cudaError_t ensure_context() noexcept;

// The calling thread's current device (0 until cudaSetDevice).
int current_device() noexcept;

// Selects `device` for the calling thread; the caller has validated the ordinal.
void select_device(int device) noexcept;

// The primary context of `device` (retained on first use), for calls that name a device's context
// (peer copies); cudaErrorInvalidDevice for an ordinal the driver does not have.
cudaError_t device_context(int device, CUcontext* out) noexcept;

// Enables (or disables) access from `device` to `peer`, once each way: cudaErrorPeerAccessAlreadyEnabled
// or cudaErrorPeerAccessNotEnabled otherwise. The caller has checked the pair can be peers.
cudaError_t set_peer_access(int device, int peer, bool enable) noexcept;

// The table after a successful ensure_initialised/ensure_context (never null then).
inline const DriverTable& driver() noexcept { return *driver_table(); }

}  // namespace simcudart
