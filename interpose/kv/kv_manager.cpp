// KVREMAP_MODE=defer: the KV arena wired to the hooks, phase inference, the commit trigger and the commit plan.
#include "interpose/kv/kv_manager.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <mutex>
#include <string>
#include <vector>

#include "interpose/base/device_index.h"
#include "interpose/driver/driver_api.h"
#include "interpose/kv/kv_arena.h"
#include "interpose/base/library.h"
#include "interpose/trace/json.h"
#include "interpose/base/process_cmdline.h"
#include "interpose/kv/profile_store.h"
#include "interpose/trace/trace_writer.h"
#include "interpose/track/tracker.h"
#include "policy/commit_plan.h"
#include "policy/commit_trigger.h"
#include "policy/engine.h"
#include "policy/kv_recognition.h"
#include "policy/profile.h"
#include "policy/sizing.h"
#include "policy/units.h"

namespace kvremap::interpose {
namespace {

using policy::KvTag;

struct Placement {
  CUdeviceptr base = 0;
  std::uint64_t requested = 0;
  bool kv = false;
  bool tagged = false;  // allocated under kvremap_tag_push("kv"): KV by the engine's own word
};

// kvremap_tag_push/pop: the calling thread's open tags, innermost last. Trivially destructible,
// so allocations made while the process exits (after thread_local destructors ran) still read it.
constexpr int kMaxTagDepth = 32;
struct OpenTags {
  std::array<bool, kMaxTagDepth> kv{};  // true: "kv", false: "none"
  int depth = 0;
};
constinit thread_local OpenTags t_tags;

KvTag current_tag() {
  if (t_tags.depth == 0) return KvTag::untagged;
  return t_tags.kv[static_cast<std::size_t>(t_tags.depth - 1)] ? KvTag::kv : KvTag::not_kv;
}


// One device's arena and where its KV cache stands; each device defers and commits on its own,
// at calls made while it is the current device.
struct DeviceKv {
  explicit DeviceKv(int d, const policy::TriggerConfig& t) : device(d), trigger(t) {}
  int device;
  std::unique_ptr<KvArena> arena;
  bool arena_failed = false;
  std::size_t placements_refused = 0;  // KV candidates the arena could not place (ordinary instead)
  std::vector<Placement> regions;
  bool deferred = false;   // the KV burst is over and its regions are on scratch
  bool committed = false;  // backed again for good
  std::uint64_t deferred_bytes = 0;
  policy::CommitTrigger trigger;
  // What the commit measured, kept to be written again at exit with the serving peak.
  std::optional<policy::Profile> profile;
  std::string profile_name;
  std::uint64_t profile_hash = 0;
  // Learned sizing: the profile an earlier start of this configuration wrote, looked up once.
  bool lookup_done = false;
  bool profile_found = false;  // a file was there under this configuration's name, usable or not
  std::optional<policy::Profile> previous;
  std::string previous_path;
  std::optional<policy::SizingStep> step;  // what `previous` asks of this start's sizing query
  bool shift_applied = false;
  std::uint64_t applied_index = 0;  // the memory query that reported the shifted figure
  std::int64_t applied_shift = 0;
};

struct KvState {
  std::mutex lock;
  policy::EngineProfile engine;
  policy::TriggerConfig trigger_config;
  bool warned_nothing_deferred = false;
  bool warned_free_below_zero = false;
  bool warned_profile = false;  // a profile that cannot be written is said once per process
  std::vector<std::string> argv;  // the engine's command line, for the profile key
  std::array<std::unique_ptr<DeviceKv>, kMaxDevices> devices;

  DeviceKv& at(int device) {
    auto& slot = devices[static_cast<std::size_t>(device_index(device))];
    if (!slot) slot = std::make_unique<DeviceKv>(device, trigger_config);
    return *slot;
  }
};

KvState& K() {
  static KvState* state = [] {
    auto* s = new KvState;
    const policy::Options& o = options();
    const std::vector<std::string> argv = engine_command_line();
    s->argv = argv;
    switch (o.engine) {
      case policy::EngineWhen::detect:
        s->engine = policy::profile_engine(argv);
        break;
      case policy::EngineWhen::vllm:
        s->engine = policy::with_kind(argv, policy::EngineKind::vllm);
        break;
      case policy::EngineWhen::sglang:
        s->engine = policy::with_kind(argv, policy::EngineKind::sglang);
        break;
      case policy::EngineWhen::other:
        s->engine = policy::with_kind(argv, policy::EngineKind::other);
        break;
    }
    s->trigger_config.mode = static_cast<policy::TriggerMode>(static_cast<int>(o.commit));
    s->trigger_config.graphs_expected = s->engine.graphs_expected;
    return s;
  }();
  return *state;
}

// Checks the hooks make before taking the lock. g_active: devices with arena regions not yet
// committed (something to defer or commit). g_pending: devices deferred and not committed (the
// launch hooks' one-load check, and memory queries' adjustment).
std::atomic<int> g_active{0};
std::atomic<int> g_pending{0};
std::atomic<bool> g_any_arena{false};  // frees need the lock only once an arena exists
std::atomic<bool> g_serving_checked{false};  // the first graph launch checked that something was deferred

void refresh_counts(KvState& k) {
  int active = 0, pending = 0;
  for (const auto& d : k.devices) {
    if (!d || d->committed) continue;
    if (!d->regions.empty()) ++active;
    if (d->deferred && d->deferred_bytes > 0) ++pending;
  }
  g_active.store(active);
  g_pending.store(pending);
}

template <typename Fn>
Fn driver_fn(const char* name, int version) {
  ProcAddressFn resolve = real_proc_address();
  void* fn = nullptr;
  int status = 0;
  if (!resolve || resolve(name, &fn, version, 0, &status) != 0) return nullptr;
  return reinterpret_cast<Fn>(fn);
}

bool make_arena(DeviceKv& d) {
  if (d.arena) return true;
  if (d.arena_failed) return false;
  ArenaDriver drv{};
  drv.address_reserve = driver_fn<decltype(drv.address_reserve)>("cuMemAddressReserve", 10020);
  drv.address_free = driver_fn<decltype(drv.address_free)>("cuMemAddressFree", 10020);
  drv.create = driver_fn<decltype(drv.create)>("cuMemCreate", 10020);
  drv.release = driver_fn<decltype(drv.release)>("cuMemRelease", 10020);
  drv.map = driver_fn<decltype(drv.map)>("cuMemMap", 10020);
  drv.unmap = driver_fn<decltype(drv.unmap)>("cuMemUnmap", 10020);
  drv.set_access = driver_fn<decltype(drv.set_access)>("cuMemSetAccess", 10020);
  drv.memset_d8 = driver_fn<decltype(drv.memset_d8)>("cuMemsetD8", 3020);
  auto granularity = driver_fn<CUresult (*)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags)>(
      "cuMemGetAllocationGranularity", 10020);
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = d.device;
  size_t granule = 0;
  if (!granularity || granularity(&granule, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS) granule = 0;
  const policy::Options& o = options();
  // The settings only the device can check: refused with one line, as a bad value is at load.
  std::string problem;
  const std::uint64_t device_total = real_device_total(d.device);
  if (granule != 0 && o.chunk_bytes % granule != 0)
    problem = fmt::format("kvremap: KVREMAP_CHUNK_BYTES={} is not a multiple of device {}'s VMM granularity ({}): use "
                          "a multiple such as {}",
                          policy::format_bytes(o.chunk_bytes), d.device, policy::format_bytes(granule),
                          policy::format_bytes((o.chunk_bytes / granule + 1) * granule));
  else if (device_total != 0 && o.headroom_bytes >= device_total)
    problem = fmt::format("kvremap: KVREMAP_HEADROOM={} is not below device {}'s memory ({}): use a headroom such as "
                          "1GiB",
                          policy::format_bytes(o.headroom_bytes), d.device, policy::format_bytes(device_total));
  if (!problem.empty()) {
    std::fprintf(stderr, "%s\n", problem.c_str());
    if (o.strict) {
      finish("configuration problem");
      std::_Exit(1);
    }
    d.arena_failed = true;
    trace_kv_event("kv arena refused", fmt::format(R"({{"device":{},"reason":"{}"}})", d.device, problem));
    return false;
  }
  ArenaConfig c;
  c.granularity = granule;
  c.device = d.device;
  c.chunk_bytes = o.chunk_bytes;
  c.scratch_bytes = o.scratch_bytes;
  c.reserve_bytes = o.arena_bytes ? o.arena_bytes : 2 * real_device_total(d.device);
  CUresult error = CUDA_ERROR_INVALID_VALUE;
  if (drv.address_reserve && drv.address_free && drv.create && drv.release && drv.map && drv.unmap &&
      drv.set_access && drv.memset_d8)
    d.arena = KvArena::create(drv, c, &error);
  if (!d.arena) {
    d.arena_failed = true;
    log().error("device {}: KV arena unavailable: reserving {} of address space failed with driver error {}: KV stays "
                "in ordinary allocations",
                d.device, policy::format_bytes(c.reserve_bytes), static_cast<int>(error));
    return false;
  }
  g_any_arena.store(true);
  trace_kv_event("kv arena reserved",
                 fmt::format(R"({{"device":{},"base":"{:#x}","reserved_bytes":{},"chunk_bytes":{},"granularity":{}}})",
                             d.device, d.arena->base(), d.arena->reserved_bytes(), c.chunk_bytes, granule));
  return true;
}

bool synchronize() {
  auto sync = driver_fn<CUresult (*)()>("cuCtxSynchronize", 2000);
  return sync && sync() == CUDA_SUCCESS;
}

// The KV burst is over: its tensors go onto scratch; other arena placements stay backed.
void defer_locked(DeviceKv& d) {
  if (!d.arena) return;
  const std::uint64_t tensor = policy::kv_tensor_size(kv_tensor_bytes(d.device), options().kv_tensor_bytes);
  if (!synchronize()) {
    log().warn("device {}: KV deferral skipped: synchronising the device failed", d.device);
    return;
  }
  std::size_t kv_regions = 0;
  for (Placement& r : d.regions) {
    r.kv = policy::is_kv(policy::ArenaPlacement{r.requested, r.tagged}, tensor);
    reclassify(r.base, r.kv);
    if (!r.kv) continue;
    ++kv_regions;
    if (CUresult e = d.arena->defer(r.base); e != CUDA_SUCCESS) {
      log().warn("KV region at {:#x} stays backed: deferral failed with driver error {}", r.base, static_cast<int>(e));
      r.kv = false;
      continue;
    }
    d.deferred_bytes += d.arena->region_bytes(r.base);
  }
  d.deferred = true;
  start_post_kv_peaks(d.device);
  d.trigger.arm();
  const KvState& k = K();
  trace_kv_event("kv deferred",
                 fmt::format(R"({{"device":{},"regions":{},"tensor_bytes":{},"deferred_bytes":{},"scratch_bytes":{},)"
                             R"("engine":"{}","graphs_expected":{},"commit_mode":"{}"}})",
                             d.device, kv_regions, tensor, d.deferred_bytes, options().scratch_bytes,
                             policy::to_string(k.engine.kind), k.engine.graphs_expected ? "true" : "false",
                             policy::to_string(k.trigger_config.mode)));
  log().info("device {}: KV burst over: {} tensors of {} bytes deferred onto scratch", d.device, kv_regions, tensor);
  if (k.trigger_config.mode == policy::TriggerMode::automatic && !k.engine.graphs_expected)
    log().info("device {}: no CUDA-graph capture expected ({}): the KV cache is committed before the first launch",
               d.device, k.engine.eager_reason);
}

int host_vmm_supported(int device) {
  auto attribute = driver_fn<CUresult (*)(int*, CUdevice_attribute, CUdevice)>("cuDeviceGetAttribute", 2000);
  int value = 0;
  if (!attribute || attribute(&value, CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device) != 0)
    return 0;
  return value;
}

std::string driver_error_name(CUresult e) {
  auto name_of = driver_fn<CUresult (*)(CUresult, const char**)>("cuGetErrorName", 6000);
  const char* name = nullptr;
  if (name_of && name_of(e, &name) == CUDA_SUCCESS && name) return name;
  return "unknown error";
}

// The commit's own exit status when the KV cache cannot be backed (docs/kv-deferral.md): not 1, which
// engines use for any error.
constexpr int kExitKvDoesNotFit = 78;

[[noreturn]] void stop(const std::string& message, int status) {
  std::fprintf(stderr, "%s\n", message.c_str());
  finish("kv commit failed");
  std::_Exit(status);
}

// Device memory serving needs free beside the KV cache, never less than KVREMAP_HEADROOM: engines
// that profile run the profiled forward passes again; SGLang serves from its own reserve (what
// --mem-fraction-static leaves, less what stayed resident after its KV pool: workspaces, graphs).
std::uint64_t serving_headroom(const DeviceKv& k, std::uint64_t total, std::string* source) {
  const std::uint64_t floor = options().headroom_bytes;
  std::uint64_t need = 0;
  const KvState& state = K();
  if (state.engine.kind == policy::EngineKind::sglang) {
    const std::uint64_t kv = k.deferred_bytes;
    const std::uint64_t sized_from = sizing_free_bytes(k.device);
    const std::uint64_t reserve =
        state.engine.mem_fraction_static
            ? static_cast<std::uint64_t>(static_cast<double>(total) * (1.0 - *state.engine.mem_fraction_static))
            : (sized_from > kv ? sized_from - kv : 0);
    const std::uint64_t resident = post_kv_needs(k.device).resident_growth;
    need = reserve > resident ? reserve - resident : 0;
    *source = "SGLang's activation reserve";
  } else {
    need = profiling_peak_bytes(k.device);
    *source = "profiled activation peak";
  }
  if (need <= floor) {
    *source = "KVREMAP_HEADROOM";
    return floor;
  }
  return need;
}

static_assert(kCategoryWindows == policy::kCategoryCount);

std::int64_t wall_seconds() { return static_cast<std::int64_t>(std::time(nullptr)); }

// The profile of the start-up just committed: the key from the engine's command line and the device,
// the KV it asked for, what post-KV work held and peaked at per category, the commit's margin.
policy::ProfileKey profile_key(const KvState& k, int device) {
  policy::ProfileKey key;
  key.argv = k.argv;
  key.device_name = real_device_name(device);
  key.device_total_bytes = real_device_total(device);
  key.rank = static_cast<std::uint32_t>(device);
  key.driver_version = real_driver_version();
  return key;
}

ProfileDirectory profile_dir() {
  return profile_directory(options().profile_dir, std::getenv("XDG_CACHE_HOME"), std::getenv("HOME"));
}

// The shift this start's sizing query applied, when that query is the one the engine sized from
// (the last before its KV burst): the next start moves on from it. A shift at any other query says
// nothing about this start's KV size.
std::int64_t effective_shift(const DeviceKv& d) {
  if (!d.shift_applied) return 0;
  const auto q = sizing_query(d.device);
  return q && q->index == d.applied_index ? d.applied_shift : 0;
}

void measure_profile(DeviceKv& d, const policy::CommitPlan& plan, std::uint64_t headroom) {
  const KvState& k = K();
  const policy::ProfileKey key = profile_key(k, d.device);
  policy::Profile p;
  p.key = policy::key_text(key);
  for (const Placement& r : d.regions) {
    if (!r.kv) continue;
    p.kv_requested_bytes += r.requested;
    ++p.kv_tensors;
  }
  p.granularity_bytes = d.arena ? d.arena->granularity() : 0;
  const auto windows = post_kv_windows(d.device);
  for (std::size_t i = 0; i < windows.size(); ++i) {
    const CategoryWindow& w = windows[i];
    // The KV cache is not post-KV work: only what came and went in its category counts.
    const std::int64_t held = i == static_cast<std::size_t>(policy::Category::kv) ? 0 : std::max<std::int64_t>(w.live - w.at_start, 0);
    const std::int64_t above = std::max<std::int64_t>(w.peak - std::max(w.live, w.at_start), 0);
    p.post_kv[i] = policy::PostKvPeak{static_cast<std::uint64_t>(held), static_cast<std::uint64_t>(above)};
  }
  p.margin_bytes = plan.margin_bytes;
  p.sizing_shift_bytes = effective_shift(d);
  p.memory_share = policy::memory_share(k.engine);
  p.headroom_bytes = headroom;
  if (auto q = sizing_query(d.device)) p.sizing_query = policy::SizingQuery{static_cast<std::uint32_t>(q->index), q->phase, q->driver_free};
  p.measured_at = wall_seconds();
  d.profile_name = policy::profile_file_name(key);
  d.profile_hash = policy::fnv1a_64(p.key);
  d.profile = std::move(p);
}

// Writes the device's profile where KVREMAP_PROFILE_DIR says. A failure costs the next start its
// learned sizing, never this one: one warning per process, then on.
bool write_profile(KvState& k, DeviceKv& d) {
  if (!d.profile) return false;
  const ProfileDirectory dir = profile_dir();
  if (dir.path.empty()) return false;
  d.profile->written_at = wall_seconds();
  std::string problem;
  const std::optional<std::string> path = write_profile_file(dir, d.profile_name, policy::to_json(*d.profile), &problem);
  if (!path) {
    if (!k.warned_profile) log().warn("device {}: no profile written: {}", d.device, problem);
    k.warned_profile = true;
    return false;
  }
  std::string args = fmt::format(R"({{"device":{},"path":)", d.device);
  append_json_string(args, *path);
  args += fmt::format(R"(,"key_hash":"{:016x}"}})", d.profile_hash);
  trace_kv_event("kv profile written", args);
  return true;
}

// A profile's fate on one device: {"device", "profile" (its path), "reason"}.
void trace_profile_event(const char* name, int device, const std::string& path, const std::string& reason) {
  std::string args = fmt::format(R"({{"device":{},"profile":)", device);
  append_json_string(args, path);
  args += R"(,"reason":)";
  append_json_string(args, reason);
  args += "}";
  trace_kv_event(name, args);
}

// Once per device, at its first memory query before the KV burst (or at its commit): the profile an
// earlier start of this configuration wrote, and the shift it asks for. An unusable one is one warning.
void look_up_profile(KvState& k, DeviceKv& d) {
  if (d.lookup_done) return;
  d.lookup_done = true;
  const policy::Options& o = options();
  const ProfileDirectory dir = profile_dir();
  if (dir.path.empty()) return;
  const policy::ProfileKey key = profile_key(k, d.device);
  d.previous_path = dir.path + "/" + policy::profile_file_name(key);
  std::string problem;
  d.previous = load_profile_file(d.previous_path, policy::key_text(key), &problem);
  d.profile_found = d.previous.has_value() || !problem.empty();
  if (!problem.empty()) {
    log().warn("device {}: profile ignored: {}", d.device, problem);
    trace_profile_event("kv profile ignored", d.device, d.previous_path, problem);
    return;
  }
  if (!d.previous || o.sizing == policy::SizingWhen::engine) return;
  const auto not_applicable = policy::sizing_not_applicable(k.engine);
  std::string reason;
  if (not_applicable) {
    reason = *not_applicable;
  } else if (!d.previous->sizing_query) {
    reason = "the profile recorded no sizing query";
  } else {
    d.step = policy::next_sizing(*d.previous, o.sizing, policy::memory_share(k.engine), real_device_total(d.device));
    if (d.step->shift_bytes != 0) return;
    reason = d.step->reason;
  }
  log().info("device {}: profile {} found; sizing left to the engine: {}", d.device, d.previous_path, reason);
  trace_profile_event("kv sizing unchanged", d.device, d.previous_path, reason);
}

// Whether a restart sized from this start's profile could do better: the sizing query can move (not
// KVREMAP_SIZING=engine, a KV size not given on the command line, a sizing query seen) and no profile
// already asked for a shift this start could not apply (that start would come out the same).
bool restart_would_help(const KvState& k, const DeviceKv& d) {
  return options().sizing != policy::SizingWhen::engine && !policy::sizing_not_applicable(k.engine) &&
         sizing_query(d.device).has_value() && !d.shift_applied && !(d.step && d.step->shift_bytes != 0);
}

// KVREMAP_DEFICIT=restart on a start whose KV cache does not fit: the profile is written and the
// process exits before serving, so the next start is sized from it. Returns only when no profile
// could be written (the deficit then goes to host memory as with `host`).
void restart_for_profile(KvState& k, DeviceKv& d, const policy::CommitPlan& plan, std::uint64_t headroom) {
  measure_profile(d, plan, headroom);
  if (!write_profile(k, d)) {
    log().warn("device {}: KVREMAP_DEFICIT=restart: no profile could be written, so a restart would not be sized "
               "differently; the {} the device lacks goes to host memory",
               d.device, policy::format_bytes(plan.deficit_bytes));
    return;
  }
  trace_kv_event("kv restart", fmt::format(R"({{"device":{},"deficit_bytes":{},"exit_status":{}}})", d.device,
                                           plan.deficit_bytes, policy::kExitRestartForProfile));
  std::fprintf(stderr,
               "kvremap: device %d: the KV cache lacks %s on the device; its profile is written, exiting with status "
               "%d (KVREMAP_DEFICIT=restart): the next start is sized from it (kvremap run restarts once)\n",
               d.device, policy::format_bytes(plan.deficit_bytes).c_str(), policy::kExitRestartForProfile);
  finish("kv restart");
  std::_Exit(policy::kExitRestartForProfile);
}

// After the commit: one line when a profile's shift did not reach the query the engine sized from.
void report_sizing_outcome(const DeviceKv& d) {
  if (!d.step || d.step->shift_bytes == 0) return;
  const auto q = sizing_query(d.device);
  if (d.shift_applied && q && q->index == d.applied_index) return;
  const policy::SizingQuery& recorded = *d.previous->sizing_query;
  const std::string what =
      d.shift_applied
          ? fmt::format("the shift went to memory query {}, but the engine sized from query {}", d.applied_index,
                        q ? std::to_string(q->index) : std::string("none"))
          : fmt::format("no memory query {} in phase {} came (the engine's start-up changed)", recorded.index,
                        recorded.phase);
  log().warn("device {}: the profile {} did not size this start: {}; the profile is rewritten from this start",
             d.device, d.previous_path, what);
  trace_profile_event("kv sizing missed", d.device, d.previous_path, what);
}

// `reason`: the decision point that committed; `call`: the API at that point, for the trace.
void commit_locked(DeviceKv& k, policy::CommitReason reason, const char* call) {
  if (!synchronize())
    stop("kvremap: cannot commit the KV cache: synchronising the device failed; stopping rather than serving from "
         "scratch memory",
         kExitKvDoesNotFit);
  std::size_t free_bytes = 0, total = 0;
  if (!real_memory_info(&free_bytes, &total))
    stop("kvremap: cannot commit the KV cache: cuMemGetInfo failed; stopping rather than serving from scratch memory",
         kExitKvDoesNotFit);
  const policy::Options& o = options();
  const KvState& state = K();
  std::string headroom_source;
  policy::CommitInputs in;
  for (const Placement& r : k.regions)
    if (r.kv) in.tensor_bytes.push_back(k.arena->region_bytes(r.base));
  in.granularity = k.arena->granularity();
  in.chunk_bytes = o.chunk_bytes;
  in.device_free_bytes = free_bytes;
  in.device_total_bytes = total;
  in.headroom_bytes = serving_headroom(k, total, &headroom_source);
  in.host_vmm_supported = host_vmm_supported(k.device) != 0;
  in.deficit_mode = o.deficit == policy::DeficitWhen::fail ? policy::DeficitMode::fail : policy::DeficitMode::host;
  look_up_profile(K(), k);
  in.post_kv_transient_bytes = post_kv_needs(k.device).transient;
  in.engine = state.engine.kind;
  in.gpu_memory_utilization = state.engine.gpu_memory_utilization;
  in.mem_fraction_static = state.engine.mem_fraction_static;
  in.kv_cache_memory = state.engine.kv_cache_memory;
  const policy::CommitPlan plan = policy::plan_commit(in);
  const char* verdict = plan.verdict == policy::CommitVerdict::all_device  ? "all_device"
                        : plan.verdict == policy::CommitVerdict::host_tail ? "host_tail"
                                                                           : "fail";
  trace_kv_event("kv commit plan",
                 fmt::format(R"({{"device":{},"kv_bytes":{},"device_bytes":{},"host_bytes":{},"tensors":{},)"
                             R"("host_bytes_per_tensor":{},"granularity":{},"chunk_bytes":{},"device_free_bytes":{},)"
                             R"("headroom_bytes":{},"headroom_source":"{}","post_kv_transient_bytes":{},"margin_bytes":{},"deficit_bytes":{},)"
                             R"("verdict":"{}"}})",
                             k.device, plan.kv_bytes, plan.device_bytes, plan.host_bytes, plan.tensors.size(),
                             plan.host_bytes_per_tensor, in.granularity, in.chunk_bytes, free_bytes, in.headroom_bytes,
                             headroom_source, in.post_kv_transient_bytes, plan.margin_bytes, plan.deficit_bytes, verdict));
  if (plan.deficit_bytes > 0 && o.deficit == policy::DeficitWhen::restart && restart_would_help(state, k))
    restart_for_profile(K(), k, plan, in.headroom_bytes);
  if (plan.verdict == policy::CommitVerdict::fail) stop(plan.message, kExitKvDoesNotFit);
  // Each tensor as planned: its first bytes on the device, its end on host memory. A failed commit
  // leaves its region on scratch, so it can be tried again: once more for a transient driver error;
  // with its whole tensor on host memory when the device ran out after all. Either way only that
  // tensor is affected, never the ones after it.
  std::size_t tensor = 0;
  std::uint64_t host_per_tensor = 0;
  std::size_t moved_to_host = 0;
  for (Placement& r : k.regions) {
    if (!r.kv) continue;
    const std::uint64_t device_bytes = plan.tensors[tensor++].device_bytes;
    const CUresult first = k.arena->commit(r.base, device_bytes);
    CUresult e = first;
    if (e != CUDA_SUCCESS && e != CUDA_ERROR_OUT_OF_MEMORY) e = k.arena->commit(r.base, device_bytes);
    if (e == CUDA_ERROR_OUT_OF_MEMORY && in.host_vmm_supported && device_bytes > 0) {
      e = k.arena->commit(r.base, 0);
      ++moved_to_host;
    }
    if (e != CUDA_SUCCESS)
      stop(fmt::format("kvremap: committing the KV region at {:#x} failed with driver error {} ({}); stopping rather "
                       "than serving from scratch memory",
                       r.base, static_cast<int>(first), driver_error_name(first)),
           kExitKvDoesNotFit);
    host_per_tensor = std::max(host_per_tensor, k.arena->host_bytes(r.base));
  }
  if (moved_to_host > 0)
    log().warn("device {}: the device refused {} of the planned tensor shares at the commit; those tensors are "
               "wholly on host memory",
               k.device, moved_to_host);
  const bool scratch_released = k.arena->release_scratch();
  k.committed = true;
  k.trigger.committed();
  refresh_counts(K());
  const std::uint64_t host_bytes = k.arena->host_bytes();
  trace_kv_event(
      "kv committed",
      fmt::format(R"({{"device":{},"trigger":"{}","call":"{}","kv_bytes":{},"device_bytes":{},"host_bytes":{},"tensors":{},)"
                  R"("host_bytes_per_tensor":{},"granularity":{},"headroom_bytes":{},"margin_bytes":{},)"
                  R"("deficit_bytes":{},"scratch_released":{},"sizing_shift_bytes":{},"same_start_flags":"{}","post_kv_peaks":{}}})",
                  k.device, policy::to_string(reason), call, plan.kv_bytes, plan.kv_bytes - host_bytes, host_bytes, plan.tensors.size(),
                  host_per_tensor, in.granularity, in.headroom_bytes, plan.margin_bytes, plan.deficit_bytes, scratch_released,
                  effective_shift(k), policy::same_start_flags(state.engine, effective_shift(k), plan.kv_bytes, total),
                  post_kv_peaks_json(k.device)));
  report_sizing_outcome(k);
  measure_profile(k, plan, in.headroom_bytes);
  // From here the same peaks measure serving, for the exit's "kv serving peaks".
  start_post_kv_peaks(k.device);
  write_profile(K(), k);
  log().info("device {}: KV committed before {} ({})", k.device, call, policy::to_string(reason));
  if (host_bytes != plan.host_bytes) {
    log().warn("{} (placed: {:.2f} GiB on host memory)", plan.message,
               static_cast<double>(host_bytes) / static_cast<double>(1ULL << 30));
  } else if (host_bytes > 0) {
    log().warn("{}", plan.message);
  } else {
    log().info("{}", plan.message);
  }
}

// Why defer mode ended start-up with nothing deferred, for the one warning that says so.
std::string nothing_deferred_reason(const KvState& k) {
  for (const auto& d : k.devices)
    if (d && d->arena_failed) return fmt::format("the KV arena of device {} could not be reserved", d->device);
  for (const auto& d : k.devices)
    if (d && d->regions.empty() && d->placements_refused > 0)
      return fmt::format("the KV arena of device {} could not place any of its {} KV candidates (see the warning "
                         "above): they are ordinary allocations",
                         d->device, d->placements_refused);
  for (const auto& d : k.devices)
    if (d && !d->regions.empty())
      return fmt::format("device {} placed {} allocations in the arena but no KV burst was recognised (tag it with "
                         "kvremap_tag_push(\"kv\") or name its tensor size with KVREMAP_KV_TENSOR_BYTES)",
                         d->device, d->regions.size());
  return fmt::format("no allocation of at least KVREMAP_KV_MIN_BYTES={} was made after the engine's sizing memory "
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
  // program (defer is the default mode) gets it at info level.
  const bool expected = k.engine.kind != policy::EngineKind::other ||
                        std::any_of(k.devices.begin(), k.devices.end(), [](const auto& d) {
                          return d && (d->arena || d->arena_failed || d->placements_refused > 0);
                        });
  if (expected) {
    log().warn("KVREMAP_MODE=defer deferred nothing: {}", why);
  } else {
    log().info("KVREMAP_MODE=defer deferred nothing: {}", why);
  }
  trace_kv_event("kv nothing deferred", fmt::format(R"({{"reason":"{}"}})", why));
}

DeviceKv* device_holding(KvState& k, std::uint64_t address, std::uint64_t bytes) {
  for (auto& slot : k.devices) {
    if (!slot || !slot->arena || !slot->deferred || slot->committed) continue;
    for (const Placement& r : slot->regions) {
      if (!r.kv) continue;
      const std::uint64_t size = slot->arena->region_bytes(r.base);
      if (address < r.base + size && r.base < address + std::max<std::uint64_t>(bytes, 1)) return slot.get();
    }
  }
  return nullptr;
}

}  // namespace

namespace kv_detail {

bool allocate(std::uint64_t bytes, const char* api, void* return_address, CUdeviceptr* ptr, CUresult* result) {
  if (!tracking()) return false;
  const policy::Options& o = options();
  const KvTag tag = current_tag();
  if (!policy::may_place_in_arena(bytes, tag, o.kv_min_bytes, o.kv_tensor_bytes) || capture_open()) return false;
  const int device = tracked_device_now();
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  DeviceKv& d = k.at(device);
  policy::PlacementQuery q;
  q.bytes = bytes;
  q.tag = tag;
  q.kv_window = kv_window(device);
  q.burst_over = d.deferred || d.committed;
  q.min_bytes = o.kv_min_bytes;
  q.tensor_override = o.kv_tensor_bytes;
  q.recognised_bytes = kv_tensor_bytes(device);
  if (!policy::place_in_arena(q) || !make_arena(d)) return false;
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
                     ? fmt::format("driver error {}, {}", static_cast<int>(r), driver_error_name(r))
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

bool release(CUdeviceptr ptr, const char* api, CUresult* result) {
  if (!g_any_arena.load(std::memory_order_relaxed)) return false;
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
    refresh_counts(k);
    on_free(ptr, AllocKind::kKvArena, api);
    return true;
  }
  return false;
}

void before(KvPoint point, std::uint64_t stream) {
  if (capture_open()) return;
  if (point == KvPoint::kKernelLaunch ? g_pending.load(std::memory_order_relaxed) == 0
                                      : g_active.load(std::memory_order_relaxed) == 0) {
    // A graph replay is serving: if defer mode has deferred nothing by then, say why once.
    if (point == KvPoint::kGraphLaunch && !g_serving_checked.exchange(true)) {
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
    q.launch = point == KvPoint::kKernelLaunch || point == KvPoint::kGraphLaunch;
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
  policy::CommitReason reason = policy::CommitReason::none;
  const char* call = "";
  switch (point) {
    case KvPoint::kGraphLaunch:
      reason = d.trigger.on_graph_launch();
      call = "a graph launch";
      break;
    case KvPoint::kKernelLaunch:
      reason = d.trigger.on_kernel_launch(stream);
      call = "a kernel launch";
      break;
    case KvPoint::kAllocation:
    case KvPoint::kModuleLoad:
    case KvPoint::kMemoryQuery:
    case KvPoint::kCaptureBegin:
      break;  // start-up work: none of these reads or writes the KV cache
  }
  if (reason != policy::CommitReason::none) commit_locked(d, reason, call);
}

std::size_t sizing_free(std::size_t reported, std::size_t total) {
  if (!tracking()) return reported;
  const int device = tracked_device_now();
  const UpcomingQuery q = upcoming_memory_query(device);
  if (!q.before_kv) return reported;
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  DeviceKv& d = k.at(device);
  if (d.shift_applied || d.deferred || d.committed || !d.regions.empty()) return reported;
  look_up_profile(k, d);
  if (!d.step || d.step->shift_bytes == 0) return reported;
  const policy::SizingQuery& recorded = *d.previous->sizing_query;
  if (q.index != recorded.index || q.phase != recorded.phase) return reported;
  const std::uint64_t told = policy::shifted_free(reported, d.step->shift_bytes, total);
  d.shift_applied = true;
  d.applied_index = q.index;
  d.applied_shift = d.step->shift_bytes;
  std::string args = fmt::format(
      R"({{"device":{},"query_index":{},"phase":"{}","driver_free":{},"reported_free":{},"shift_bytes":{},)"
      R"("sizing":"{}","previous_margin_bytes":{},"previous_shift_bytes":{},"slack_bytes":{},"target_kv_bytes":{},"step_bytes":{},"profile":)",
      device, q.index, q.phase, reported, told, d.step->shift_bytes, policy::to_string(options().sizing), d.previous->margin_bytes, d.previous->sizing_shift_bytes,
      d.step->slack_bytes, d.step->target_kv_bytes, d.step->step_bytes);
  append_json_string(args, d.previous_path);
  args += R"(,"reason":)";
  append_json_string(args, d.step->reason);
  args += "}";
  trace_kv_event("kv sizing adjusted", args);
  log().info("device {}: sized from profile {}: {}", device, d.previous_path, d.step->reason);
  return told;
}

void touch(std::uint64_t address, std::uint64_t bytes, const char* api) {
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
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

bool kv_pending() { return g_pending.load(std::memory_order_relaxed) != 0; }

// A capture on any device blocks every device's commit while open; its stream is where that
// engine's start-up warm-ups run.
void kv_capture_began(std::uint64_t stream) {
  if (!kv_mode()) return;
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  for (auto& d : k.devices)
    if (d) d->trigger.capture_began(stream);
}

void kv_capture_ended(std::uint64_t stream) {
  if (!kv_mode()) return;
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  for (auto& d : k.devices)
    if (d) d->trigger.capture_ended(stream);
}

std::size_t kv_reported_free(std::size_t driver_free) {
  if (g_pending.load(std::memory_order_relaxed) == 0) return driver_free;
  const int device = tracked_device_now();
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  const DeviceKv& d = k.at(device);
  if (!d.deferred || d.committed) return driver_free;
  // The scratch stands in for all of the deferred KV: what is free beyond it is what the engine
  // would see with the KV cache fully backed.
  const std::uint64_t hidden =
      d.deferred_bytes > options().scratch_bytes ? d.deferred_bytes - options().scratch_bytes : 0;
  if (driver_free >= hidden) return driver_free - hidden;
  // With the KV cache backed the engine would already have run out of memory: its start-up needs
  // more than its sizing left. There is no negative free memory to report; say so once.
  if (!k.warned_free_below_zero) {
    k.warned_free_below_zero = true;
    const std::uint64_t short_by = hidden - driver_free;
    log().warn("device {}: with its KV cache backed the engine would now have {} less than nothing free; memory "
               "queries report 0 until the commit, and the commit plan takes the shortfall from the KV cache",
               d.device, policy::format_bytes(short_by));
    trace_kv_event("kv free below zero", fmt::format(R"({{"device":{},"short_bytes":{}}})", d.device, short_by));
  }
  return 0;
}

void kv_at_exit() {
  if (!kv_mode()) return;
  KvState& k = K();
  // A failed commit stops the process from inside the lock: nothing more to say then.
  std::unique_lock<std::mutex> g(k.lock, std::try_to_lock);
  if (!g.owns_lock()) return;
  for (const auto& d : k.devices) {
    if (!d || !d->committed) continue;
    trace_kv_event("kv serving peaks",
                   fmt::format(R"({{"device":{},"since_commit":{}}})", d->device, post_kv_peaks_json(d->device)));
    if (!d->profile) continue;
    // Serving's need beyond the commit: each category's rise above its level then (the KV cache's
    // own category is the committed cache itself).
    std::uint64_t peak = 0;
    const auto windows = post_kv_windows(d->device);
    for (std::size_t i = 0; i < windows.size(); ++i)
      if (i != static_cast<std::size_t>(policy::Category::kv) && windows[i].peak > windows[i].at_start)
        peak += static_cast<std::uint64_t>(windows[i].peak - windows[i].at_start);
    d->profile->serving_peak_bytes = peak;
    write_profile(k, *d);
  }
  warn_if_nothing_deferred(k);
}

}  // namespace kvremap::interpose

// Explicit tagging for engines and plugins (callable through ctypes): allocations made between
// kvremap_tag_push("kv") and the matching kvremap_tag_pop() are the KV cache.
extern "C" __attribute__((visibility("default"))) int kvremap_tag_push(const char* tag) {
  if (!tag) return -1;
  const std::string_view t = tag;
  if (t != "kv" && t != "none") return -1;  // "none": a nested region that is not KV
  auto& tags = kvremap::interpose::t_tags;
  if (tags.depth == kvremap::interpose::kMaxTagDepth) return -1;
  tags.kv[static_cast<std::size_t>(tags.depth++)] = t == "kv";
  return 0;
}

extern "C" __attribute__((visibility("default"))) int kvremap_tag_pop(void) {
  if (kvremap::interpose::t_tags.depth == 0) return -1;
  --kvremap::interpose::t_tags.depth;
  return 0;
}

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
