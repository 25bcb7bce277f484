// Thread-local reentrancy guard: CUDA calls made while a hook is active go straight to the real function.
#pragma once

#include "interpose/thread_hot.h"

namespace kvremap::interpose {

// Marks the current thread as inside a hook for its lifetime.
class HookScope {
 public:
  HookScope() { ++t_hot.hook_depth; }
  ~HookScope() { --t_hot.hook_depth; }
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;
};

inline bool inside_hook() { return t_hot.hook_depth > 0; }

}  // namespace kvremap::interpose
