// The commit: the plan from what start-up work measured (policy/commit_plan), each KV tensor backed as planned, the
// stop when it cannot be.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "interpose/base/library.h"
#include "interpose/base/serving_flag.h"
#include "interpose/driver/driver_api.h"
#include "interpose/kv/kv_state.h"
#include "interpose/trace/kv_events.h"
#include "interpose/track/tracker.h"
#include "policy/commit_line.h"
#include "policy/serving_headroom.h"
#include "policy/sglang_model.h"
#include "policy/units.h"

namespace kvremap::interpose::kv_internal {
namespace {

// The commit's own exit status when the KV cache cannot be backed (docs/kv-deferral.md): not 1, which
// engines use for any error.
constexpr int kExitKvDoesNotFit = 78;

[[noreturn]] void stop(const std::string& message, int status) {
  std::fprintf(stderr, "%s\n", message.c_str());
  finish("kv commit failed");
  std::_Exit(status);
}

// Device memory serving needs free beside the KV cache (policy/serving_headroom.h): engines that
// profile run the profiled forward passes again; SGLang serves from its own reserve (what
// --mem-fraction-static leaves, less what it allocated beside KV since its sizing query and still holds: its
// req_to_token table, workspaces, graphs), at least
// its own prefill estimate where the deferral carried the start-up and no start of this configuration
// measured serving yet; a profile's learned serving need, where larger, in either case.
// `reason`: what commits now.
policy::Headroom serving_headroom(const DeviceKv& k, std::uint64_t free_bytes, std::uint64_t total,
                                  policy::CommitReason reason) {
  const KvState& state = K();
  policy::HeadroomInputs in;
  in.engine = state.engine.kind;
  in.floor_bytes = options().headroom_bytes;
  if (in.engine == policy::EngineKind::sglang) {
    const std::uint64_t kv = k.deferred_bytes;
    const std::uint64_t reserve = policy::sglang_reserve_bytes(state.engine, total, sizing_free_bytes(k.device), kv);
    // The reserve pays for all the engine allocated beside KV since it sized the pool: its req_to_token table
    // before the pool, then graphs, workspaces and modules after it.
    const std::uint64_t held = held_since_sizing_bytes(k.device);
    in.sglang_reserve_bytes = reserve > held ? reserve - held : 0;
    const std::uint64_t resident = post_kv_needs(k.device).resident_growth;
    const policy::SglangPrefillEstimate estimate = policy::sglang_prefill_estimate(state.engine, total);
    in.sglang_prefill_estimate_bytes = estimate.bytes;
    in.sglang_prefill_basis = estimate.basis;
    // Without kvremap the KV cache would have been backed since its burst: free then was what is free now
    // (KV on scratch) plus what post-KV work has kept since, less the KV cache. The deferral carried the
    // start-up when post-KV work at its highest needed more than that.
    const std::uint64_t free_at_burst_end = free_bytes + resident;
    in.deferral_carried_start_up =
        free_at_burst_end < kv || free_at_burst_end - kv < post_kv_combined_rise(k.device);
  } else {
    in.profiled_peak_bytes = profiling_peak_bytes(k.device);
    // At a kernel launch before any capture and before the serving port opened, start-up work may still be
    // running (a compile warm-up's forward, an eager engine's first kernel): what it holds now is allocated
    // already, and counts toward the headroom once. A copy or an export of KV (a connector registering it) is
    // no such work: what is allocated then stays beside the headroom.
    const bool at_start_up_launch = reason == policy::CommitReason::kv_launch_before_capture ||
                                    reason == policy::CommitReason::launch_without_graphs ||
                                    reason == policy::CommitReason::first_launch;
    if (at_start_up_launch && !k.trigger.captured() && !serving_flag_set())
      in.live_start_up_bytes = post_kv_needs(k.device).resident_growth;
  }
  if (k.previous) in.learned_serving_bytes = k.previous->serving_peak_bytes;
  return policy::serving_headroom(in);
}

}  // namespace

trace_events::PostKvPeaks post_kv_peaks(int device) {
  const auto windows = post_kv_windows(device);
  trace_events::PostKvPeaks peaks{};
  for (std::size_t i = 0; i < windows.size(); ++i) peaks[i] = {windows[i].at_start, windows[i].peak};
  return peaks;
}

// `reason`: the decision point that committed; `call`: the API at that point, for the trace.
void commit_locked(DeviceKv& k, policy::CommitReason reason, const char* call) {
  if (!real_synchronize())
    stop(
        "kvremap: cannot commit the KV cache: synchronising the device failed; stopping rather than serving from "
        "scratch memory",
        kExitKvDoesNotFit);
  std::size_t free_bytes = 0, total = 0;
  if (!real_memory_info(&free_bytes, &total))
    stop("kvremap: cannot commit the KV cache: cuMemGetInfo failed; stopping rather than serving from scratch memory",
         kExitKvDoesNotFit);
  const policy::Options& o = options();
  const KvState& state = K();
  policy::CommitInputs in;
  for (const Placement& r : k.regions)
    if (r.kv) in.tensor_bytes.push_back(k.arena->region_bytes(r.base));
  in.granularity = k.arena->granularity();
  in.chunk_bytes = o.chunk_bytes;
  in.device_free_bytes = free_bytes;
  in.device_total_bytes = total;
  look_up_profile(K(), k);
  const policy::Headroom headroom = serving_headroom(k, free_bytes, total, reason);
  in.headroom_bytes = headroom.bytes;
  in.host_vmm_supported = real_host_vmm_supported(k.device);
  in.deficit_mode = policy::deficit_mode(o.deficit);
  in.post_kv_transient_bytes = post_kv_needs(k.device).transient;
  in.engine = state.engine.kind;
  in.gpu_memory_utilization = state.engine.gpu_memory_utilization;
  in.mem_fraction_static = state.engine.mem_fraction_static;
  in.kv_cache_memory = state.engine.kv_cache_memory;
  const policy::CommitPlan plan = policy::plan_commit(in);
  kv_event([&] {
    trace_events::kv_commit_plan({.device = k.device,
                                  .kv_bytes = plan.kv_bytes,
                                  .device_bytes = plan.device_bytes,
                                  .host_bytes = plan.host_bytes,
                                  .tensors = plan.tensors.size(),
                                  .host_bytes_per_tensor = plan.host_bytes_per_tensor,
                                  .granularity = in.granularity,
                                  .chunk_bytes = in.chunk_bytes,
                                  .device_free_bytes = free_bytes,
                                  .headroom_bytes = in.headroom_bytes,
                                  .headroom_source = headroom.source,
                                  .post_kv_transient_bytes = in.post_kv_transient_bytes,
                                  .margin_bytes = plan.margin_bytes,
                                  .deficit_bytes = plan.deficit_bytes,
                                  .verdict = plan.verdict});
  });
  if (plan.deficit_bytes > 0 && o.deficit == policy::DeficitWhen::restart && restart_would_help(state, k))
    restart_for_profile(K(), k, plan, headroom);
  if (plan.verdict == policy::CommitVerdict::fail)
    stop(plan.message + write_profile_before_stop(K(), k, plan, headroom), kExitKvDoesNotFit);
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
                       r.base, static_cast<int>(first), real_error_name(first)),
           kExitKvDoesNotFit);
    host_per_tensor = std::max(host_per_tensor, k.arena->host_bytes(r.base));
  }
  if (moved_to_host > 0)
    log().warn(
        "device {}: the device refused {} of the planned tensor shares at the commit; those tensors are "
        "wholly on host memory",
        k.device, moved_to_host);
  const bool scratch_released = k.arena->release_scratch();
  k.committed = true;
  k.commit_reason = reason;
  k.committed_before_captures = state.engine.graphs_expected && !k.trigger.captured() && !serving_flag_set();
  k.trigger.committed();
  refresh_counts(K());
  const std::uint64_t host_bytes = k.arena->host_bytes();
  const std::int64_t shift = effective_shift(k);
  const std::string same_start_flags = policy::same_start_flags(state.engine, shift, plan.kv_bytes, total);
  kv_event([&] {
    trace_events::kv_committed({.device = k.device,
                                .trigger = reason,
                                .call = call,
                                .kv_bytes = plan.kv_bytes,
                                .device_bytes = plan.kv_bytes - host_bytes,
                                .host_bytes = host_bytes,
                                .tensors = plan.tensors.size(),
                                .host_bytes_per_tensor = host_per_tensor,
                                .granularity = in.granularity,
                                .headroom_bytes = in.headroom_bytes,
                                .margin_bytes = plan.margin_bytes,
                                .deficit_bytes = plan.deficit_bytes,
                                .scratch_released = scratch_released,
                                .sizing_shift_bytes = shift,
                                .same_start_flags = same_start_flags,
                                .post_kv_peaks = post_kv_peaks(k.device)});
  });
  report_sizing_outcome(k);
  measure_profile(k, plan, headroom);
  // From here the same peaks measure serving, for the exit's "kv serving peaks".
  start_post_kv_peaks(k.device, false);
  const bool profile_written = write_profile(K(), k);
  log().info("device {}: KV committed before {} ({})", k.device, call, policy::to_string(reason));
  // At the default log level, one line per commit: where the KV cache is, and what to do about a host part.
  const bool sizes_next = profile_can_size_next_start(K(), k);
  notice(policy::commit_line({.device = k.device,
                              .kv_bytes = plan.kv_bytes,
                              .host_bytes = host_bytes,
                              .margin_bytes = plan.margin_bytes,
                              .tensors = plan.tensors.size(),
                              .host_bytes_per_tensor = host_per_tensor,
                              .profile_path = profile_written ? k.written_profile_path : std::string(),
                              .profile_sizes_next = sizes_next,
                              .flag_hint = plan.next_start_hint}));
  // The commit line above said where the KV cache went and what the next start does: the plan's own account is
  // detail, and where a profile sizes the next start, its advice to change a flag would contradict that line.
  std::string detail = plan.message;
  const std::string advice = "; " + plan.next_start_hint;
  if (profile_written && sizes_next && !plan.next_start_hint.empty() && detail.ends_with(advice))
    detail.resize(detail.size() - advice.size());
  if (host_bytes != plan.host_bytes) {
    log().warn("{} (placed: {:.2f} GiB on host memory)", detail,
               static_cast<double>(host_bytes) / static_cast<double>(1ULL << 30));
  } else {
    log().info("{}", detail);
  }
}

}  // namespace kvremap::interpose::kv_internal
