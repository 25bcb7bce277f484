// Marks for the code every tracked allocation and free runs through: placement and branch layout.
#pragma once

// Between two hooks a real driver makes system calls (mmap, munmap, ioctl) whose kernel work evicts
// the hooks' code and data from the first-level caches and their branches from the predictors. The
// pair's cost is therefore mostly misses and branch redirects, not instructions (docs/benchmarks.md).
//
// KVREMAP_HOT_PATH: GCC places functions marked hot in .text.hot, which the linker gathers at the
// start of .text, so the path lies in a few KiB of consecutive code. Its small helpers are
// always_inline instead: a call and its return are two taken branches.
#define KVREMAP_HOT_PATH __attribute__((hot))

// Branch hints for the same path: they keep the blocks that run on every allocation (the record into
// the trace ring, the clock read, the fast exits) in line, so the common case runs straight through;
// a taken branch the predictor has forgotten costs a redirect, a not-taken one nothing
// (docs/benchmarks.md counts the path's jumps, calls and returns).
#define KVREMAP_LIKELY(condition) __builtin_expect(static_cast<bool>(condition), 1)
#define KVREMAP_UNLIKELY(condition) __builtin_expect(static_cast<bool>(condition), 0)
