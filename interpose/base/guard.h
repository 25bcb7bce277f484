// Thread-local reentrancy guard: CUDA calls made while a hook is active go straight to the real function.
#pragma once

#include "interpose/base/thread_hot.h"

namespace kvremap::interpose {

// Adds the calling thread's hook_depth to the list the exit drain waits on (once per thread).
void register_hook_thread();

// Marks the current thread as inside a hook for its lifetime. A tracked hook takes its scope before
// it reads tracking(): with the exit's membarrier (exit_handlers.cpp) that makes "inside a hook" and
// "tracking is over" exclusive — a hook either sees the exit or is waited for by it.
class HookScope {
 public:
  HookScope() {
    if (__builtin_expect(!t_hot.hook_registered, 0)) register_hook_thread();
    t_hot.hook_depth.store(t_hot.hook_depth.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the cheap half of an asymmetric fence
  }
  ~HookScope() {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    t_hot.hook_depth.store(t_hot.hook_depth.load(std::memory_order_relaxed) - 1, std::memory_order_release);
  }
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;
};

inline bool inside_hook() { return t_hot.hook_depth.load(std::memory_order_relaxed) > 0; }

}  // namespace kvremap::interpose
