// KVREMAP_MODE=defer: the KV arena wired to the hooks, phase inference, the commit trigger and the commit plan.
#include "interpose/kv_manager.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "interpose/driver_api.h"
#include "interpose/kv_arena.h"
#include "interpose/library.h"
#include "interpose/trace_writer.h"
#include "interpose/tracker.h"
#include "policy/commit_plan.h"
#include "policy/commit_trigger.h"

namespace kvremap::interpose {
namespace {

struct Candidate {
  CUdeviceptr base = 0;
  std::uint64_t requested = 0;
  bool kv = false;
  bool tagged = false;  // allocated under kvremap_tag_push("kv"): KV by the engine's own word
};

// kvremap_tag_push/pop: the calling thread's open tags, innermost last.
thread_local std::vector<std::string> t_tags;

bool tagged_kv() { return !t_tags.empty() && t_tags.back() == "kv"; }

struct KvState {
  std::mutex lock;
  int device = 0;
  std::unique_ptr<KvArena> arena;
  bool arena_failed = false;
  std::vector<Candidate> regions;
  bool deferred = false;   // the KV burst is over and its regions are on scratch
  bool committed = false;  // backed again for good
  std::uint64_t deferred_bytes = 0;
  policy::CommitTrigger trigger{policy::TriggerConfig{}};
};

KvState& K() {
  static KvState* state = [] {
    auto* s = new KvState;
    const policy::Options& o = options();
    policy::TriggerConfig t;
    t.mode = static_cast<policy::TriggerMode>(static_cast<int>(o.commit));
    t.quiet_ns = o.quiet_ms * 1'000'000ULL;
    s->trigger = policy::CommitTrigger(t);
    return s;
  }();
  return *state;
}

// Deferred and not committed: the launch hooks' one-load check.
std::atomic<bool> g_pending{false};

template <typename Fn>
Fn driver_fn(const char* name, int version) {
  ProcAddressFn resolve = real_proc_address();
  void* fn = nullptr;
  int status = 0;
  if (!resolve || resolve(name, &fn, version, 0, &status) != 0) return nullptr;
  return reinterpret_cast<Fn>(fn);
}

bool make_arena(KvState& k, int device) {
  if (k.arena) return true;
  if (k.arena_failed) return false;
  ArenaDriver d{};
  d.address_reserve = driver_fn<decltype(d.address_reserve)>("cuMemAddressReserve", 10020);
  d.address_free = driver_fn<decltype(d.address_free)>("cuMemAddressFree", 10020);
  d.create = driver_fn<decltype(d.create)>("cuMemCreate", 10020);
  d.release = driver_fn<decltype(d.release)>("cuMemRelease", 10020);
  d.map = driver_fn<decltype(d.map)>("cuMemMap", 10020);
  d.unmap = driver_fn<decltype(d.unmap)>("cuMemUnmap", 10020);
  d.set_access = driver_fn<decltype(d.set_access)>("cuMemSetAccess", 10020);
  d.memset_d8 = driver_fn<decltype(d.memset_d8)>("cuMemsetD8", 3020);
  auto granularity = driver_fn<CUresult (*)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags)>(
      "cuMemGetAllocationGranularity", 10020);
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  size_t granule = 0;
  if (!granularity || granularity(&granule, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS) granule = 0;
  const policy::Options& o = options();
  ArenaConfig c;
  c.granularity = granule;
  c.device = device;
  c.chunk_bytes = o.chunk_bytes;
  c.scratch_bytes = o.scratch_bytes;
  c.reserve_bytes = o.arena_bytes ? o.arena_bytes : 2 * real_device_total(device);
  CUresult error = CUDA_ERROR_INVALID_VALUE;
  if (d.address_reserve && d.address_free && d.create && d.release && d.map && d.unmap && d.set_access && d.memset_d8)
    k.arena = KvArena::create(d, c, &error);
  if (!k.arena) {
    k.arena_failed = true;
    log().error("KV arena unavailable (driver error {}): KV stays in ordinary allocations", static_cast<int>(error));
    return false;
  }
  k.device = device;
  return true;
}

bool synchronize() {
  auto sync = driver_fn<CUresult (*)()>("cuCtxSynchronize", 2000);
  return sync && sync() == CUDA_SUCCESS;
}

// The KV burst is over: its tensors go onto scratch; other arena placements stay backed.
void defer_locked(KvState& k) {
  const std::uint64_t tensor = kv_tensor_bytes(k.device);
  const bool any_tagged = std::any_of(k.regions.begin(), k.regions.end(), [](const Candidate& r) { return r.tagged; });
  if ((tensor == 0 && !any_tagged) || !k.arena) return;
  if (!synchronize()) {
    log().warn("KV deferral skipped: synchronising the device failed");
    return;
  }
  std::size_t kv_regions = 0;
  for (Candidate& r : k.regions) {
    // Tagged allocations are KV; untagged ones are when they match the recognised burst's size.
    r.kv = r.tagged || (tensor != 0 && r.requested == tensor);
    reclassify(r.base, r.kv);
    if (!r.kv) continue;
    ++kv_regions;
    if (CUresult e = k.arena->defer(r.base); e != CUDA_SUCCESS) {
      log().warn("KV region at {:#x} stays backed: deferral failed with driver error {}", r.base, static_cast<int>(e));
      r.kv = false;
      continue;
    }
    k.deferred_bytes += k.arena->region_bytes(r.base);
  }
  k.deferred = true;
  start_post_kv_peaks(k.device);
  k.trigger.arm(trace_now_ns());
  g_pending.store(k.deferred_bytes > 0);
  trace_kv_event("kv deferred",
                 fmt::format(R"({{"device":{},"regions":{},"tensor_bytes":{},"deferred_bytes":{},"scratch_bytes":{}}})",
                             k.device, kv_regions, tensor, k.deferred_bytes, options().scratch_bytes));
  log().info("KV burst over: {} tensors of {} bytes deferred onto scratch", kv_regions, tensor);
}

int host_vmm_supported(int device) {
  auto attribute = driver_fn<CUresult (*)(int*, CUdevice_attribute, CUdevice)>("cuDeviceGetAttribute", 2000);
  int value = 0;
  if (!attribute || attribute(&value, CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device) != 0)
    return 0;
  return value;
}

std::string read_cmdline() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::replace(raw.begin(), raw.end(), '\0', ' ');
  return raw;
}

[[noreturn]] void stop(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  finish("kv commit failed");
  std::_Exit(1);
}

// `trigger`: the decision point that committed, for the trace ("graph launch", "kvremap_commit", ...).
void commit_locked(KvState& k, const char* trigger) {
  if (!synchronize()) stop("kvremap: cannot commit the KV cache: synchronising the device failed");
  std::size_t free_bytes = 0, total = 0;
  if (!real_memory_info(&free_bytes, &total)) stop("kvremap: cannot commit the KV cache: cuMemGetInfo failed");
  const policy::Options& o = options();
  policy::CommitInputs in;
  in.kv_bytes = k.deferred_bytes;
  in.chunk_bytes = o.chunk_bytes;
  in.device_free_bytes = free_bytes;
  in.device_total_bytes = total;
  // Serving runs the same forward passes the profiling pass measured: their activations must still
  // fit after the commit, whatever the configured headroom says.
  in.headroom_bytes = std::max<std::uint64_t>(o.headroom_bytes, profiling_peak_bytes(k.device));
  in.host_vmm_supported = host_vmm_supported(k.device) != 0;
  in.deficit_mode = o.deficit == policy::DeficitWhen::fail ? policy::DeficitMode::fail : policy::DeficitMode::host;
  in.gpu_memory_utilization = policy::gpu_memory_utilization_from(read_cmdline());
  const policy::CommitPlan plan = policy::plan_commit(in);
  const char* verdict = plan.verdict == policy::CommitVerdict::all_device  ? "all_device"
                        : plan.verdict == policy::CommitVerdict::host_tail ? "host_tail"
                                                                           : "fail";
  trace_kv_event(
      "kv commit plan",
      fmt::format(R"({{"device":{},"kv_bytes":{},"device_free_bytes":{},"headroom_bytes":{},"chunk_bytes":{},)"
                  R"("verdict":"{}","device_chunks":{},"host_chunks":{},"margin_bytes":{},"deficit_bytes":{}}})",
                  k.device, in.kv_bytes, free_bytes, in.headroom_bytes, in.chunk_bytes, verdict, plan.device_chunks,
                  plan.host_chunks, plan.margin_bytes, plan.deficit_bytes));
  if (plan.verdict == policy::CommitVerdict::fail) stop(plan.message);
  // The device takes whole chunks in region order until the plan's share is used; the rest is host.
  std::uint64_t device_budget = plan.device_chunks * o.chunk_bytes;
  for (Candidate& r : k.regions) {
    if (!r.kv) continue;
    std::uint64_t on_device = 0;
    CUresult e = k.arena->commit(r.base, device_budget, &on_device);
    if (e != CUDA_SUCCESS && in.host_vmm_supported && device_budget > 0) {
      device_budget = 0;  // the device could not take it after all: host memory, still correct
      e = k.arena->commit(r.base, 0, &on_device);
    }
    if (e != CUDA_SUCCESS)
      stop(
          fmt::format("kvremap: committing the KV region at {:#x} failed with driver error {}; stopping rather than "
                      "serving from scratch memory",
                      r.base, static_cast<int>(e)));
    device_budget -= std::min(device_budget, on_device);
  }
  k.committed = true;
  k.trigger.committed();
  g_pending.store(false);
  trace_kv_event(
      "kv committed",
      fmt::format(
          R"({{"device":{},"trigger":"{}","kv_bytes":{},"host_chunks":{},"margin_bytes":{},"post_kv_peaks":{}}})",
          k.device, trigger, in.kv_bytes, k.arena->host_chunks(), plan.margin_bytes, post_kv_peaks_json(k.device)));
  if (k.arena->host_bytes() > 0) {
    // The plan counts nominal chunks; say what was actually placed.
    log().warn("{} (placed: {} chunks, {:.2f} GiB, on host memory)", plan.message, k.arena->host_chunks(),
               static_cast<double>(k.arena->host_bytes()) / static_cast<double>(1ULL << 30));
  } else {
    log().info("{}", plan.message);
  }
}

}  // namespace

bool kv_mode() { return options().mode == policy::Mode::defer; }

bool kv_allocate(std::uint64_t bytes, const char* api, void* return_address, CUdeviceptr* ptr, CUresult* result) {
  if (!kv_mode() || capture_open() || !tracking()) return false;
  const bool tagged = tagged_kv();
  if (!tagged && bytes < options().kv_min_bytes) return false;
  const int device = tracked_device_now();
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  if (k.deferred || k.committed || (!tagged && !kv_window(device)) || !make_arena(k, device)) return false;
  CUdeviceptr base = 0;
  const CUresult r = k.arena->allocate(bytes, &base);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    *result = r;  // what the plain allocation would have said too
    return true;
  }
  if (r != CUDA_SUCCESS) return false;  // e.g. the reservation is full: an ordinary allocation then
  k.regions.push_back(Candidate{base, bytes, tagged, tagged});
  on_alloc(base, bytes, AllocKind::kKvArena, api, return_address, device);
  *ptr = base;
  *result = CUDA_SUCCESS;
  return true;
}

bool kv_free(CUdeviceptr ptr, const char* api, CUresult* result) {
  if (!kv_mode()) return false;
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  if (!k.arena || !k.arena->contains(ptr)) return false;
  auto it = std::find_if(k.regions.begin(), k.regions.end(), [&](const Candidate& r) { return r.base == ptr; });
  if (it == k.regions.end()) {
    *result = CUDA_ERROR_INVALID_VALUE;
    return true;
  }
  if (it->kv && k.deferred && !k.committed) k.deferred_bytes -= k.arena->region_bytes(ptr);
  *result = k.arena->release(ptr);
  k.regions.erase(it);
  on_free(ptr, AllocKind::kKvArena, api);
  return true;
}

void kv_before(KvPoint point) {
  if (!kv_mode() || capture_open()) return;
  if (point == KvPoint::kKernelLaunch && !g_pending.load(std::memory_order_relaxed)) return;
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  if (k.committed) return;
  const std::uint64_t now = trace_now_ns();
  // A kernel launch does not end the burst: torch.zeros launches one per KV tensor inside it. A
  // tagged burst ends when its tag is closed.
  const bool tagged_burst =
      std::any_of(k.regions.begin(), k.regions.end(), [](const Candidate& r) { return r.tagged; });
  if (!k.deferred && point != KvPoint::kKernelLaunch && point != KvPoint::kGraphLaunch && !k.regions.empty() &&
      !tagged_kv() && (tagged_burst || kv_burst_recognised(k.device)))
    defer_locked(k);
  if (!k.deferred || k.deferred_bytes == 0) return;
  bool commit = false;
  const char* trigger = "";
  switch (point) {
    case KvPoint::kMemoryQuery:
      commit = k.trigger.on_memory_query(now);
      trigger = "memory query";
      break;
    case KvPoint::kGraphLaunch:
      commit = k.trigger.on_graph_launch(now);
      trigger = "graph launch";
      break;
    case KvPoint::kKernelLaunch:
      commit = k.trigger.on_kernel_launch(now);
      trigger = "kernel launch";
      break;
    case KvPoint::kAllocation:
    case KvPoint::kModuleLoad:
      k.trigger.start_up_activity(now);
      break;
    case KvPoint::kCaptureBegin:
      break;
  }
  if (commit) commit_locked(k, trigger);
}

void kv_capture_began() {
  if (!kv_mode()) return;
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  k.trigger.capture_began(trace_now_ns());
}

void kv_capture_ended() {
  if (!kv_mode()) return;
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  k.trigger.capture_ended(trace_now_ns());
}

std::size_t kv_reported_free(std::size_t driver_free) {
  if (!g_pending.load(std::memory_order_relaxed)) return driver_free;
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  if (!k.deferred || k.committed) return driver_free;
  // The scratch stands in for all of the deferred KV: what is free beyond it is what the engine
  // would see with the KV cache fully backed.
  const std::uint64_t hidden =
      k.deferred_bytes > options().scratch_bytes ? k.deferred_bytes - options().scratch_bytes : 0;
  return driver_free > hidden ? driver_free - hidden : 0;
}

}  // namespace kvremap::interpose

// Explicit tagging for engines and plugins (callable through ctypes): allocations made between
// kvremap_tag_push("kv") and the matching kvremap_tag_pop() are the KV cache.
extern "C" __attribute__((visibility("default"))) int kvremap_tag_push(const char* tag) {
  try {
    if (!tag) return -1;
    const std::string t = tag;
    if (t != "kv" && t != "none") return -1;  // "none": a nested region that is not KV
    kvremap::interpose::t_tags.push_back(t);
    return 0;
  } catch (...) {
    return -1;
  }
}

extern "C" __attribute__((visibility("default"))) int kvremap_tag_pop(void) {
  if (kvremap::interpose::t_tags.empty()) return -1;
  kvremap::interpose::t_tags.pop_back();
  return 0;
}

extern "C" __attribute__((visibility("default"))) int kvremap_commit(void) {
  using namespace kvremap::interpose;
  try {
    if (!kv_mode() || capture_open()) return -1;
    KvState& k = K();
    std::lock_guard<std::mutex> g(k.lock);
    if (!k.deferred || k.committed || !k.trigger.on_manual_commit()) return -1;
    commit_locked(k, "kvremap_commit");
    return 0;
  } catch (...) {
    return -1;
  }
}
