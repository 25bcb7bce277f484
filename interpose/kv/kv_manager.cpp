// KVREMAP_MODE=defer wired to the hooks: placement in the arena, the end of the KV burst and the deferral, the commit
// trigger, tagging.
#include "interpose/kv/kv_manager.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstddef>
#include <cstring>
#include <string_view>

#include "interpose/base/device_index.h"
#include "interpose/base/serving_flag.h"
#include "interpose/base/library.h"
#include "interpose/driver/driver_api.h"
#include "interpose/kv/kv_arena.h"
#include "interpose/kv/kv_observe_only.h"
#include "interpose/kv/kv_stand_aside.h"
#include "interpose/kv/kv_state.h"
#include "interpose/kv/kv_tags.h"
#include "interpose/trace/kv_events.h"
#include "interpose/track/tracker.h"
#include "policy/commit_trigger.h"
#include "policy/kernel_arguments.h"
#include "policy/printable.h"
#include "policy/kv_recognition.h"
#include "policy/units.h"
#include "policy/vllm_model.h"

namespace kvremap::interpose {
using namespace kv_internal;
namespace {

using policy::KvTag;

// The KV burst is over: its tensors go onto scratch; other arena placements stay backed.
void defer_locked(DeviceKv& d) {
  if (!d.arena) return;
  const std::uint64_t tensor = policy::kv_tensor_size(kv_tensor_bytes(d.device), options().kv_tensor_bytes);
  if (!real_synchronize()) {
    log().warn("device {}: KV deferral skipped: synchronising the device failed", d.device);
    return;
  }
  std::size_t kv_regions = 0, written = 0;
  const Placement* first_written = nullptr;
  for (Placement& r : d.regions) {
    r.kv = policy::is_kv(policy::ArenaPlacement{r.requested, r.tagged}, tensor);
    reclassify(r.tracked_key(), r.kv);
    r.kv_category = r.kv;
    if (!r.kv) continue;
    if (r.written_by != nullptr) {
      // KV, kept backed: what the engine wrote there stays; the commit leaves it alone.
      r.kv = false;
      if (written++ == 0) first_written = &r;
      continue;
    }
    ++kv_regions;
    if (CUresult e = d.arena->defer(r.base); e != CUDA_SUCCESS) {
      log().warn("KV region at {:#x} stays backed: deferral failed with driver error {}", r.base, static_cast<int>(e));
      r.kv = false;
      continue;
    }
    d.deferred_bytes += d.arena->region_bytes(r.base);
  }
  d.deferred = true;
  start_post_kv_peaks(d.device, true);
  d.stream_epoch = begin_stream_epoch();
  d.trigger.arm();
  const KvState& k = K();
  kv_event([&] {
    trace_events::kv_deferred({.device = d.device,
                               .regions = kv_regions,
                               .tensor_bytes = tensor,
                               .deferred_bytes = d.deferred_bytes,
                               .scratch_bytes = options().scratch_bytes,
                               .engine = k.engine.kind,
                               .graphs_expected = k.engine.graphs_expected,
                               .commit_mode = k.trigger_config.mode});
  });
  log().info("device {}: KV burst over: {} tensors of {} bytes deferred onto scratch", d.device, kv_regions, tensor);
  if (written > 0)
    log().warn(
        "device {}: {} KV tensors stay backed, not deferred: the engine reached them before the deferral "
        "(first {} of {:#x}), and a deferred tensor keeps only zero fills",
        d.device, written, first_written->written_by, first_written->base);
  if (k.trigger_config.mode == policy::TriggerMode::automatic && !k.engine.graphs_expected)
    log().info("device {}: no CUDA-graph capture expected ({}): the KV cache is committed before the first launch",
               d.device, k.engine.eager_reason);
}

// A KV connector on the engine's command line keeps KV out of the arena, unless the user says which
// allocations are KV: KVREMAP_KV_TENSOR_BYTES, or a `kv` tag (checked where it applies, in allocate).
bool keeps_kv_for_connector(const KvState& k) {
  return !k.engine.kv_connector.empty() && options().kv_tensor_bytes == 0;
}

// The cause where the process used CUDA but never asked for its free memory: the engine sizes its KV
// cache from such a query (kv-deferral.md, "1. Placement"), so this process sized none (an engine's helper
// process that only touches CUDA), and nothing was to be deferred in it.
constexpr std::string_view kNoMemoryQuery =
    "this process made no memory query (cudaMemGetInfo, cuMemGetInfo), the query an engine sizes its KV cache "
    "from: it sized no KV cache, so there was nothing to defer";

// Why defer mode ended start-up with nothing deferred, for the one warning that says so.
std::string nothing_deferred_reason(const KvState& k) {
  if (std::string observe_only = kv_observe_only_reason(); !observe_only.empty()) return observe_only;
  if (const std::string other = kv_stood_aside_for(); !other.empty())
    return fmt::format(
        "kvremap stood aside for {}, an interposer of the allocation function loaded after it (see the warning above)",
        other);
  if (keeps_kv_for_connector(k) &&
      std::none_of(k.devices.begin(), k.devices.end(), [](const auto& d) { return d && !d->regions.empty(); }))
    return fmt::format(
        "the engine's command line hands its KV cache to a KV connector ({}), which registers it right after "
        "allocating it (by CUDA IPC, which VMM memory refuses, or for RDMA): it stays out of the arena; tag it "
        "with kvremap_tag_push(\"kv\") or name its tensor size with KVREMAP_KV_TENSOR_BYTES to defer it anyway",
        k.engine.kv_connector);
  for (const auto& d : k.devices)
    if (d && d->arena_failed) return fmt::format("the KV arena of device {} could not be reserved", d->device);
  for (const auto& d : k.devices)
    if (d && d->regions.empty() && d->placements_refused > 0)
      return fmt::format(
          "the KV arena of device {} could not place any of its {} KV candidates (see the warning "
          "above): they are ordinary allocations",
          d->device, d->placements_refused);
  for (const auto& d : k.devices)
    if (d && !d->regions.empty())
      return fmt::format(
          "device {} placed {} allocations in the arena but no KV burst was recognised (a KV cache in one "
          "allocation is one only from a quarter of the free memory the sizing query returned: tag it with "
          "kvremap_tag_push(\"kv\") or name its tensor size with KVREMAP_KV_TENSOR_BYTES)",
          d->device, d->regions.size());
  if (std::optional<std::string> given = policy::vllm_nothing_deferred_reason(k.engine)) return *given;
  if (memory_queries_made() == 0) return std::string(kNoMemoryQuery);
  return fmt::format(
      "no allocation of at least KVREMAP_KV_MIN_BYTES={} was made after the engine's sizing memory "
      "query",
      policy::format_bytes(options().kv_min_bytes));
}

bool anything_deferred(const KvState& k) {
  return std::any_of(k.devices.begin(), k.devices.end(), [](const auto& d) { return d && d->deferred; });
}

void warn_if_nothing_deferred(KvState& k) {
  if (k.warned_nothing_deferred || anything_deferred(k)) return;
  k.warned_nothing_deferred = true;
  const std::string why = nothing_deferred_reason(k);
  // A warning where KV was to be expected: a recognised engine, or the arena in use. Any other
  // program (defer is the default mode) gets it at info level, as does a process kvremap stood aside in
  // or only observes (its own line said why already).
  const bool stepped_back = !kv_stood_aside_for().empty() || !kv_observe_only_reason().empty();
  const bool expected =
      !stepped_back && why != kNoMemoryQuery && ((k.engine.kind != policy::EngineKind::other && !keeps_kv_for_connector(k)) ||
                        std::any_of(k.devices.begin(), k.devices.end(), [](const auto& d) {
                          return d && (d->arena || d->arena_failed || d->placements_refused > 0);
                        }));
  if (expected) {
    log().warn("KVREMAP_MODE=defer deferred nothing: {}", why);
  } else {
    log().info("KVREMAP_MODE=defer deferred nothing: {}", why);
  }
  kv_event([&] { trace_events::kv_nothing_deferred(why); });
}

// Whether placement `r` of `arena` shares a byte with [address, address + bytes) (at least one byte).
bool overlaps(const KvArena& arena, const Placement& r, std::uint64_t address, std::uint64_t bytes) {
  return address < r.base + arena.region_bytes(r.base) && r.base < address + std::max<std::uint64_t>(bytes, 1);
}

DeviceKv* device_holding(KvState& k, std::uint64_t address, std::uint64_t bytes) {
  for (auto& slot : k.devices) {
    if (!slot || !slot->arena || !slot->deferred || slot->committed) continue;
    for (const Placement& r : slot->regions)
      if (r.kv && overlaps(*slot->arena, r, address, bytes)) return slot.get();
  }
  return nullptr;
}

// The address ranges `d`'s placements lie in: the arena's reserved range, and each region the engine
// mapped itself (adopted, outside that range).
template <typename Visit>
void for_each_kv_range(const DeviceKv& d, Visit&& visit) {
  visit(d.arena->base(), d.arena->base() + d.arena->reserved_bytes());
  for (const Placement& r : d.regions)
    if (r.handle != 0) visit(r.base, r.base + d.arena->region_bytes(r.base));
}

// The devices still in their KV burst: arena regions placed, none deferred or committed yet.
template <typename Visit>
void for_each_device_in_burst(KvState& k, Visit&& visit) {
  for (auto& slot : k.devices)
    if (slot && slot->arena && !slot->deferred && !slot->committed) visit(*slot);
}

// A write (or any access but a zero fill) into KV tensors whose device is still in its KV burst:
// they are kept backed at the deferral (defer_locked).
void note_burst_write(KvState& k, std::uint64_t address, std::uint64_t bytes, const char* api) {
  for_each_device_in_burst(k, [&](DeviceKv& d) {
    for (Placement& r : d.regions)
      if (r.written_by == nullptr && overlaps(*d.arena, r, address, bytes)) r.written_by = api;
  });
}

// A launch in a device's KV burst whose parameters carry an address of a KV candidate still backed:
// unless it is PyTorch's zero fill, the tensor stays backed at the deferral (note_burst_write). A launch
// the driver cannot describe reaches every candidate.
void note_burst_launch(KvState& k, const KernelLaunch& launch) {
  const LaunchParameters read = read_launch_parameters(launch);
  if (!read.known) {
    for_each_device_in_burst(k, [](DeviceKv& d) {
      for (Placement& r : d.regions)
        if (r.written_by == nullptr) r.written_by = "a kernel launch kvremap cannot read";
    });
    return;
  }
  // The addresses that reach a candidate not yet marked; the kernel's name is asked only when there are some.
  std::vector<std::uint64_t> reached;
  for_each_device_in_burst(k, [&](DeviceKv& d) {
    const KvArena& arena = *d.arena;
    for_each_kv_range(d, [&](std::uint64_t low, std::uint64_t high) {
      policy::for_each_address_in(read.parameters, low, high, [&](std::uint64_t address) {
        for (const Placement& r : d.regions)
          if (r.written_by == nullptr && overlaps(arena, r, address, 1)) reached.push_back(address);
      });
    });
  });
  if (reached.empty() || policy::is_zero_fill_kernel(real_function_name(launch.function), read.parameters)) return;
  for (const std::uint64_t address : reached)
    note_burst_write(k, address, 1, "a kernel launch (not PyTorch's zero fill)");
}

// Whether a launch after the deferral reaches a deferred KV tensor of `d`, by the addresses its
// parameters carry.
policy::KvReach deferred_reach(const DeviceKv& d, const KernelLaunch& launch) {
  const LaunchParameters read = read_launch_parameters(launch);
  if (!read.known) return policy::KvReach::unknown;
  bool reached = false;
  const KvArena& arena = *d.arena;
  for_each_kv_range(d, [&](std::uint64_t low, std::uint64_t high) {
    policy::for_each_address_in(read.parameters, low, high, [&](std::uint64_t address) {
      for (const Placement& r : d.regions)
        if (r.kv && overlaps(arena, r, address, 1)) reached = true;
    });
  });
  return reached ? policy::KvReach::kv : policy::KvReach::none;
}

}  // namespace

namespace kv_internal {

// Every deferred KV tensor was freed before the commit: that was a profiling KV cache (vLLM V1 allocates
// one for its graph-memory profiling and frees it before the real one, gpu_model_runner.py:6633-6739).
// The device waits for its KV burst again, as before the first; the KV window opens again.
void rearm(KvState& k, DeviceKv& d) {
  d.deferred = false;
  d.deferred_bytes = 0;
  d.trigger = policy::CommitTrigger(k.trigger_config);
  log().info(
      "device {}: every deferred KV tensor was freed before its commit (a profiling KV cache): the KV "
      "burst is looked for again",
      d.device);
  rearm_kv_recognition(d.device);
}

bool wants_placement(KvState& k, DeviceKv& d, std::uint64_t bytes, KvTag tag, bool with_arena) {
  const policy::Options& o = options();
  if (tag != KvTag::kv && keeps_kv_for_connector(k)) return false;
  policy::PlacementQuery q;
  q.bytes = bytes;
  q.tag = tag;
  q.kv_window = kv_window(d.device);
  q.burst_over = d.deferred || d.committed;
  q.min_bytes = o.kv_min_bytes;
  q.tensor_override = o.kv_tensor_bytes;
  q.recognised_bytes = kv_tensor_bytes(d.device);
  return policy::place_in_arena(q) && (!with_arena || make_arena(d));
}

}  // namespace kv_internal

namespace kv_detail {

bool allocate(std::uint64_t bytes, const char* api, void* return_address, CUdeviceptr* ptr, CUresult* result) {
  if (!tracking()) return false;
  const policy::Options& o = options();
  const KvTag tag = current_tag();
  if (!policy::may_place_in_arena(bytes, tag, o.kv_min_bytes, o.kv_tensor_bytes) || capture_open()) return false;
  // Another interposer behind kvremap must see its KV allocations itself (it may release them later).
  if (kv_stands_aside(api)) return false;
  const int device = tracked_device_now();
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  DeviceKv& d = k.at(device);
  if (!wants_placement(k, d, bytes, tag)) return false;
  CUdeviceptr base = 0;
  const CUresult r = d.arena->allocate(bytes, &base);
  if (r != CUDA_SUCCESS) {
    // Whatever the arena could not do, the device may still hold the allocation: an ordinary one
    // then, never an out-of-memory error the engine would not have had.
    const bool address_space = d.arena->has_address_space(bytes);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && address_space) {
      std::size_t free_bytes = 0, total = 0;
      if (!real_memory_info(&free_bytes, &total) || free_bytes < bytes) {
        *result = r;  // what the plain allocation would have said too
        return true;
      }
    }
    if (++d.placements_refused == 1)
      log().warn("device {}: the KV arena cannot place a {} allocation ({}): it stays an ordinary allocation{}", device,
                 policy::format_bytes(bytes),
                 address_space
                     ? fmt::format("driver error {}, {}", static_cast<int>(r), real_error_name(r))
                     : fmt::format("its {} of address space is full", policy::format_bytes(d.arena->reserved_bytes())),
                 address_space ? "" : " (raise KVREMAP_ARENA_BYTES)");
    return false;
  }
  d.regions.push_back(Placement{base, bytes, tag == KvTag::kv, tag == KvTag::kv});
  refresh_counts(k);
  on_alloc(base, bytes, AllocKind::kKvArena, api, return_address, device);
  *ptr = base;
  *result = CUDA_SUCCESS;
  return true;
}

bool region_of(std::uint64_t address, std::uint64_t* base, std::uint64_t* size) {
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  for (const auto& slot : k.devices) {
    if (!slot || !slot->arena || !slot->arena->holds(address)) continue;
    for (const Placement& r : slot->regions) {
      if (address < r.base || address >= r.base + r.requested) continue;
      *base = r.base;
      *size = r.requested;
      return true;
    }
  }
  return false;
}

bool release(CUdeviceptr ptr, const char* api, CUresult* result) {
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  for (auto& slot : k.devices) {
    if (!slot || !slot->arena || !slot->arena->contains(ptr)) continue;
    DeviceKv& d = *slot;
    auto it = std::find_if(d.regions.begin(), d.regions.end(), [&](const Placement& r) { return r.base == ptr; });
    if (it == d.regions.end()) {
      *result = CUDA_ERROR_INVALID_VALUE;
      return true;
    }
    if (it->kv && d.deferred && !d.committed) d.deferred_bytes -= d.arena->region_bytes(ptr);
    *result = d.arena->release(ptr);
    d.regions.erase(it);
    on_free(ptr, AllocKind::kKvArena, api);
    if (d.deferred && !d.committed && d.trigger.open_captures() == 0 &&
        std::none_of(d.regions.begin(), d.regions.end(), [](const Placement& r) { return r.kv; }))
      rearm(k, d);
    refresh_counts(k);
    return true;
  }
  return false;
}

void before(KvPoint point) {
  if (capture_open()) return;
  if (kv_detail::g_active.load(std::memory_order_relaxed) == 0) {
    // A graph replay is serving: if defer mode has deferred nothing by then, say why once.
    if (point == KvPoint::kGraphLaunch && !kv_detail::g_serving_checked.exchange(true)) {
      KvState& k = K();
      std::lock_guard<std::mutex> g(k.lock);
      warn_if_nothing_deferred(k);
    }
    return;
  }
  const int device = tracked_device_now();
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  DeviceKv& d = k.at(device);
  if (d.committed || d.regions.empty()) return;
  if (!d.deferred) {
    const std::uint64_t tensor = policy::kv_tensor_size(kv_tensor_bytes(device), options().kv_tensor_bytes);
    policy::BurstEndQuery q;
    q.launch = point == KvPoint::kGraphLaunch;
    q.have_placements = true;
    q.kv_tag_open = current_tag() == KvTag::kv;
    q.any_tagged = std::any_of(d.regions.begin(), d.regions.end(), [](const Placement& r) { return r.tagged; });
    q.burst_recognised = kv_burst_recognised(device);
    q.tensor_bytes = options().kv_tensor_bytes != 0 ? tensor : 0;
    q.placement_of_tensor_size =
        std::any_of(d.regions.begin(), d.regions.end(), [&](const Placement& r) { return r.requested == tensor; });
    if (policy::kv_burst_over(q)) {
      defer_locked(d);
      refresh_counts(k);
    }
  }
  if (!d.deferred || d.deferred_bytes == 0) return;
  // Allocations, module loads, memory queries and capture begins are start-up work: none of them reads
  // or writes the KV cache. A graph replay does.
  if (point == KvPoint::kGraphLaunch)
    if (const policy::CommitReason reason = d.trigger.on_graph_launch(); reason != policy::CommitReason::none)
      commit_locked(d, reason, "a graph launch");
}

void before_launch(std::uint64_t stream, const KernelLaunch& launch) {
  if (capture_open()) return;  // recorded into a graph, not run: its replay decides
  const int device = tracked_device_now();
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  DeviceKv& d = k.at(device);
  if (d.committed || d.regions.empty()) return;
  if (!d.deferred) {
    // In the burst (a launch never ends it): what the kernel writes into a KV tensor must survive.
    note_burst_launch(k, launch);
    return;
  }
  if (d.deferred_bytes == 0) return;
  if (serving_flag_set()) d.trigger.serving_started();
  const policy::KvReach reach = d.trigger.needs_kernel_reach() ? deferred_reach(d, launch) : policy::KvReach::none;
  const policy::CommitReason reason = d.trigger.on_kernel_launch(stream, reach, stream_age(stream, d.stream_epoch));
  if (reason != policy::CommitReason::none) commit_locked(d, reason, "a kernel launch");
}

void touch(std::uint64_t address, std::uint64_t bytes, const char* api, bool zero_fill) {
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  if (!zero_fill) note_burst_write(k, address, bytes, api);
  DeviceKv* d = device_holding(k, address, bytes);
  if (!d) return;
  if (capture_open()) {
    // Recorded into a graph, not run: the graph's launch commits first.
    return;
  }
  const policy::CommitReason reason = d->trigger.on_kv_access();
  if (reason != policy::CommitReason::none) commit_locked(*d, reason, api);
}

}  // namespace kv_detail
// A capture on any device blocks every device's commit while open; its stream is where that
// engine's start-up warm-ups run.
void kv_capture_began(std::uint64_t stream) {
  if (!kv_mode()) return;
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  for (auto& d : k.devices)
    if (d) d->trigger.capture_began(stream);
}

void kv_stream_destroyed(std::uint64_t stream) {
  if (!kv_mode()) return;
  note_stream_destroyed(stream);
  // Only a device that deferred and has not committed has a trigger that knows streams.
  if (kv_detail::g_pending.load(std::memory_order_relaxed) == 0) return;
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  for (auto& d : k.devices)
    if (d) d->trigger.stream_destroyed(stream);
}

void kv_listening(int fd) {
  if (!kv_mode()) return;
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return;
  const policy::EngineProfile& engine = K().engine;
  std::string where;
  if (address.ss_family == AF_INET || address.ss_family == AF_INET6) {
    const std::uint16_t port =
        ntohs(address.ss_family == AF_INET ? reinterpret_cast<const sockaddr_in&>(address).sin_port
                                           : reinterpret_cast<const sockaddr_in6&>(address).sin6_port);
    if (engine.serving_port != 0 && port == engine.serving_port) where = fmt::format("port {}", port);
  } else if (address.ss_family == AF_UNIX && !engine.serving_socket.empty()) {
    const auto& unix_address = reinterpret_cast<const sockaddr_un&>(address);
    if (length > offsetof(sockaddr_un, sun_path) &&
        std::string_view(unix_address.sun_path, ::strnlen(unix_address.sun_path, sizeof unix_address.sun_path)) ==
            engine.serving_socket)
      where = "socket " + policy::printable(engine.serving_socket);
  }
  if (where.empty()) return;
  set_serving_flag();
  kv_event([&] { trace_events::kv_serving_port_open(where); });
  log().info(
      "the engine's server listens on its {}: KV still deferred in any process of the engine is committed "
      "before that process's next kernel launch",
      where);
}

void kv_capture_ended(std::uint64_t stream) {
  if (!kv_mode()) return;
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  for (auto& d : k.devices)
    if (d) d->trigger.capture_ended(stream);
}

std::size_t kv_reported_free(std::size_t driver_free) {
  if (kv_detail::g_pending.load(std::memory_order_relaxed) == 0) return driver_free;
  const int device = tracked_device_now();
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  const DeviceKv& d = k.at(device);
  if (!d.deferred || d.committed) return driver_free;
  const policy::FreeWhileDeferred f =
      policy::free_while_deferred(driver_free, d.deferred_bytes, options().scratch_bytes);
  if (f.short_bytes == 0) return f.free_bytes;
  // With the KV cache backed the engine would already have run out of memory: there is no negative
  // free memory to report; say so once.
  if (!k.warned_free_below_zero) {
    k.warned_free_below_zero = true;
    log().warn(
        "device {}: with its KV cache backed the engine would now have {} less than nothing free; memory "
        "queries report 0 until the commit, and the commit plan takes the shortfall from the KV cache",
        d.device, policy::format_bytes(f.short_bytes));
    kv_event([&] { trace_events::kv_free_below_zero(d.device, f.short_bytes); });
  }
  return 0;
}

namespace kv_internal {

std::uint64_t serving_need(const DeviceKv& d, std::uint64_t asked) {
  std::uint64_t peak = 0, live = 0;
  const auto windows = post_kv_windows(d.device);
  for (std::size_t i = 0; i < windows.size(); ++i) {
    if (i == static_cast<std::size_t>(policy::Category::kv)) continue;
    if (windows[i].peak > windows[i].at_start)
      peak += static_cast<std::uint64_t>(windows[i].peak - windows[i].at_start);
    if (windows[i].live > windows[i].at_start)
      live += static_cast<std::uint64_t>(windows[i].live - windows[i].at_start);
  }
  return std::max(peak, live + asked);
}

std::uint64_t serving_need_so_far(const DeviceKv& d) {
  return d.kv_asleep() ? d.serving_need_before_sleep : std::max(d.serving_need_before_sleep, serving_need(d, 0));
}

}  // namespace kv_internal

namespace {

// Raises the profile's serving need to `need` where that is more, and writes the profile at once: the
// engine may die of the out-of-memory that follows, and its next start must keep room for it. False when
// it was not more.
bool learn_serving_need(KvState& k, DeviceKv& d, std::uint64_t need) {
  if (!d.profile || need <= d.profile->serving_peak_bytes.value_or(0)) return false;
  d.profile->serving_peak_bytes = need;
  write_profile(k, d);
  return true;
}

}  // namespace

void kv_out_of_memory(std::uint64_t bytes, int device_hint) {
  if (!kv_mode()) return;
  try {
    KvState& k = K();
    // A failed commit stops the process from inside the lock; an allocation the arena refused
    // returns before this hook runs.
    std::unique_lock<std::mutex> g(k.lock, std::try_to_lock);
    if (!g.owns_lock()) return;
    DeviceKv& d = k.at(device_hint >= 0 ? device_hint : tracked_device_now());
    // While the KV cache sleeps, what runs out of memory is not serving (an RL trainer in the same process, say).
    if (!d.committed || d.kv_asleep()) return;
    const std::uint64_t need = std::max(serving_need(d, bytes), d.serving_need_before_sleep);
    if (!learn_serving_need(k, d, need)) return;
    std::size_t free_bytes = 0, total = 0;
    const bool measured = real_memory_info(&free_bytes, &total);
    log().warn(
        "device {}: serving ran out of memory after the commit ({} asked{}): the profile keeps room for {} of "
        "serving beside the KV cache, so the next start of this configuration is sized to leave it",
        d.device, policy::format_bytes(bytes),
        measured ? ", " + policy::format_bytes(free_bytes) + " free" : std::string(), policy::format_bytes(need));
  } catch (...) {
    // Learning costs the profile, never the engine's own out-of-memory error.
  }
}

bool kv_serving_overflow(std::uint64_t bytes, const char* api, void* return_address, int device_hint,
                         CUdeviceptr* ptr) {
  if (!kv_mode() || !tracking() || bytes == 0 || !ptr || capture_open() || kv_stands_aside(api)) return false;
  try {
    KvState& k = K();
    std::lock_guard<std::mutex> g(k.lock);
    const int device = device_hint >= 0 ? device_hint : tracked_device_now();
    DeviceKv& d = k.at(device);
    if (!d.committed || d.kv_asleep() || !d.arena ||
        policy::deficit_mode(options().deficit) != policy::DeficitMode::host || !real_host_vmm_supported(device))
      return false;
    // Serving only: start-up work after an early commit (an eager engine's autotuning; an engine that will
    // capture, committed at a warm-up's attention kernel before its autotuning and captures) would measure and
    // choose its kernels on host memory; it gets its error, as without kvremap, until serving shows (the serving
    // port open, a graph replay after the captures, the device idle after them: phase inference's serving).
    const bool start_up_may_follow = !policy::commits_at_serving(d.commit_reason) || d.committed_before_captures;
    if (start_up_may_follow && !serving_flag_set() && !serving_phase(device)) return false;
    // Only the allocator's retry of a refused request, after it freed what it had cached (policy/overflow_gate.h):
    // its first ask gets the error, so a cache that can make room for it does, and no block the allocator
    // would keep for good lands on host memory while device memory could hold it.
    const policy::OverflowDecision decision = d.overflow_gate.on_refusal(bytes, device_allocation_counts(device));
    if (!decision.overflow) return false;
    CUdeviceptr base = 0;
    if (d.arena->allocate(bytes, &base, true) != CUDA_SUCCESS) return false;
    d.regions.push_back(Placement{base, bytes, false, false});
    refresh_counts(k);
    on_alloc(base, bytes, AllocKind::kKvArena, api, return_address, device);
    reclassify(base, false);  // serving's own memory, not KV: it counts towards serving's need
    std::uint64_t host_bytes = 0;
    for (const Placement& r : d.regions)
      if (!r.kv) host_bytes += d.arena->host_bytes(r.base);
    if (d.overflow_allocations++ == 0)
      log().warn(
          "device {}: serving ran out of device memory after the commit: {} asked by {} was refused again {}, so "
          "kvremap backs it with host memory (slower) and serving goes on; the allocator keeps such blocks until the "
          "engine restarts, so restart it when you can: the profile keeps room for them and the next start of this "
          "configuration holds them on the device",
          device, policy::format_bytes(bytes), api,
          decision.freed_bytes_since_refusal > 0
              ? "after the engine's allocator freed " + policy::format_bytes(decision.freed_bytes_since_refusal) +
                    " of its cache"
              : std::string("with nothing in the engine's allocator's cache left to free"));
    kv_event([&] {
      trace_events::kv_serving_overflow(device, api, base, bytes, host_bytes, decision.frees_since_refusal,
                                        decision.freed_bytes_since_refusal);
    });
    learn_serving_need(k, d, serving_need_so_far(d));
    *ptr = base;
    return true;
  } catch (...) {
    return false;  // the engine gets its out-of-memory error, as without kvremap
  }
}

void kv_at_exit() {
  // A process that made no tracked CUDA call (vLLM's API server; a child forked from a traced process
  // that exits without CUDA, inheriting its exit handler) had nothing to defer: it says nothing.
  if (!kv_mode() || !tracking_started()) return;
  KvState& k = K();
  // A failed commit stops the process from inside the lock: nothing more to say then.
  std::unique_lock<std::mutex> g(k.lock, std::try_to_lock);
  if (!g.owns_lock()) return;
  for (const auto& d : k.devices) {
    if (d && !d->committed && d->shift_applied)
      log().warn(
          "device {}: this start was sized from profile {} (shift {}) and exits before its KV commit: its marker "
          "stays, so the next start of this configuration is sized by the engine and its commit rewrites the profile",
          d->device, policy::printable(d->previous_path), policy::format_bytes_signed(d->applied_shift));
    if (!d || !d->committed) continue;
    kv_event([&] { trace_events::kv_serving_peaks(d->device, post_kv_peaks(d->device)); });
    if (!d->profile) continue;
    // Serving's need beyond the commit, or what a serving out-of-memory recorded (kv_out_of_memory) if
    // more: what failed is never forgotten.
    d->profile->serving_peak_bytes = std::max(serving_need_so_far(*d), d->profile->serving_peak_bytes.value_or(0));
    write_profile(k, *d);
  }
  warn_if_nothing_deferred(k);
}

}  // namespace kvremap::interpose

extern "C" __attribute__((visibility("default"))) int kvremap_commit(void) {
  using namespace kvremap::interpose;
  try {
    if (!kv_mode() || capture_open()) return -1;
    const int device = tracked_device_now();
    KvState& k = K();
    std::lock_guard<std::mutex> g(k.lock);
    DeviceKv& d = k.at(device);
    if (!d.deferred || d.committed) return -1;
    const kvremap::policy::CommitReason reason = d.trigger.on_manual_commit();
    if (reason == kvremap::policy::CommitReason::none) return -1;
    commit_locked(d, reason, "kvremap_commit()");
    return 0;
  } catch (...) {
    return -1;
  }
}
