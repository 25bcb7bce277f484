// Per-thread device selection and primary-context binding, the runtime's implicit context model.
//
// The real runtime never exposes contexts: each thread has a current device, and the first call
// that needs a context retains that device's primary context (once per process) and makes it
// current on the thread. The test reset hook lives here because it must forget exactly this state.
#include "context.h"

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "export.h"
#include "simcudart.h"

namespace simcudart {
namespace {

std::mutex g_mutex;
bool g_driver_initialised = false;  // guarded by g_mutex
std::vector<CUcontext> g_primary;   // retained primary context per ordinal, guarded by g_mutex
std::set<std::pair<int, int>> g_peers;  // (device, peer) with peer access enabled, guarded by g_mutex
// Bumped by the test reset: thread-local state from an older generation is stale and ignored.
std::atomic<std::uint64_t> g_generation{1};

struct ThreadState {
  std::uint64_t generation = 0;  // generation these fields belong to
  int device = 0;
  bool context_bound = false;  // `device`'s primary context is current on this thread
};
thread_local ThreadState t_state;

ThreadState& thread_state() noexcept {
  const std::uint64_t now = g_generation.load(std::memory_order_acquire);
  if (t_state.generation != now) t_state = ThreadState{now, 0, false};
  return t_state;
}

// Returns the retained primary context of `device`, retaining it on first use.
cudaError_t primary_context(int device, CUcontext* out) {
  const DriverTable& t = driver();
  std::lock_guard<std::mutex> lock(g_mutex);
  if (device < 0) return cudaErrorInvalidDevice;
  if (static_cast<std::size_t>(device) < g_primary.size() && g_primary[device] != nullptr) {
    *out = g_primary[device];
    return cudaSuccess;
  }
  CUdevice handle = 0;
  if (cudaError_t e = call_driver(t.cuDeviceGet, &handle, device); e != cudaSuccess) return e;
  CUcontext ctx = nullptr;
  if (cudaError_t e = call_driver(t.cuDevicePrimaryCtxRetain, &ctx, handle); e != cudaSuccess) return e;
  if (g_primary.size() <= static_cast<std::size_t>(device)) g_primary.resize(device + 1, nullptr);
  g_primary[device] = ctx;
  *out = ctx;
  return cudaSuccess;
}

// Fork: a CUDA context does not survive it (the simulated driver's child starts uninitialised, sim_core.cpp), so
// the runtime's child forgets its contexts too; and g_mutex, which another thread may hold across a driver call
// at the fork, is taken before it and released on both sides, so the child never inherits it locked. Registered
// after the driver's own handlers (at the first successful cuInit), so that this prepare handler runs first
// (they run in reverse order) and takes g_mutex before the driver's lock, in the order the runtime's calls take
// them. Registered outside g_mutex: fork holds the handler list's lock while it runs the handlers.
void atfork_prepare() { g_mutex.lock(); }
void atfork_parent() { g_mutex.unlock(); }
void atfork_child() {
  g_driver_initialised = false;
  g_primary.clear();
  g_peers.clear();
  g_generation.fetch_add(1, std::memory_order_acq_rel);
  g_mutex.unlock();
}
std::once_flag g_atfork_once;

}  // namespace

cudaError_t ensure_initialised() noexcept {
  const DriverTable* t = driver_table();
  if (t == nullptr) return kNoDriver;
  try {
    cudaError_t e = cudaSuccess;
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      if (g_driver_initialised) return cudaSuccess;
      // A failure is not cached: the next call tries again (the simulated driver can be
      // reconfigured between tests).
      e = call_driver(t->cuInit, 0u);
      if (e == cudaSuccess) g_driver_initialised = true;
    }
    if (e == cudaSuccess) std::call_once(g_atfork_once, [] { pthread_atfork(atfork_prepare, atfork_parent, atfork_child); });
    return e;
  } catch (...) {
    return cudaErrorUnknown;  // std::mutex::lock failing; never let it reach the host
  }
}

cudaError_t ensure_context() noexcept {
  if (cudaError_t e = ensure_initialised(); e != cudaSuccess) return e;
  ThreadState& state = thread_state();
  if (state.context_bound) return cudaSuccess;
  try {
    CUcontext ctx = nullptr;
    if (cudaError_t e = primary_context(state.device, &ctx); e != cudaSuccess) return e;
    if (cudaError_t e = call_driver(driver().cuCtxSetCurrent, ctx); e != cudaSuccess) return e;
    state.context_bound = true;
    return cudaSuccess;
  } catch (...) {
    return cudaErrorUnknown;
  }
}

int current_device() noexcept { return thread_state().device; }

cudaError_t set_peer_access(int device, int peer, bool enable) noexcept {
  try {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (enable) return g_peers.insert({device, peer}).second ? cudaSuccess : cudaErrorPeerAccessAlreadyEnabled;
    return g_peers.erase({device, peer}) ? cudaSuccess : cudaErrorPeerAccessNotEnabled;
  } catch (...) {
    return cudaErrorMemoryAllocation;
  }
}

cudaError_t device_context(int device, CUcontext* out) noexcept {
  try {
    if (cudaError_t e = ensure_initialised(); e != cudaSuccess) return e;
    return primary_context(device, out);
  } catch (...) {
    return cudaErrorUnknown;
  }
}

void select_device(int device) noexcept {
  ThreadState& state = thread_state();
  if (state.device != device) {
    state.device = device;
    state.context_bound = false;
  }
}

}  // namespace simcudart

SIMCUDART_API void simcudart_reset_for_tests(void) {
  try {
    std::lock_guard<std::mutex> lock(simcudart::g_mutex);
    // The driver was reset underneath us: its contexts are gone, so nothing is released.
    simcudart::g_driver_initialised = false;
    simcudart::g_primary.clear();
    simcudart::g_peers.clear();
    simcudart::g_generation.fetch_add(1, std::memory_order_acq_rel);
  } catch (...) {
  }
  simcudart::clear_last_error();
}
