// KVREMAP_METRICS_FILE: this process's KV cache per device as Prometheus text, rewritten whole at each change.
#pragma once

#include <cstdint>

#include "policy/phases.h"

namespace kvremap::interpose::metrics {

// Each records what changed and rewrites the file (nothing when KVREMAP_METRICS_FILE is empty). Never throw;
// a file that cannot be written is one warning per process, and the engine goes on.
void on_deferred(int device, std::uint64_t kv_bytes, std::uint64_t scratch_bytes);
void on_committed(int device, std::uint64_t kv_bytes, std::uint64_t device_bytes, std::uint64_t host_bytes,
                  std::uint64_t headroom_bytes);
void on_overflow(int device, std::uint64_t bytes);
void on_phase(int device, policy::Phase phase);

// A forked child starts with no figures of its own (its parent's devices are the parent's).
void child_after_fork();

}  // namespace kvremap::interpose::metrics
