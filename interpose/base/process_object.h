// The one way the library keeps a process-wide object: made at first use, never destroyed, replaceable in a forked child.
#pragma once

#include <atomic>

#include "interpose/base/hot_path.h"

namespace kvremap::interpose {

namespace process_object_detail {
// Objects replace() took out of use, kept reachable from a global for the process's life: they are never
// freed (a thread may still use one), and a leak checker at a forked child's exit must not count them.
struct Retired {
  const void* object;
  Retired* next;
};
inline constinit std::atomic<Retired*> g_retired{nullptr};
inline void keep_reachable(const void* object) {
  if (object == nullptr) return;
  auto* node = new Retired{object, g_retired.load(std::memory_order_relaxed)};
  while (!g_retired.compare_exchange_weak(node->next, node, std::memory_order_acq_rel)) {
  }
}
}  // namespace process_object_detail

template <typename T>
T* make_default() {
  return new T;
}

// A constant-initialised pointer, declared `constinit` at namespace scope:
// - made at first use, not by a dynamic initialiser: another library's constructor may call a hook
//   before this library's initialisers have run;
// - never destroyed: hooks and the trace writer run during and after exit, after static destructors;
// - get() is one acquire load and a branch, where a function-local static adds its guard check;
// - a forked child can replace() it: the parent's object may hold a lock that a thread of the parent
//   had at the fork, which nobody in the child will release.
// Two threads' first uses may both make one; one of them is deleted, so `Make` must have no effect
// beyond the object it returns.
template <typename T, T* (*Make)() = make_default<T>>
class ProcessObject {
 public:
  constexpr ProcessObject() = default;
  ProcessObject(const ProcessObject&) = delete;
  ProcessObject& operator=(const ProcessObject&) = delete;

  [[gnu::always_inline]] T& get() {
    T* p = object_.load(std::memory_order_acquire);
    return KVREMAP_LIKELY(p != nullptr) ? *p : make();
  }
  // The object, or null before its first use.
  T* peek() const { return object_.load(std::memory_order_acquire); }
  // Puts `fresh` (null: made at the next get()) in place and returns the object it replaces, which
  // stays allocated: it may still be reachable from a thread that read it before.
  T* replace(T* fresh) {
    T* replaced = object_.exchange(fresh, std::memory_order_acq_rel);
    process_object_detail::keep_reachable(replaced);
    return replaced;
  }

 private:
  [[gnu::noinline]] T& make() {
    T* fresh = Make();
    T* expected = nullptr;
    if (object_.compare_exchange_strong(expected, fresh, std::memory_order_acq_rel)) return *fresh;
    delete fresh;  // another thread's first use won
    return *expected;
  }

  std::atomic<T*> object_{nullptr};
};

}  // namespace kvremap::interpose
