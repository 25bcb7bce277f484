// KV deferral observe-only where the engine maps its own KV cache (expandable segments, elastic KV): decided, said
// once.
#pragma once

#include <cstdint>
#include <string>

namespace kvremap::interpose {

// At load (process/library.cpp), in defer mode: reads PyTorch's allocator settings (PYTORCH_ALLOC_CONF,
// else PYTORCH_CUDA_ALLOC_CONF). With expandable segments on, KV deferral is observe-only for the whole
// process, said once when tracking starts (an info line and the `kv observe only` trace event). A setting
// PyTorch would refuse gets one warning.
void kv_observe_only_at_load();

// The engine's own VMM calls, for the signs of an engine-mapped KV cache (policy/engine_mapped_kv.h): a
// reservation of at least 1.125 × the device's memory, one handle mapped at several addresses, elastic
// capacity mostly unmapped. Meant for the driver hooks of cuMemAddressReserve, cuMemAddressFree, cuMemMap
// and cuMemUnmap, after the driver succeeded; `device` is the current device.
void kv_note_engine_reserve(std::uint64_t va, std::uint64_t bytes, int device);
void kv_note_engine_address_free(std::uint64_t va);
void kv_note_engine_map(std::uint64_t va, std::uint64_t bytes, std::uint64_t handle);
void kv_note_engine_unmap(std::uint64_t va, std::uint64_t bytes);

// Whether KV deferral is observe-only in this process: then nothing is placed in the KV arena (the
// engine's KV cache is not a cudaMalloc kvremap could defer, and its pages are shared with other tensors).
// The first call that finds it so says so, once, where load did not already.
bool kv_observe_only();

// Why nothing is deferred, in one line (for the `kv nothing deferred` reason, which follows the notice);
// "" when deferral is not observe-only.
std::string kv_observe_only_reason();

}  // namespace kvremap::interpose
