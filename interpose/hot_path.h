// KVREMAP_HOT_PATH: marks the functions every tracked allocation and free runs through.
#pragma once

// GCC places functions marked hot in .text.hot, which the linker gathers at the start of .text: the
// path of a cudaMalloc+cudaFree pair then lies in 9 KiB of consecutive code instead of being spread
// over the library's 300 KiB. Between two hooks a real driver makes system calls that evict the
// hooks' code and data from the first-level caches, so the pair's cost is mostly cache misses; see
// docs/benchmarks.md (session 6) for what this and the cache-line layout of DeviceStats measured.
#define KVREMAP_HOT_PATH __attribute__((hot))
