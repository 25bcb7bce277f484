// Thread-local reentrancy guard: CUDA calls made while a hook is active go straight to the real function.
#pragma once

namespace kvremap::interpose {

inline thread_local int t_hook_depth = 0;

// Marks the current thread as inside a hook for its lifetime.
class HookScope {
 public:
  HookScope() { ++t_hook_depth; }
  ~HookScope() { --t_hook_depth; }
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;
};

inline bool inside_hook() { return t_hook_depth > 0; }

}  // namespace kvremap::interpose
