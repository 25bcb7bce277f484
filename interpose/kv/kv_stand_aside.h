// Stacked interposers: kvremap keeps KV placement out of an allocation API whose next definer is another interposer.
#pragma once

#include <string>

namespace kvremap::interpose {

// Whether kvremap stands aside for `api` ("cudaMalloc", "cuMemAlloc", "cuMemCreate"): the function its hook forwards
// to is defined by a library other than the CUDA runtime or driver — another interposer loaded after
// kvremap, such as torch_memory_saver, that must see the KV allocation itself (it maps and later
// releases that memory). Decided once per API, at the first KV candidate; the deciding call warns
// once and records `kv stands aside`. Those allocations then stay ordinary, traced allocations. Also true
// for every API while KV deferral is observe-only (kv_observe_only.h: the engine maps its KV cache itself).
bool kv_stands_aside(const char* api);

// Whether the code at `return_address` (a VMM call's caller) belongs to a library that itself defines
// `cudaMalloc` other than the CUDA runtime: an interposer, such as torch_memory_saver ahead of kvremap in
// LD_PRELOAD, whose VMM memory is its own to pause and resume. kvremap then leaves that memory alone (no
// virtual handle), and says so once per library.
bool kv_made_by_interposer(void* return_address);

// The library kvremap stood aside for (the first API's, as decided so far), or "" when none.
std::string kv_stood_aside_for();

}  // namespace kvremap::interpose
