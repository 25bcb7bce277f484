// Profiles and learned sizing: the profile each commit writes, the one a start finds, the sizing query it moves, the
// restart.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

#include "interpose/base/library.h"
#include "interpose/base/loaded_modules.h"
#include "interpose/driver/driver_api.h"
#include "interpose/kv/kv_manager.h"
#include "interpose/kv/kv_state.h"
#include "interpose/kv/profile_store.h"
#include "interpose/trace/kv_events.h"
#include "interpose/track/tracker.h"
#include "policy/path_rules.h"
#include "policy/printable.h"
#include "policy/profile_layers.h"
#include "policy/units.h"

namespace kvremap::interpose::kv_internal {

std::int64_t wall_seconds() { return static_cast<std::int64_t>(std::time(nullptr)); }

// The profile of the start-up just committed: the key from the engine's command line and the device,
// the KV it asked for, what post-KV work held and peaked at per category, the commit's margin.
policy::ProfileKey profile_key(KvState& k, int device) {
  policy::ProfileKey key;
  key.argv = k.argv;
  key.device_name = real_device_name(device);
  key.device_total_bytes = real_device_total(device);
  key.rank = static_cast<std::uint32_t>(device);
  key.driver_version = real_driver_version();
  key.environment = k.environment;
  key.config = k.config;
  key.model_identity = k.model_identity;
  if (!k.software) {
    std::vector<std::string> software;
    for (const LoadedModule& module : loaded_modules())
      if (auto label = policy::engine_module_label(k.engine.kind, module.path))
        software.push_back(*label + " " + (module.build_id.empty() ? "no-build-id" : module.build_id));
    std::sort(software.begin(), software.end());
    software.erase(std::unique(software.begin(), software.end()), software.end());
    k.software = std::move(software);
  }
  key.software = *k.software;
  return key;
}

ProfileDirectory profile_dir() {
  return profile_directory(options().profile_dir, std::getenv("XDG_CACHE_HOME"), std::getenv("HOME"));
}

namespace {

// The read-only layers searched after profile_dir() (KVREMAP_PROFILE_PATH, empty entries ignored); an entry
// that breaks the path rules or is not absolute is skipped (the options' problems at load name it:
// policy::parse_options).
std::vector<ProfileDirectory> profile_layers() {
  std::vector<ProfileDirectory> out;
  for (const std::string& entry : policy::profile_path_entries(options().profile_path)) {
    if (policy::path_problem(entry) || !entry.starts_with('/')) continue;
    out.push_back({entry, false, std::string(policy::kProfilePathVariable), true});
  }
  return out;
}

}  // namespace

// The shift this start's sizing query applied, when that query is the one the engine sized from
// (the last before its KV burst): the next start moves on from it. A shift at any other query says
// nothing about this start's KV size.
std::int64_t effective_shift(const DeviceKv& d) {
  if (!d.shift_applied) return 0;
  const auto q = sizing_query(d.device);
  return q && q->index == d.applied_index ? d.applied_shift : 0;
}

void measure_profile(DeviceKv& d, const policy::CommitPlan& plan, const policy::Headroom& headroom) {
  KvState& k = K();
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
    const std::int64_t held =
        i == static_cast<std::size_t>(policy::Category::kv) ? 0 : std::max<std::int64_t>(w.live - w.at_start, 0);
    const std::int64_t above = std::max<std::int64_t>(w.peak - std::max(w.live, w.at_start), 0);
    p.post_kv[i] = policy::PostKvPeak{static_cast<std::uint64_t>(held), static_cast<std::uint64_t>(above)};
  }
  p.margin_bytes = plan.margin_bytes;
  p.sizing_shift_bytes = effective_shift(d);
  p.memory_share = policy::memory_share(k.engine);
  p.headroom_bytes = headroom.bytes;
  p.headroom_measured_bytes = headroom.measured_bytes;
  // What serving needed in earlier starts of this configuration is kept until a start needs more: a
  // start that stops, or serves less before it exits, does not forget it.
  if (d.previous) p.serving_peak_bytes = d.previous->serving_peak_bytes;
  if (auto q = sizing_query(d.device))
    p.sizing_query = policy::SizingQuery{static_cast<std::uint32_t>(q->index), q->phase, q->driver_free};
  p.measured_at = wall_seconds();
  d.profile_name = policy::profile_file_name(key);
  d.profile_hash = policy::fnv1a_64(p.key);
  d.profile = std::move(p);
}

// Writes the device's profile where KVREMAP_PROFILE_DIR says. A failure costs the next start its
// learned sizing, never this one: one warning per process, then on. A directory another user could
// write to is refused (profiles off). The failed-start marker goes with every write: this start reached
// its commit (or its restart's plan), so the profile that sized it, if any, is confirmed, and the one
// written now is this start's own measurement.
bool write_profile(KvState& k, DeviceKv& d) {
  if (!d.profile) return false;
  const ProfileDirectory dir = profile_dir();
  if (dir.path.empty()) return false;
  d.profile->written_at = wall_seconds();
  std::string problem;
  DirectoryProblem kind = DirectoryProblem::none;
  const std::optional<ProfileStore> store = ProfileStore::open(dir, true, &kind, &problem);
  std::optional<std::string> path;
  if (store) {
    path = store->write(d.profile_name, policy::to_json(*d.profile), &problem);
    // This start's own marker only: another start's marker is its own to remove. A start the engine
    // sized alone measured figures no profile shaped, so the markers of starts known to have failed
    // have done their work once it has written them; a start a profile sized leaves them for the next.
    const policy::StartIdentity me = this_start();
    if (d.marked) store->unmark(d.profile_name, me);
    d.marked = false;
    if (path && !d.shift_applied) store->remove_failed(d.profile_name, me, wall_seconds());
  }
  if (!path) {
    if (!k.warned_profile) log().warn("device {}: no profile written: {}", d.device, problem);
    k.warned_profile = true;
    return false;
  }
  kv_event([&] { trace_events::kv_profile_written(d.device, *path, d.profile_hash); });
  d.written_profile_path = *path;
  return true;
}

namespace {

// One profile this start will not be sized from: a warning naming it and why, and the trace event.
void ignore_profile(const DeviceKv& d, const std::string& problem) {
  log().warn("device {}: profile ignored: {}", d.device, problem);
  kv_event([&] { trace_events::kv_profile_ignored(d.device, d.previous_path, problem); });
}

// Why this start is not sized from profile `name`: a start it sized is known to have failed before its
// commit (policy::marker_failed). Markers of starts still running count for nothing: concurrent starts
// of one configuration are all sized. An entry under a marker's name that is no kvremap marker is one
// warning and counts for nothing.
std::optional<std::string> failed_start(const ProfileStore& store, const std::string& name, const DeviceKv& d) {
  std::optional<std::string> reason;
  for (const ProfileStore::Marker& m : store.markers(name, this_start(), wall_seconds())) {
    if (!m.problem.empty()) {
      log().warn("device {}: {}", d.device, m.problem);
      continue;
    }
    if (!m.failed || reason) continue;
    const std::string who = m.owner ? fmt::format("pid {} on host {}", m.owner->pid, policy::printable(m.owner->host))
                                    : std::string("a start");
    const bool foreign = m.owner && !policy::same_place(*m.owner, this_start());
    reason = fmt::format(
        "a start it sized ({}) never reached its commit ({}: {} is still there), so this start is sized by "
        "the engine; its commit rewrites the profile and removes that marker, and the next start is sized again",
        who,
        foreign ? fmt::format("its marker is older than {} minutes", policy::kForeignMarkerSeconds / 60)
                : std::string("failed, killed or crashed"),
        policy::printable(store.path_of(m.file)));
  }
  return reason;
}

}  // namespace

// Once per device, at its first memory query before the KV burst (or at its commit): the profile an
// earlier start of this configuration wrote, and the shift it asks for. An unusable one is one warning:
// a directory another user could write to (once per process: profiles are off), a file that is not
// this user's regular file, a corrupt one, one whose figures no start on this device could have
// measured, or one a start it sized never confirmed by reaching its commit.
void look_up_profile(KvState& k, DeviceKv& d) {
  if (d.lookup_done) return;
  d.lookup_done = true;
  const policy::Options& o = options();
  const ProfileDirectory dir = profile_dir();
  if (dir.path.empty()) return;
  const policy::ProfileKey key = profile_key(k, d.device);
  const std::string name = policy::profile_file_name(key);
  d.previous_path = dir.path + "/" + name;
  std::string problem;
  DirectoryProblem kind = DirectoryProblem::none;
  const std::optional<ProfileStore> store = ProfileStore::open(dir, false, &kind, &problem);
  if (!store && kind == DirectoryProblem::untrusted) {
    // Profiles are off for the process: no read-only layer is searched either.
    if (k.warned_profile) return;
    k.warned_profile = true;
    ignore_profile(d, problem);
    return;
  }
  if (!store && kind != DirectoryProblem::none) ignore_profile(d, problem);
  if (store) {
    problem.clear();
    d.previous = store->load(name, policy::key_text(key), &problem);
    if (!problem.empty()) ignore_profile(d, problem);
  }
  // Not in the writable directory: the read-only layers of KVREMAP_PROFILE_PATH, in order. A layer that
  // cannot be trusted, or a bad file in one, is one warning; the next layer is searched.
  if (!d.previous)
    for (const ProfileDirectory& layer : profile_layers()) {
      const std::optional<ProfileStore> read_only = ProfileStore::open(layer, false, &kind, &problem);
      if (!read_only) {
        if (kind != DirectoryProblem::none) ignore_profile(d, problem);
        continue;
      }
      d.previous_path = layer.path + "/" + name;
      problem.clear();
      d.previous = read_only->load(name, policy::key_text(key), &problem);
      if (!problem.empty()) ignore_profile(d, problem);
      if (d.previous) break;
    }
  if (!d.previous) {
    d.previous_path = dir.path + "/" + name;
    return;
  }
  if (const auto out_of_range = policy::profile_out_of_bounds(*d.previous, key.device_total_bytes)) {
    d.previous.reset();
    ignore_profile(d, "ignoring the profile " + policy::printable(d.previous_path) + ": " + *out_of_range);
    return;
  }
  if (o.sizing == policy::SizingWhen::engine) return;
  const auto not_applicable = policy::sizing_not_applicable(k.engine);
  std::string reason;
  if (not_applicable) {
    reason = *not_applicable;
  } else if (!d.previous->sizing_query) {
    reason = "the profile recorded no sizing query";
  } else if (const auto failed = store ? failed_start(*store, name, d) : std::nullopt) {
    reason = *failed;
    d.step.reset();
    log().warn("device {}: profile {} not used for sizing: {}", d.device, policy::printable(d.previous_path), reason);
    kv_event([&] { trace_events::kv_sizing_unchanged(d.device, d.previous_path, reason); });
    return;
  } else {
    d.step = policy::next_sizing(*d.previous, o.sizing, policy::memory_share(k.engine), real_device_total(d.device));
    if (d.step->shift_bytes != 0) return;
    reason = d.step->reason;
  }
  log().info("device {}: profile {} found; sizing left to the engine: {}", d.device, policy::printable(d.previous_path),
             reason);
  kv_event([&] { trace_events::kv_sizing_unchanged(d.device, d.previous_path, reason); });
}

bool profile_can_size_next_start(const KvState& k, const DeviceKv& d) {
  return options().sizing != policy::SizingWhen::engine && !policy::sizing_not_applicable(k.engine) &&
         sizing_query(d.device).has_value();
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
void restart_for_profile(KvState& k, DeviceKv& d, const policy::CommitPlan& plan, const policy::Headroom& headroom) {
  measure_profile(d, plan, headroom);
  if (!write_profile(k, d)) {
    log().warn(
        "device {}: KVREMAP_DEFICIT=restart: no profile could be written, so a restart would not be sized "
        "differently; the {} the device lacks goes to host memory",
        d.device, policy::format_bytes(plan.deficit_bytes));
    return;
  }
  kv_event([&] { trace_events::kv_restart(d.device, plan.deficit_bytes, policy::kExitRestartForProfile); });
  std::fprintf(stderr,
               "kvremap: device %d: the KV cache lacks %s on the device; its profile is written, exiting with status "
               "%d (KVREMAP_DEFICIT=restart): the next start is sized from it (kvremap run restarts once)\n",
               d.device, policy::format_bytes(plan.deficit_bytes).c_str(), policy::kExitRestartForProfile);
  finish("kv restart");
  std::_Exit(policy::kExitRestartForProfile);
}

std::string write_profile_before_stop(KvState& k, DeviceKv& d, const policy::CommitPlan& plan, const policy::Headroom& headroom) {
  // Unlike the restart, a start a profile already sized also writes: its figures are the newer ones,
  // and no automatic restart can loop on them.
  if (options().sizing == policy::SizingWhen::engine || policy::sizing_not_applicable(k.engine) ||
      !sizing_query(d.device))
    return "";
  measure_profile(d, plan, headroom);
  if (!write_profile(k, d)) return "";
  return "; this start's profile is written, so the same command started again is sized from it";
}

// After the commit: one line when a profile's shift did not reach the query the engine sized from.
void report_sizing_outcome(const DeviceKv& d) {
  if (!d.step || d.step->shift_bytes == 0) return;
  const auto q = sizing_query(d.device);
  if (d.shift_applied && q && q->index == d.applied_index) return;
  const policy::SizingQuery& recorded = *d.previous->sizing_query;
  const std::string what = d.shift_applied
                               ? fmt::format("the shift went to memory query {}, but the engine sized from query {}",
                                             d.applied_index, q ? std::to_string(q->index) : std::string("none"))
                               : fmt::format("no memory query {} in phase {} came (the engine's start-up changed)",
                                             recorded.index, recorded.phase);
  log().warn("device {}: the profile {} did not size this start: {}; the profile is rewritten from this start",
             d.device, policy::printable(d.previous_path), what);
  kv_event([&] { trace_events::kv_sizing_missed(d.device, d.previous_path, what); });
}

namespace {

// Before a profile's shift reaches the engine: its failed-start marker, cleared by write_profile at the
// commit. Without the marker the start is not sized (one warning): a failure could not be told apart.
bool mark_sized_start(KvState& k, DeviceKv& d) {
  std::string problem;
  DirectoryProblem kind = DirectoryProblem::none;
  // Created when missing: a start sized from a read-only layer's profile keeps its marker here.
  const std::optional<ProfileStore> store = ProfileStore::open(profile_dir(), true, &kind, &problem);
  if (store && store->mark(policy::profile_file_name(profile_key(k, d.device)), this_start(), &problem)) {
    d.marked = true;
    return true;
  }
  if (problem.empty()) problem = "the profile directory is gone";
  problem += "; this start is sized by the engine (a start sized from a profile needs its marker there, so that a "
             "failure before its commit is seen by the next start: make the profile directory writable)";
  log().warn("device {}: profile {} not used for sizing: {}", d.device, policy::printable(d.previous_path), problem);
  kv_event([&] { trace_events::kv_sizing_unchanged(d.device, d.previous_path, problem); });
  d.step.reset();
  return false;
}

}  // namespace

}  // namespace kvremap::interpose::kv_internal

namespace kvremap::interpose::kv_detail {
using namespace kv_internal;

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
  // The marker goes down before the engine sees the shifted figure: if this start fails, is killed or
  // crashes before its commit, the next one is not sized from this profile again.
  if (!mark_sized_start(k, d)) return reported;
  const std::uint64_t told = policy::shifted_free(reported, d.step->shift_bytes, total);
  d.shift_applied = true;
  d.applied_index = q.index;
  d.applied_shift = d.step->shift_bytes;
  kv_event([&] {
    trace_events::kv_sizing_adjusted({.device = device,
                                      .query_index = q.index,
                                      .phase = q.phase,
                                      .driver_free = reported,
                                      .reported_free = told,
                                      .shift_bytes = d.step->shift_bytes,
                                      .sizing = options().sizing,
                                      .previous_margin_bytes = d.previous->margin_bytes,
                                      .previous_shift_bytes = d.previous->sizing_shift_bytes,
                                      .slack_bytes = d.step->slack_bytes,
                                      .target_kv_bytes = d.step->target_kv_bytes,
                                      .step_bytes = d.step->step_bytes,
                                      .profile = d.previous_path,
                                      .reason = d.step->reason});
  });
  // At info level: the commit line says where the KV cache went, and a start that exits before its commit names
  // the profile behind it at the default level then (kv_at_exit).
  log().info("device {}: sizing this start from profile {} (shift {}): {}", device, policy::printable(d.previous_path),
             policy::format_bytes_signed(d.step->shift_bytes), d.step->reason);
  return told;
}

}  // namespace kvremap::interpose::kv_detail
