// The registry of threads that have run a hook, and the exit's wait for those still inside one.
#include "interpose/base/hook_threads.h"

#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <vector>

#include "interpose/base/guard.h"
#include "interpose/base/process_object.h"

namespace kvremap::interpose {
namespace {

// Process objects (never destroyed): threads may still register or leave while the process exits.
constinit ProcessObject<std::mutex> g_registry_lock;
std::mutex& registry_lock() { return g_registry_lock.get(); }
constinit ProcessObject<std::vector<std::atomic<int>*>> g_registry;
std::vector<std::atomic<int>*>& registry() { return g_registry.get(); }

pthread_key_t g_leave_key;
std::once_flag g_init;
bool g_membarrier = false;  // the expedited private membarrier is registered for this process

void forget_thread(void* depth) {
  std::lock_guard<std::mutex> g(registry_lock());
  auto& r = registry();
  r.erase(std::remove(r.begin(), r.end(), static_cast<std::atomic<int>*>(depth)), r.end());
}

void init() {
  pthread_key_create(&g_leave_key, forget_thread);
  g_membarrier = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

// Every thread of the process passes a full memory barrier: afterwards each hook's depth store and
// this thread's store of g_finished are visible to the other side.
void heavy_fence() {
  if (g_membarrier && syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0) return;
  // Without membarrier (old kernels, seccomp): store buffers drain in well under a microsecond.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  timespec pause{0, 2'000'000};
  nanosleep(&pause, nullptr);
}

}  // namespace

void register_hook_thread() {
  t_hot.hook_registered = true;
  try {
    std::call_once(g_init, init);
    std::lock_guard<std::mutex> g(registry_lock());
    registry().push_back(&t_hot.hook_depth);
    pthread_setspecific(g_leave_key, &t_hot.hook_depth);  // forgotten when the thread ends
  } catch (...) {
    // Out of memory: this thread is not waited for at exit; it still works.
  }
}

int wait_for_hooks_to_leave(int max_ms) {
  std::call_once(g_init, init);
  heavy_fence();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(max_ms);
  std::vector<std::atomic<int>*> threads;
  {
    std::lock_guard<std::mutex> g(registry_lock());
    threads = registry();
  }
  int inside = 0;
  for (std::atomic<int>* depth : threads) {
    if (depth == &t_hot.hook_depth) continue;  // the exiting thread itself (maybe inside a hook)
    while (depth->load(std::memory_order_acquire) > 0 && std::chrono::steady_clock::now() < deadline) sched_yield();
    inside += depth->load(std::memory_order_acquire) > 0 ? 1 : 0;
  }
  return inside;
}

void hook_threads_prepare_fork() { registry_lock().lock(); }
void hook_threads_parent_after_fork() { registry_lock().unlock(); }
void hook_threads_child_after_fork() {
  // Only the forking thread exists in the child; the others' entries would never leave a hook.
  auto& r = registry();
  r.clear();
  if (t_hot.hook_registered) r.push_back(&t_hot.hook_depth);
  registry_lock().unlock();
}

}  // namespace kvremap::interpose
