// Internal state of the simulated CUDA driver: devices, memory objects, streams, captures, graphs, modules.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "sim_config.h"

namespace simcuda {

struct Function;

// One recorded unit of stream work: what a graph node replays.
struct Work {
  enum class Kind { kKernel, kMemset, kMemcpy } kind = Kind::kKernel;
  Function* function = nullptr;
  std::vector<std::vector<unsigned char>> args;  // kernel arguments by value, as the PTX declares them
  std::uint64_t dst = 0;
  std::uint64_t src = 0;
  std::uint64_t bytes = 0;
  unsigned char value = 0;
  unsigned element = 1;       // memset element size: 1 (D8), 2 (D16) or 4 (D32)
  std::uint32_t pattern = 0;  // the D16/D32 value
};

// A device's primary context, or one cuCtxCreate made. A created context is alive (retains 1) until
// cuCtxDestroy; the object itself stays until a reset, since other threads may still have it current
// and must then get CUDA_ERROR_CONTEXT_IS_DESTROYED rather than a dangling pointer.
struct Context {
  int device = 0;
  bool primary = true;
  bool destroyed = false;  // cuCtxDestroy'ed (created contexts only)
  int retains = 0;
  std::uint64_t charged = 0;      // SIMCUDA_CONTEXT_BYTES while retained
  unsigned flags = 0;             // cuDevicePrimaryCtxSetFlags (scheduling, LMEM_RESIZE_TO_MAX, ...)
  std::unordered_set<int> peers;  // devices cuCtxEnablePeerAccess enabled
};

// A stream-ordered memory pool (cuMemPoolCreate, or a device's default pool). Work completes at enqueue
// time, so a freed block is idle at once: kept charged while the idle bytes fit under the release
// threshold, returned to the device otherwise.
struct Pool {
  int device = 0;
  bool is_default = false;
  bool destroyed = false;      // cuMemPoolDestroy with allocations outstanding: goes with the last one
  std::uint64_t max_size = 0;  // 0: no limit but the device's
  std::uint64_t used = 0;      // bytes of live allocations (granularity-rounded)
  std::uint64_t idle = 0;      // freed bytes still charged to the device
  std::uint64_t used_high = 0;
  std::uint64_t reserved_high = 0;
  std::uint64_t release_threshold = 0;
  int reuse_follow_event_dependencies = 1;
  int reuse_allow_opportunistic = 1;
  int reuse_allow_internal_dependencies = 1;
};

// Memory from cuMemAlloc/cuMemAllocPitch/cuMemAllocAsync: an anonymous private mapping.
struct Allocation {
  std::uint64_t va = 0;
  std::uint64_t size = 0;    // what the caller asked for
  std::uint64_t mapped = 0;  // what was mmap'ed and charged (rounded to the granularity)
  int device = 0;
  bool stream_ordered = false;  // cuMemAllocAsync: pool memory, not legacy-IPC capable
  Pool* pool = nullptr;         // the pool a stream-ordered allocation came from
  bool backed = true;           // false: an address of the unbacked range (SIMCUDA_HOST_BACKING=0)
  std::uint64_t buffer_id = 0;
  int ipc_fd = -1;          // exported with cuIpcGetMemHandle: now a MAP_SHARED memfd another process can map
  bool ipc_opened = false;  // cuIpcOpenMemHandle's mapping of another process's memory (never charged here)
  int ipc_opens = 0;        // how many cuIpcOpenMemHandle calls hold it
  std::uint64_t ipc_key_pid = 0;
  std::uint64_t ipc_key_buffer = 0;
  bool managed = false;        // cuMemAllocManaged: host-resident until touched, so charged to no device
  Context* context = nullptr;  // the context current at allocation; cuCtxDestroy frees its memory
};

// Page-locked host memory: cuMemHostAlloc/cuMemAllocHost (owned) or cuMemHostRegister (the caller's).
struct HostBlock {
  std::uint64_t va = 0;
  std::uint64_t size = 0;
  unsigned flags = 0;
  bool registered = false;
  std::uint64_t buffer_id = 0;
  Context* context = nullptr;  // the allocating context (cuMemHostAlloc); cuCtxDestroy frees its blocks
};

// An event: work runs at enqueue time, so a recorded event is complete when the record returns.
struct Event {
  unsigned flags = 0;
  bool recorded = false;
  std::uint64_t time_ns = 0;  // steady clock at the record
};

// SIMCUDA_HOST_BACKING=0: one PROT_NONE reservation that allocations take addresses from, freed
// addresses kept per size for reuse, so an allocation and a free make no system call.
struct UnbackedRange {
  std::uint64_t base = 0;
  std::uint64_t size = 0;
  std::uint64_t next = 0;                                               // offset of the never-used rest
  std::unordered_map<std::uint64_t, std::vector<std::uint64_t>> freed;  // mapped size -> addresses
};

// A VMM physical handle from cuMemCreate: a sparse memfd, so one handle can be mapped at many addresses.
struct PhysicalHandle {
  int fd = -1;
  std::uint64_t size = 0;
  CUmemLocationType location = CU_MEM_LOCATION_TYPE_DEVICE;
  int location_id = 0;  // prop.location.id as created (cuMemGetAllocationPropertiesFromHandle reports it)
  int device = 0;       // whose capacity a device handle is charged to
  int mappings = 0;
  int retains = 0;        // cuMemRetainAllocationHandle references not yet released
  bool released = false;  // the creator's reference released; freed once no mapping or retain is left
  bool posix_fd = false;  // created with requestedHandleTypes POSIX_FILE_DESCRIPTOR: exportable as an fd
  bool rdma = false;      // created with allocFlags.gpuDirectRDMACapable
  bool imported = false;  // cuMemImportFromShareableHandle: the exporting process holds (and is charged) it
};

struct Reservation {
  std::uint64_t va = 0;
  std::uint64_t size = 0;
};

struct Mapping {
  std::uint64_t va = 0;
  std::uint64_t size = 0;
  CUmemGenericAllocationHandle handle = 0;
  CUmemAccess_flags access = CU_MEM_ACCESS_FLAGS_PROT_NONE;  // the most permissive device grant: the protection
  std::uint64_t buffer_id = 0;
  // What cuMemSetAccess granted each location, keyed by (CUmemLocationType, id): cuMemGetAccess answers
  // per location, while the host protection above can only follow the most permissive device.
  std::map<std::pair<int, int>, CUmemAccess_flags> granted;
};

struct Graph {
  std::deque<Work> nodes;  // a deque: cuGraphGetNodes hands out &nodes[i], which a capture's appends must not move
};

struct GraphExec {
  std::vector<Work> nodes;
  int device = 0;
  std::uint64_t charged = 0;
};

struct Stream;

struct Capture {
  std::uint64_t id = 0;
  Stream* stream = nullptr;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  std::thread::id thread;
  Graph* graph = nullptr;
  bool invalidated = false;
};

struct Stream {
  unsigned flags = 0;       // CU_STREAM_DEFAULT or CU_STREAM_NON_BLOCKING
  int priority = 0;         // cuStreamCreateWithPriority, clamped to [kGreatestStreamPriority, 0]
  bool legacy = false;      // the legacy NULL stream
  bool per_thread = false;  // a thread's per-thread default stream
  int device = 0;
  Context* context = nullptr;  // the context current at cuStreamCreate (cuStreamGetCtx); null for the special streams
  std::unique_ptr<Capture> capture;
};

struct Module {
  std::vector<std::unique_ptr<Function>> functions;
  int device = 0;
  std::uint64_t charged = 0;
  bool library = false;
};

struct Function {
  std::string name;
  std::vector<std::size_t> param_sizes;
  std::vector<std::size_t> param_offsets;  // each parameter's place in the device-side layout (cuFuncGetParamInfo)
  void (*host)(void**) = nullptr;          // simcuda_kernel_<name>, resolved at first lookup
  Module* module = nullptr;
};

struct Device {
  std::uint64_t used = 0;
  Context primary;
  Pool* default_pool = nullptr;  // created at first use
  Pool* current_pool = nullptr;  // cuDeviceSetMemPool; the default pool when null
};

// Everything the driver knows; one instance per process (a forked child starts a fresh one).
struct State {
  Config config;
  std::string config_error;  // non-empty: cuInit fails and names it
  bool initialized = false;
  bool serving = false;          // simcuda_mark_serving called: the serving oracle checks every executed work
  std::uint64_t generation = 0;  // bumped by every reset, so stale thread-local pointers are ignored
  // In a forked child: the parent's state, forgotten but never freed (its mappings are the parent's, and a
  // destructor could run under a lock some parent thread held at the fork); held here so that it stays
  // reachable, as a real driver's state does, and a leak checker at the child's exit reports nothing.
  const State* forgotten_at_fork = nullptr;

  std::vector<Device> devices;
  std::vector<std::unique_ptr<Context>> created_contexts;  // cuCtxCreate's, destroyed ones included
  std::uint64_t host_used = 0;

  std::map<std::uint64_t, Allocation> allocations;  // keyed by va
  UnbackedRange unbacked;
  std::map<std::uint64_t, Reservation> reservations;
  std::map<std::uint64_t, Mapping> mappings;
  std::unordered_map<CUmemGenericAllocationHandle, PhysicalHandle> handles;
  CUmemGenericAllocationHandle next_handle = 0x51c0da0000ULL;
  std::uint64_t next_buffer_id = 1;

  std::vector<std::unique_ptr<Stream>> legacy_streams;  // one per device
  std::unordered_set<Stream*> streams;                  // created with cuStreamCreate (and per-thread ones)
  std::vector<std::unique_ptr<Stream>> owned_streams;
  std::uint64_t next_capture_id = 1;

  std::map<std::uint64_t, HostBlock> host_blocks;  // keyed by va
  std::unordered_set<Event*> events;
  std::unordered_map<Pool*, std::unique_ptr<Pool>> pools;

  std::unordered_set<Graph*> graphs;
  std::unordered_set<GraphExec*> execs;
  std::unordered_set<Module*> modules;
  std::unordered_set<Function*> functions;

  std::unordered_map<std::string, std::uint64_t> call_counts;
  struct ProcQuery {
    std::string symbol;
    int version;
    std::uint64_t flags;
  };
  std::vector<ProcQuery> proc_queries;
};

// The process-wide lock and state. The lock is never held while a kernel's host function runs.
std::mutex& lock();
State& state();

// Called at the top of every exported driver function: counts the call, applies SIMCUDA_LATENCY_US
// and SIMCUDA_FAIL. Returns the injected error, or CUDA_SUCCESS.
CUresult enter(const char* name);

// The counted name of the driver export the calling thread entered last (what enter() was given).
const char* current_call();

// CUDA_ERROR_NOT_INITIALIZED before cuInit, else CUDA_SUCCESS. Requires the lock.
CUresult require_init(const State& s);
// The calling thread's current context's device, or CUDA_ERROR_INVALID_CONTEXT. Requires the lock.
CUresult current_device(const State& s, int* device);
// Sets the calling thread's current context (nullptr clears it).
void set_current_context(Context* context);
Context* get_current_context(const State& s);
// A primary or created context by handle (destroyed ones included), or nullptr. Requires the lock.
Context* context_from_handle(State& s, CUcontext handle);

// Charges/uncharges `bytes` against a device's capacity. False if it does not fit.
bool charge_device(State& s, int device, std::uint64_t bytes);
void uncharge_device(State& s, int device, std::uint64_t bytes);

std::uint64_t round_up(std::uint64_t value, std::uint64_t multiple);

// Stream priorities as an H100 reports them (cuCtxGetStreamPriorityRange): lower is more urgent.
constexpr int kGreatestStreamPriority = -5;

// --- memory (sim_memory.cpp) ---
// True when [ptr, ptr+bytes) starts inside device memory the simulator knows about.
bool is_device_pointer(const State& s, std::uint64_t ptr);
// Executes stream work outside the lock: memset (zero ranges are hole-punched), memcpy, kernels.
void run_work(const Work& work);
// Releases everything a reset or a fork child forgets.
void destroy_all_memory(State& s);
// Submits a copy or a memset (element size 1, 2 or 4) to a stream, with the same checks as cuMemcpy/cuMemsetD8.
// `device_sides`: bit 0 the destination, bit 1 the source must be device memory; otherwise any memory.
CUresult copy_work(CUdeviceptr dst, CUdeviceptr src, std::uint64_t bytes, unsigned device_sides, CUstream stream,
                   bool per_thread, bool synchronous);
CUresult fill_work(CUdeviceptr dst, std::uint32_t value, unsigned element, std::uint64_t count, CUstream stream,
                   bool per_thread, bool synchronous);
// Frees the cuMemAlloc/cuMemAllocAsync memory of one device that no created context owns (a primary
// context reset). Requires the lock.
void release_device_allocations(State& s, int device);
// Frees what cuCtxDestroy frees: the context's cuMemAlloc, cuMemAllocManaged and cuMemHostAlloc memory
// (not stream-ordered pool memory, which outlives it). Requires the lock.
void release_context_memory(State& s, const Context* context);
// A device's default pool, created at first use. Requires the lock.
Pool* default_pool(State& s, int device);
// The pool cuMemAllocAsync uses on `device`: cuDeviceSetMemPool's, or the default one. Requires the lock.
Pool* current_pool(State& s, int device);
// cuMemAllocFromPoolAsync: a stream-ordered allocation from `pool` (nullptr: the current device's pool).
CUresult allocate_from_pool(CUdeviceptr* out, std::uint64_t bytes, Pool* pool);
// Page-locked host memory containing `ptr`, or nullptr. Requires the lock.
const HostBlock* find_host_block(const State& s, std::uint64_t ptr);
// The calling thread's context stack (cuCtxPushCurrent/cuCtxPopCurrent), below the current context.
std::vector<Context*>& context_stack();

// The key Mapping::granted uses for a location: the id counts only where it names something (a device,
// a NUMA node); HOST and HOST_NUMA_CURRENT ignore it, as cuda.h says.
inline std::pair<int, int> access_key(const CUmemLocation& location) {
  const bool has_id = location.type == CU_MEM_LOCATION_TYPE_DEVICE || location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA;
  return {static_cast<int>(location.type), has_id ? location.id : 0};
}

// --- serving oracle (sim_oracle.cpp) ---
// Once serving is marked: if `work`, about to run, touches a physical handle mapped at more than one
// address, prints one line naming `call` and exits the process with kServingOracleExit. Requires the lock.
constexpr int kServingOracleExit = 86;
void check_serving(const State& s, const Work& work, const char* call);

// --- execution (sim_exec.cpp) ---
// Per-thread mode set by cuThreadExchangeStreamCaptureMode.
CUstreamCaptureMode thread_capture_mode();
// For "potentially unsafe" calls (cuMemAlloc, cuMemFree, synchronous copies, ...): fails with
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the captures the CUDA rules say it breaks.
CUresult check_unsafe_during_capture(State& s);
// Routes one unit of work to a stream. Recorded when the stream is capturing (run_now stays false);
// otherwise run_now is set and the caller runs the work with run_work() after dropping the lock.
// `per_thread_api`: the _ptsz/_ptds export was called, so a NULL stream means the per-thread stream.
// `synchronous`: a blocking call (cuMemcpyHtoD, cuMemsetD8, ...), which a capturing stream rejects.
CUresult submit_work(State& s, CUstream stream, bool per_thread_api, bool synchronous, Work& work, bool& run_now);
// Resolves a stream handle for the calling thread, or nullptr if it is not a valid stream.
Stream* resolve_stream(State& s, CUstream stream, bool per_thread_api);
void destroy_all_execution(State& s);

}  // namespace simcuda

// Every export: count, inject faults, never let an exception cross the C boundary.
#define SIM_ENTER(name)                                      \
  do {                                                       \
    CUresult sim_injected_ = ::simcuda::enter(name);         \
    if (sim_injected_ != CUDA_SUCCESS) return sim_injected_; \
  } while (0)

#define SIM_EXPORT extern "C" __attribute__((visibility("default")))

#define SIM_GUARDED_BEGIN try {
#define SIM_GUARDED_END        \
  }                            \
  catch (...) {                \
    return CUDA_ERROR_UNKNOWN; \
  }
