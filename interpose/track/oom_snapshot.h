// Out-of-memory snapshots: what was live, by category and by caller, when a hook returned out of memory.
#pragma once

#include <cstdint>
#include <string>

namespace kvremap::interpose {

// Large allocations (at least KVREMAP_STACK_MIN_BYTES, the ones whose caller the trace names) and
// who holds them, for the snapshot's top callers. `kind` tells apart keys of different spaces
// (device pointers, VMM handles).
void note_caller(int kind, std::uint64_t key, int device, std::uint64_t bytes, const std::string& caller);
void forget_caller(int kind, std::uint64_t key);

// An allocation hook is about to return an out-of-memory error for `bytes`: the first time in the
// device's current phase, the trace records a snapshot (docs/trace-format.md, "Out-of-memory snapshots").
void on_out_of_memory(std::uint64_t bytes, const char* api, void* return_address, int device_hint = -1);

// Called first by on_out_of_memory, with the bytes asked and the device hint, whether or not the trace
// is on: the KV layer learns a serving out-of-memory from it (set at load by the process layer).
void set_out_of_memory_hook(void (*hook)(std::uint64_t bytes, int device_hint));

// In a forked child: the registry's lock may have been held by another thread of the parent.
void oom_child_after_fork();

}  // namespace kvremap::interpose
