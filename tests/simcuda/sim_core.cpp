// The simulated driver's core: state, locking, fault injection, cuInit, devices, contexts, control API.
#include <pthread.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "sim_errors.h"
#include "sim_state.h"
#include "simcuda.h"

namespace simcuda {
namespace {

// Never destroyed: other libraries' atexit handlers may still call the driver during exit.
std::mutex* g_lock = new std::mutex;
State* g_state = nullptr;

thread_local Context* t_context = nullptr;
thread_local std::uint64_t t_context_generation = 0;
thread_local const char* t_call = "";

void load_configuration(State& s, const char* overrides) {
  auto settings = environment_settings();
  std::string error;
  if (overrides && !split_settings(overrides, settings, error)) {
    s.config_error = error;
    return;
  }
  s.config_error = parse_config(settings, s.config);
  if (!s.config_error.empty()) return;
  s.devices.assign(static_cast<std::size_t>(s.config.device_count), Device{});
  for (int d = 0; d < s.config.device_count; ++d) s.devices[static_cast<std::size_t>(d)].primary.device = d;
}

State* fresh_state(const char* overrides, std::uint64_t generation) {
  auto* s = new State;
  s->generation = generation;
  load_configuration(*s, overrides);
  return s;
}

void raise_fd_limit() {
  // Every VMM handle is a memfd; engines that map thousands of 2 MiB handles need more than 1024 fds.
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max < (1U << 20) ? limit.rlim_max : (1U << 20);
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

void atfork_prepare() { g_lock->lock(); }
void atfork_parent() { g_lock->unlock(); }
void atfork_child() {
  // A CUDA context does not survive fork: the child starts uninitialised with nothing allocated.
  // The parent's mappings stay in the child's address space untouched; the child just forgets them.
  State* parent = g_state;
  g_state = fresh_state(nullptr, parent ? parent->generation + 1 : 1);
  g_state->forgotten_at_fork = parent;
  t_context = nullptr;
  g_lock->unlock();
}

std::once_flag g_once;
void ensure_state() {
  std::call_once(g_once, [] {
    raise_fd_limit();
    g_state = fresh_state(nullptr, 1);
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
  });
}

void busy_wait(std::uint64_t ns) {
  auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (std::chrono::steady_clock::now() < until) {
  }
}

}  // namespace

std::mutex& lock() {
  ensure_state();
  return *g_lock;
}

State& state() {
  ensure_state();
  return *g_state;
}

const char* current_call() { return t_call; }

std::vector<Context*>& context_stack() {
  thread_local std::vector<Context*> stack;
  thread_local std::uint64_t stack_generation = 0;
  // A reset forgets every context, so a stack from before it is stale.
  if (stack_generation != state().generation) {
    stack.clear();
    stack_generation = state().generation;
  }
  return stack;
}

CUresult enter(const char* name) {
  t_call = name;
  std::uint64_t latency = 0;
  CUresult injected = CUDA_SUCCESS;
  {
    std::lock_guard<std::mutex> guard(lock());
    State& s = state();
    std::uint64_t n = ++s.call_counts[name];
    for (const Fault& f : s.config.faults) {
      if (f.function == name && (n == f.nth || (f.and_later && n > f.nth))) {
        injected = f.error;
        break;
      }
    }
    if (!s.config.latency_ns.empty()) {
      auto it = s.config.latency_ns.find(name);
      if (it != s.config.latency_ns.end()) latency = it->second;
    }
  }
  if (latency) busy_wait(latency);
  return injected;
}

CUresult require_init(const State& s) { return s.initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED; }

Context* get_current_context(const State& s) { return t_context_generation == s.generation ? t_context : nullptr; }

void set_current_context(Context* context) {
  t_context = context;
  t_context_generation = g_state ? g_state->generation : 0;
}

CUresult current_device(const State& s, int* device) {
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  Context* c = get_current_context(s);
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  // cuCtxDestroy leaves the context current to other threads, which then get this error (cuda.h).
  if (c->destroyed) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  *device = c->device;
  return CUDA_SUCCESS;
}

bool charge_device(State& s, int device, std::uint64_t bytes) {
  Device& d = s.devices[static_cast<std::size_t>(device)];
  if (bytes > s.config.device_memory || d.used > s.config.device_memory - bytes) return false;
  d.used += bytes;
  return true;
}

void uncharge_device(State& s, int device, std::uint64_t bytes) {
  Device& d = s.devices[static_cast<std::size_t>(device)];
  d.used = bytes > d.used ? 0 : d.used - bytes;
}

std::uint64_t round_up(std::uint64_t value, std::uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

Context* context_from_handle(State& s, CUcontext handle) {
  for (Device& d : s.devices)
    if (reinterpret_cast<CUcontext>(&d.primary) == handle) return &d.primary;
  for (const auto& c : s.created_contexts)
    if (reinterpret_cast<CUcontext>(c.get()) == handle) return c.get();
  return nullptr;
}

namespace {

bool valid_device(const State& s, CUdevice dev) { return dev >= 0 && dev < static_cast<int>(s.devices.size()); }

CUresult release_primary(CUdevice dev) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!valid_device(s, dev)) return CUDA_ERROR_INVALID_DEVICE;
  Context& c = s.devices[static_cast<std::size_t>(dev)].primary;
  if (c.retains == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (--c.retains == 0) {
    uncharge_device(s, dev, c.charged);
    c.charged = 0;
  }
  return CUDA_SUCCESS;
}

CUresult synchronize_context() {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  int device = 0;
  if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
  // Work runs at enqueue time, so there is nothing to wait for; what matters is that synchronising
  // while any capture is active is illegal and breaks the capture, as on a GPU.
  bool any_capture = false;
  for (Stream* st : s.streams)
    if (st->capture && !st->capture->invalidated) {
      st->capture->invalidated = true;
      any_capture = true;
    }
  return any_capture ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}
}  // namespace

}  // namespace simcuda

using namespace simcuda;

SIM_EXPORT CUresult cuInit(unsigned int flags) {
  SIM_ENTER("cuInit");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (!s.config_error.empty()) {
    static bool reported = false;
    if (!reported) std::fprintf(stderr, "%s\n", s.config_error.c_str());
    reported = true;
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (s.legacy_streams.empty()) {
    for (int d = 0; d < s.config.device_count; ++d) {
      auto legacy = std::make_unique<Stream>();
      legacy->legacy = true;
      legacy->device = d;
      s.legacy_streams.push_back(std::move(legacy));
    }
  }
  s.initialized = true;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDriverGetVersion(int* version) {
  SIM_ENTER("cuDriverGetVersion");
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> guard(lock());
  *version = state().config.driver_version;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetCount(int* count) {
  SIM_ENTER("cuDeviceGetCount");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  *count = static_cast<int>(s.devices.size());
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  SIM_ENTER("cuDeviceGet");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(s, ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  SIM_ENTER("cuDeviceGetName");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(s, dev)) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<std::size_t>(len), "%s", s.config.device_name.c_str());
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  SIM_ENTER("cuDeviceTotalMem_v2");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(s, dev)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = s.config.device_memory;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice dev) {
  SIM_ENTER("cuDeviceGetAttribute");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(s, dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (attribute <= 0 || attribute >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  const Config& c = s.config;
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *value = 9;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *value = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *value = 132;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *value = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
      *value = 32;
      break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
      *value = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
      *value = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
      *value = dev;
      break;
    // What cudaGetDeviceProperties and engines read, as an H100 SXM reports them.
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
      *value = 0x18 + dev;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
      *value = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
      *value = 64;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
      *value = 2147483647;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
      *value = 65535;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
      *value = 49152;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
      *value = 232448;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
      *value = 233472;
      break;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY:
      *value = 65536;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR:
      *value = 65536;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
      *value = 2048;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:
      *value = 32;
      break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
      *value = 1980000;
      break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
      *value = 2619000;
      break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
      *value = 5120;
      break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
      *value = 52428800;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE:
      *value = 32505856;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH:
      *value = 2147483647;
      break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT:
      *value = 512;
      break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT:
      *value = 32;
      break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
      *value = 3;
      break;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED:
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_TIMELINE_SEMAPHORE_INTEROP_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
      *value = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE:
      *value = CU_COMPUTEMODE_DEFAULT;
      break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
      *value = c.vmm ? 1 : 0;
      break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED:
      *value = c.vmm ? 1 : 0;
      break;
    case CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
      *value = c.vmm && c.host_vmm ? 1 : 0;
      break;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
      *value = c.vmm && c.host_numa_vmm ? 1 : 0;
      break;
    case CU_DEVICE_ATTRIBUTE_NUMA_CONFIG:
      *value = CU_DEVICE_NUMA_CONFIG_NONE;
      break;
    case CU_DEVICE_ATTRIBUTE_NUMA_ID:
      *value = -1;
      break;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID:
      *value = c.host_numa_vmm ? 0 : -1;
      break;
    default:
      *value = 0;
      break;
  }
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  SIM_ENTER("cuDevicePrimaryCtxRetain");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(s, dev)) return CUDA_ERROR_INVALID_DEVICE;
  Context& c = s.devices[static_cast<std::size_t>(dev)].primary;
  if (c.retains == 0) {
    if (!charge_device(s, dev, s.config.context_bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
    c.charged = s.config.context_bytes;
  }
  ++c.retains;
  *ctx = reinterpret_cast<CUcontext>(&c);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  SIM_ENTER("cuDevicePrimaryCtxRelease_v2");
  return release_primary(dev);
}

// The CUDA 7.0 ABI of the same call, which cuda.h's macro otherwise renames to _v2.
#undef cuDevicePrimaryCtxRelease
SIM_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  SIM_ENTER("cuDevicePrimaryCtxRelease");
  return release_primary(dev);
}

SIM_EXPORT CUresult cuCtxGetCurrent(CUcontext* ctx) {
  SIM_ENTER("cuCtxGetCurrent");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  *ctx = reinterpret_cast<CUcontext>(get_current_context(s));
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  SIM_ENTER("cuCtxSetCurrent");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!ctx) {
    set_current_context(nullptr);
    return CUDA_SUCCESS;
  }
  Context* c = context_from_handle(s, ctx);
  if (!c || c->retains == 0) return CUDA_ERROR_INVALID_CONTEXT;
  set_current_context(c);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetDevice(CUdevice* device) {
  SIM_ENTER("cuCtxGetDevice");
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> guard(lock());
  return current_device(state(), device);
}

SIM_EXPORT CUresult cuCtxGetDevice_v2(CUdevice* device, CUcontext ctx) {
  SIM_ENTER("cuCtxGetDevice_v2");
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (!ctx) return current_device(s, device);
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  Context* c = context_from_handle(s, ctx);
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  *device = c->device;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxSynchronize(void) {
  SIM_ENTER("cuCtxSynchronize");
  return synchronize_context();
}

SIM_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  SIM_ENTER("cuCtxSynchronize_v2");
  {
    // Work runs at enqueue time, so which context is synchronised changes nothing; an unknown one
    // is refused.
    std::lock_guard<std::mutex> guard(lock());
    State& s = state();
    if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
    if (ctx && !context_from_handle(s, ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  }
  return synchronize_context();
}

SIM_EXPORT CUresult cuGetErrorName(CUresult error, const char** name) {
  SIM_ENTER("cuGetErrorName");
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  *name = error_name(error);
  return *name ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuGetErrorString(CUresult error, const char** text) {
  SIM_ENTER("cuGetErrorString");
  if (!text) return CUDA_ERROR_INVALID_VALUE;
  *text = error_string(error);
  return *text ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// ---- test-only control API (simcuda.h) ----

SIM_EXPORT int simcuda_reset(const char* settings) {
  std::lock_guard<std::mutex> guard(lock());
  State& old = state();
  destroy_all_execution(old);
  destroy_all_memory(old);
  std::uint64_t generation = old.generation + 1;
  delete g_state;
  g_state = fresh_state(settings, generation);
  t_context = nullptr;
  if (!g_state->config_error.empty()) {
    std::fprintf(stderr, "%s\n", g_state->config_error.c_str());
    return -1;
  }
  return 0;
}

SIM_EXPORT unsigned long long simcuda_device_used_bytes(int device) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (device < 0 || device >= static_cast<int>(s.devices.size())) return 0;
  return s.devices[static_cast<std::size_t>(device)].used;
}

SIM_EXPORT unsigned long long simcuda_host_used_bytes(void) {
  std::lock_guard<std::mutex> guard(lock());
  return state().host_used;
}

SIM_EXPORT unsigned long long simcuda_live_handles(void) {
  std::lock_guard<std::mutex> guard(lock());
  return state().handles.size();
}

SIM_EXPORT unsigned long long simcuda_live_reservations(void) {
  std::lock_guard<std::mutex> guard(lock());
  return state().reservations.size();
}

SIM_EXPORT unsigned long long simcuda_live_mappings(void) {
  std::lock_guard<std::mutex> guard(lock());
  return state().mappings.size();
}

SIM_EXPORT unsigned long long simcuda_call_count(const char* name) {
  if (!name) return 0;
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  auto it = s.call_counts.find(name);
  return it == s.call_counts.end() ? 0 : it->second;
}

SIM_EXPORT size_t simcuda_proc_address_query_count(void) {
  std::lock_guard<std::mutex> guard(lock());
  return state().proc_queries.size();
}

SIM_EXPORT int simcuda_proc_address_query(size_t index, char* symbol, size_t symbol_len, int* cuda_version,
                                          unsigned long long* flags) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (index >= s.proc_queries.size()) return -1;
  const auto& q = s.proc_queries[index];
  if (symbol && symbol_len) std::snprintf(symbol, symbol_len, "%s", q.symbol.c_str());
  if (cuda_version) *cuda_version = q.version;
  if (flags) *flags = q.flags;
  return 0;
}

SIM_EXPORT const char* simcuda_settings_markdown(void) { return settings_markdown().c_str(); }
