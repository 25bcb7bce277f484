// The device ordinals kvremap keeps per-device state for, and the one clamp every per-device table uses.
#pragma once

#include "interpose/base/hot_path.h"

namespace kvremap::interpose {

// Tables are arrays of this many devices (more than any node has GPUs).
constexpr int kMaxDevices = 64;

// A device's slot: an ordinal outside the table (a driver answering garbage) falls back to 0
// rather than indexing past the end.
[[gnu::always_inline]] inline int device_index(int device) {
  return KVREMAP_LIKELY(device >= 0 && device < kMaxDevices) ? device : 0;
}

}  // namespace kvremap::interpose
