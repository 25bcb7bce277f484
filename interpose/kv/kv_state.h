// The KV manager's state, shared by its parts (manager, commit, learned sizing): one lock, one record per device.
#pragma once

#include <cuda.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "interpose/base/device_index.h"
#include "interpose/kv/kv_arena.h"
#include "interpose/kv/kv_manager.h"
#include "interpose/trace/kv_events.h"
#include "policy/commit_plan.h"
#include "policy/commit_trigger.h"
#include "policy/engine.h"
#include "policy/profile.h"
#include "policy/serving_headroom.h"
#include "policy/sizing.h"

namespace kvremap::interpose::kv_internal {

struct Placement {
  CUdeviceptr base = 0;
  std::uint64_t requested = 0;
  bool kv = false;
  bool tagged = false;  // allocated under kvremap_tag_push("kv"): KV by the engine's own word
  // The call that wrote something other than zeros into it before the deferral (copy, memset): it
  // stays backed then, since only a zero fill is replayed at the commit. nullptr when none did.
  const char* written_by = nullptr;
};

// One device's arena and where its KV cache stands; each device defers and commits on its own,
// at calls made while it is the current device.
struct DeviceKv {
  explicit DeviceKv(int d, const policy::TriggerConfig& t) : device(d), trigger(t) {}
  int device;
  std::unique_ptr<KvArena> arena;
  bool arena_failed = false;
  std::size_t placements_refused = 0;  // KV candidates the arena could not place (ordinary instead)
  std::size_t overflow_allocations = 0;  // serving allocations backed by host memory (kv_serving_overflow)
  std::vector<Placement> regions;
  bool deferred = false;   // the KV burst is over and its regions are on scratch
  bool committed = false;  // backed again for good
  policy::CommitReason commit_reason = policy::CommitReason::none;  // what committed it
  std::uint64_t deferred_bytes = 0;
  policy::CommitTrigger trigger;
  // What the commit measured, kept to be written again at exit with the serving peak.
  std::optional<policy::Profile> profile;
  std::string profile_name;
  std::uint64_t profile_hash = 0;
  // Learned sizing: the profile an earlier start of this configuration wrote, looked up once.
  bool lookup_done = false;
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
  bool warned_profile = false;           // a profile that cannot be written is said once per process
  std::vector<std::string> argv;         // the engine's command line, for the profile key
  std::vector<std::string> environment;  // the engine's memory-relevant variables set at load: the key's
  std::string config;                    // the key's `--config` file and its contents' hash, read at load
  // The key's engine and PyTorch modules, read once, at the first key made (the sizing query's lookup),
  // so that the lookup and every write of this start name the same modules.
  std::optional<std::vector<std::string>> software;
  std::array<std::unique_ptr<DeviceKv>, kMaxDevices> devices;

  DeviceKv& at(int device) {
    auto& slot = devices[static_cast<std::size_t>(device_index(device))];
    if (!slot) slot = std::make_unique<DeviceKv>(device, trigger_config);
    return *slot;
  }
};

// The process's KV state, made at first use from the options and the engine's command line.
KvState& K();

// Recounts kv_detail::g_active and g_pending (kv_manager.h) from the devices' states; under k.lock.
void refresh_counts(KvState& k);

// kv_arena_setup.cpp: the device's arena, reserved once; false (and d.arena_failed) when the device
// refuses the settings or the reservation, which is said once on stderr and in the trace.
bool make_arena(DeviceKv& d);

// kv_commit.cpp. `reason`: the decision point that committed; `call`: the API at that point, for the
// trace. Under k.lock; outside any capture. Stops the process when the KV cache cannot be backed.
void commit_locked(DeviceKv& d, policy::CommitReason reason, const char* call);
// Each category's peak since the tracker's post-KV window began (the KV burst's end, then the commit).
trace_events::PostKvPeaks post_kv_peaks(int device);

// kv_sizing.cpp: profiles and learned sizing (docs/kv-deferral.md, Profiles and Learned sizing).
// Once per device: the profile an earlier start of this configuration wrote, and the shift it asks for.
void look_up_profile(KvState& k, DeviceKv& d);
// The profile of the start-up just committed, kept in d.profile.
void measure_profile(DeviceKv& d, const policy::CommitPlan& plan, const policy::Headroom& headroom);
// Writes d.profile where KVREMAP_PROFILE_DIR says; false (one warning per process) when it cannot.
bool write_profile(KvState& k, DeviceKv& d);
// The shift this start's sizing query applied, when it reached the query the engine sized from.
std::int64_t effective_shift(const DeviceKv& d);
// KVREMAP_DEFICIT=restart: whether a restart sized from this start's profile could do better.
bool restart_would_help(const KvState& k, const DeviceKv& d);
// Writes the profile and exits with policy::kExitRestartForProfile; returns only when no profile
// could be written.
void restart_for_profile(KvState& k, DeviceKv& d, const policy::CommitPlan& plan, const policy::Headroom& headroom);
// A `fail` verdict (KVREMAP_DEFICIT=fail, or `host` with no host memory tier): the profile is written
// before the stop, so the same command started again is sized from what this start measured.
// Returns the words the stop's line ends with ("" when no profile applies or none could be written).
std::string write_profile_before_stop(KvState& k, DeviceKv& d, const policy::CommitPlan& plan, const policy::Headroom& headroom);
// After the commit: one warning when a profile's shift did not reach the query the engine sized from.
void report_sizing_outcome(const DeviceKv& d);

}  // namespace kvremap::interpose::kv_internal
