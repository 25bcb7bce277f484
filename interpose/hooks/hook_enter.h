// How every hook body begins, for both APIs: the real function, the reentrancy guard, tracking.
#pragma once

#include "interpose/base/guard.h"
#include "interpose/base/hot_path.h"
#include "interpose/track/tracker.h"

// Declares `real` (the function this hook stands in front of) and returns through it at once when
// the hook must not act: a nested call (cudart's own driver calls under a runtime hook), a call
// before initialisation, or after tracking ended. Otherwise the hook body runs inside a HookScope.
// `unavailable` is the API's error for a real function that cannot be found.
#define KVREMAP_ENTER_THROUGH(real_fn, unavailable, ...)                         \
  auto real = real_fn;                                                           \
  if (!real) return unavailable;                                                 \
  if (KVREMAP_UNLIKELY(::kvremap::interpose::inside_hook())) return real(__VA_ARGS__); \
  ::kvremap::interpose::HookScope scope;                                         \
  if (KVREMAP_UNLIKELY(!::kvremap::interpose::tracking())) return real(__VA_ARGS__)

// A driver hook of driver_hooks.h's table.
#define KVREMAP_ENTER(exp, ...) KVREMAP_ENTER_THROUGH(KVREMAP_REAL(exp), CUDA_ERROR_NOT_INITIALIZED, __VA_ARGS__)
