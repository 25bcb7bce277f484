// The KV manager's state, shared by its parts (manager, commit, learned sizing): one lock, one record per device.
#pragma once

#include <cuda.h>

#include <array>
#include <atomic>
#include <map>
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
#include "policy/overflow_gate.h"
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
  // Adopted (the engine mapped it itself, kv_vmm.h): the virtual handle mapped there, under which the
  // tracker holds it; 0 for kvremap's own placements, tracked by address.
  std::uint64_t handle = 0;
  std::uint64_t tracked_key() const { return handle != 0 ? handle : base; }
  bool kv_category = false;  // the tracker holds it as KV (reclassified so at the deferral)
};

// A virtual handle (kv_vmm.h): what kvremap gave the engine for a cuMemCreate in its KV window. Its
// value is this record's address, which no driver handle can be while the record lives.
struct VirtualHandle {
  int device = 0;
  std::uint64_t bytes = 0;
  CUmemAllocationProp prop{};
  bool tagged = false;                    // created under kvremap_tag_push("kv")
  CUmemGenericAllocationHandle real = 0;  // the driver handle behind it while no adopted region holds it
  CUdeviceptr mapped_at = 0;              // the adopted region's base while one holds its memory
  int references = 1;                     // cuMemCreate's, plus one per cuMemRetainAllocationHandle
};

// A KV tensor the engine maps itself (an adopted region) that a sleep released after the commit: vLLM's sleep
// unmaps and releases it and keeps its reservation, and its wake creates and maps new memory of the same size at
// the same address (docs/kv-deferral.md, Sleep and wake). `asleep` until that mapping comes.
struct SleepingKv {
  CUdeviceptr base = 0;
  std::uint64_t bytes = 0;
  bool kv_category = true;  // the tracker's category of the region it was: KV, or `other` (Placement::kv_category)
  bool asleep = true;
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
  // Which refused serving allocation is the allocator's retry, the only one given host memory.
  policy::OverflowGate overflow_gate;
  std::vector<Placement> regions;
  bool deferred = false;   // the KV burst is over and its regions are on scratch
  bool committed = false;  // backed again for good
  policy::CommitReason commit_reason = policy::CommitReason::none;  // what committed it
  // Committed before any capture of an engine that will capture, its serving port not open: autotuning and the
  // captures may still follow, and start-up work is never given host memory (kv_serving_overflow).
  bool committed_before_captures = false;
  std::uint64_t deferred_bytes = 0;
  policy::CommitTrigger trigger;
  // The stream epoch of the deferral (stream_ages.h): streams whose first kernel came later are new since it.
  std::uint64_t stream_epoch = 0;
  // What the commit measured, kept to be written again at exit with the serving peak.
  std::optional<policy::Profile> profile;
  std::string profile_name;
  std::uint64_t profile_hash = 0;
  // Learned sizing: the profile an earlier start of this configuration wrote, looked up once.
  bool lookup_done = false;
  std::optional<policy::Profile> previous;
  std::string previous_path;
  std::string written_profile_path;  // the profile this start wrote last; empty: none
  std::optional<policy::SizingStep> step;  // what `previous` asks of this start's sizing query
  bool shift_applied = false;
  bool marked = false;  // this start's failed-start marker is beside the profile (removed at its write)
  std::uint64_t applied_index = 0;  // the memory query that reported the shifted figure
  std::int64_t applied_shift = 0;
  // Sleep and wake after the commit (kv_vmm.cpp): the KV tensors a sleep released, and serving's need measured
  // up to the last sleep (what came and went while the KV cache was released never competed with it).
  std::vector<SleepingKv> sleeping;
  std::uint64_t serving_need_before_sleep = 0;
  bool kv_asleep() const {
    for (const SleepingKv& s : sleeping)
      if (s.asleep) return true;
    return false;
  }
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
  std::string model_identity;            // the key's model, by its config.json (policy::ProfileKey), read at load
  // The key's engine and PyTorch modules, read once, at the first key made (the sizing query's lookup),
  // so that the lookup and every write of this start name the same modules.
  std::optional<std::vector<std::string>> software;
  std::array<std::unique_ptr<DeviceKv>, kMaxDevices> devices;
  std::map<std::uint64_t, std::unique_ptr<VirtualHandle>> virtual_handles;  // by value
  // The engine's VA reservations (cuMemAddressReserve), base to size: a virtual handle is adopted only where
  // it maps a whole reservation of its own size (kv_vmm.h).
  std::map<std::uint64_t, std::uint64_t> reservations;

  DeviceKv& at(int device) {
    auto& slot = devices[static_cast<std::size_t>(device_index(device))];
    if (!slot) slot = std::make_unique<DeviceKv>(device, trigger_config);
    return *slot;
  }
};

// The process's KV state, made at first use from the options and the engine's command line.
KvState& K();

// pthread_atfork, in the child: a fresh KV state at its next use. A thread of the parent may have held the
// state's lock at the fork, which nobody in the child would release; the parent's arena belongs to a CUDA
// context the child cannot use, and a child forked before any CUDA call (an engine's forked engine core)
// had nothing in it yet.
void kv_child_after_fork();

// Recounts kv_detail::g_active and g_pending (kv_manager.h) from the devices' states; under k.lock.
void refresh_counts(KvState& k);

// kv_manager.cpp: whether an allocation of `bytes` on `d`, made now under `tag`, belongs in the device's
// KV arena (the KV window's placement rule, policy::place_in_arena), and — `with_arena` — the arena exists
// for it (made now if need be).
bool wants_placement(KvState& k, DeviceKv& d, std::uint64_t bytes, policy::KvTag tag, bool with_arena = true);
// kv_manager.cpp: every deferred KV tensor of `d` went before its commit (a profiling KV cache): the KV
// burst is looked for again.
void rearm(KvState& k, DeviceKv& d);

// kv_arena_setup.cpp: the device's arena, reserved once; false (and d.arena_failed) when the device
// refuses the settings or the reservation, which is said once on stderr and in the trace.
bool make_arena(DeviceKv& d);

// kv_commit.cpp. `reason`: the decision point that committed; `call`: the API at that point, for the
// trace. Under k.lock; outside any capture. Stops the process when the KV cache cannot be backed.
void commit_locked(DeviceKv& d, policy::CommitReason reason, const char* call);
// Each category's peak since the tracker's post-KV window began (the KV burst's end, then the commit).
trace_events::PostKvPeaks post_kv_peaks(int device);

// kv_manager.cpp: serving's need beyond the commit — each category's rise above its level then, at its peak (the
// KV cache's own category is the committed cache itself); with `asked`, what is live now plus the ask.
std::uint64_t serving_need(const DeviceKv& d, std::uint64_t asked);
// The same over the whole of serving: the need measured before the last sleep, and since the wake when the KV
// cache is mapped again (while it sleeps, only what came before).
std::uint64_t serving_need_so_far(const DeviceKv& d);

// kv_sizing.cpp: profiles and learned sizing (docs/kv-deferral.md, Profiles and Learned sizing).
// Once per device: the profile an earlier start of this configuration wrote, and the shift it asks for.
void look_up_profile(KvState& k, DeviceKv& d);
// The profile of the start-up just committed, kept in d.profile.
void measure_profile(DeviceKv& d, const policy::CommitPlan& plan, const policy::Headroom& headroom);
// Writes d.profile where KVREMAP_PROFILE_DIR says; false (one warning per process) when it cannot.
bool write_profile(KvState& k, DeviceKv& d);
// Whether learned sizing can size the next start of this configuration from this start's profile (not
// KVREMAP_SIZING=engine, a KV size not fixed on the command line, a sizing query seen).
bool profile_can_size_next_start(const KvState& k, const DeviceKv& d);
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
