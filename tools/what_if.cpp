// Replays a traced start's measured needs through policy::plan_commit at another memory share (tools/what_if.h).
#include "tools/what_if.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <stdexcept>

#include "policy/engine.h"
#include "policy/sglang_model.h"
#include "policy/vllm_model.h"
#include "tools/report.h"
#include "tools/text.h"

namespace kvremap::what_if {
namespace {

std::uint64_t sum(const analysis::ByCategory& live) {
  std::uint64_t total = 0;
  for (const auto& [name, bytes] : live) total += bytes;
  return total;
}

bool after_kv_burst(const std::string& phase) {
  return phase == "post_kv_warmup" || phase == "capture" || phase == "serving";
}

std::string_view flag_name(ShareFlag flag) {
  return flag == ShareFlag::gpu_memory_utilization ? policy::kVllmShareFlag : policy::kSglangShareFlag;
}

// The traced start's share, given with the flag its engine sizes by.
double traced_share(const policy::EngineProfile& engine, const Settings& settings, const std::string& cmdline) {
  if (engine.kind == policy::EngineKind::vllm) {
    if (settings.flag != ShareFlag::gpu_memory_utilization)
      throw std::invalid_argument(fmt::format("the traced start is vLLM: replay it with {}", policy::kVllmShareFlag));
    const std::optional<double> share = policy::vllm_memory_share(engine);
    if (!share)
      throw std::invalid_argument(
          "the traced start gave its KV size (--kv-cache-memory): utilisation does not size it");
    return *share;
  }
  if (engine.kind == policy::EngineKind::sglang) {
    if (settings.flag != ShareFlag::mem_fraction_static)
      throw std::invalid_argument(
          fmt::format("the traced start is SGLang: replay it with {}", policy::kSglangShareFlag));
    if (!engine.mem_fraction_static)
      throw std::invalid_argument(
          "the traced SGLang start did not give --mem-fraction-static (SGLang then picks one by device size): the "
          "share it ran at is not in the trace");
    return *engine.mem_fraction_static;
  }
  throw std::invalid_argument(fmt::format("what-if models vLLM's {} and SGLang's {}; the traced command is neither ({})",
                                          policy::kVllmShareFlag, policy::kSglangShareFlag, cmdline));
}

}  // namespace

std::vector<Outcome> replay(const analysis::ProcessFigures& process, const Settings& settings) {
  // The line kvremap read the engine from (the process's own is a title in a renamed engine process). The
  // header joins it with spaces; the engine's flags never contain one.
  std::string nul_separated = process.header.engine_cmdline;
  std::replace(nul_separated.begin(), nul_separated.end(), ' ', '\0');
  const policy::EngineProfile engine = policy::profile_engine(policy::split_cmdline(nul_separated));
  const double measured_share = traced_share(engine, settings, process.header.engine_cmdline);
  std::vector<Outcome> outcomes;
  for (const analysis::DeviceFigures& d : process.devices) {
    const analysis::KvFigures& kv = d.kv;
    if (!kv.planned || kv.tensors == 0 || d.total_bytes == 0) continue;
    Outcome o;
    o.device = d.device;
    o.measured_utilization = measured_share;
    o.measured_kv_bytes = kv.kv_bytes;
    const std::uint64_t granularity = kv.granularity == 0 ? 1 : kv.granularity;
    o.kv_step_bytes = kv.tensors * granularity;
    // Both engines' KV size is linear in the share (policy/vllm_model.h, policy/sglang_model.h); a
    // profile's shift had moved this start's sizing query, so the unshifted size is the one the share gives.
    const auto requested = [&d](double share) {
      return static_cast<std::int64_t>(static_cast<double>(d.total_bytes) * share);
    };
    const std::int64_t unshifted = static_cast<std::int64_t>(kv.kv_bytes) + kv.sizing_shift_bytes;
    const std::int64_t raw = unshifted + requested(settings.share) - requested(o.measured_utilization);
    o.kv_bytes = raw <= 0 ? 0 : static_cast<std::uint64_t>(raw) / o.kv_step_bytes * o.kv_step_bytes;
    if (o.kv_bytes == 0)
      o.refused = engine.kind == policy::EngineKind::sglang ? policy::kSglangRefusalWithoutKv
                                                            : policy::kVllmRefusalWithoutKv;
    const auto first_query = std::find_if(process.checkpoints.begin(), process.checkpoints.end(),
                                          [&d](const trace::Checkpoint& c) { return c.device == d.device; });
    const auto asked = static_cast<std::uint64_t>(std::max<std::int64_t>(0, requested(settings.share)));
    if (engine.kind == policy::EngineKind::vllm && first_query != process.checkpoints.end() &&
        policy::vllm_refuses_at_start(first_query->driver_free, asked))
      o.refused = fmt::format("free memory at start-up ({}) is less than the share asked for ({}) (init)",
                              report::format_bytes(first_query->driver_free), report::format_bytes(asked));

    // Without deferral the KV cache is backed from the burst on; the scratch the traced start held
    // is memory stock has free. Each post-KV phase needs its peak above what was live at the plan.
    const std::uint64_t live_at_plan = sum(kv.live_at_plan);
    o.stock_available_bytes = kv.device_free_bytes + kv.scratch_bytes;
    std::uint64_t largest_transient = 0;
    for (const analysis::PhaseFigures& p : d.phases) {
      if (!after_kv_burst(p.phase) || (kv.plan_ts_us >= 0 && p.start_us > kv.plan_ts_us)) continue;
      // Signed: a phase that peaked below the plan's live bytes had more room than the plan saw.
      const std::int64_t transient = static_cast<std::int64_t>(p.peak_bytes) - static_cast<std::int64_t>(live_at_plan);
      if (transient > 0) largest_transient = std::max(largest_transient, static_cast<std::uint64_t>(transient));
      if (o.stock_oom_phase.empty() &&
          static_cast<std::int64_t>(o.kv_bytes) + transient > static_cast<std::int64_t>(o.stock_available_bytes))
        o.stock_oom_phase = p.phase;
    }
    largest_transient = std::max(largest_transient, kv.post_kv_transient_bytes);
    o.stock_need_bytes = o.kv_bytes + largest_transient;
    if (o.stock_oom_phase.empty() && o.stock_need_bytes > o.stock_available_bytes) o.stock_oom_phase = "post_kv_warmup";

    policy::CommitInputs in;
    in.tensor_bytes.assign(kv.tensors, o.kv_bytes / kv.tensors);
    in.granularity = kv.granularity;
    in.chunk_bytes = settings.chunk_bytes.value_or(0);
    in.device_free_bytes = kv.device_free_bytes;
    in.device_total_bytes = d.total_bytes;
    // The library keeps max(the profiled need, KVREMAP_HEADROOM); the trace knows the need only when it won.
    // The option, whether or not the commit counted live start-up work toward it (policy::kLiveStartUpSuffix).
    const bool from_option = kv.headroom_source.starts_with("KVREMAP_HEADROOM");
    const std::uint64_t profiled = from_option ? 0 : kv.headroom_bytes;
    o.headroom_bytes = settings.headroom_bytes ? std::max(profiled, *settings.headroom_bytes) : kv.headroom_bytes;
    if (settings.headroom_bytes && from_option &&
        *settings.headroom_bytes < kv.headroom_bytes)
      o.note = "the traced start's headroom was its KVREMAP_HEADROOM; the profiled need below it is not in the trace";
    in.headroom_bytes = o.headroom_bytes;
    const auto deficit = process.header.options.find("KVREMAP_DEFICIT");
    in.host_vmm_supported = true;
    in.deficit_mode = deficit != process.header.options.end() && deficit->second == "fail" ? policy::DeficitMode::fail
                                                                                           : policy::DeficitMode::host;
    in.post_kv_transient_bytes = kv.post_kv_transient_bytes;
    in.engine = engine.kind;
    if (engine.kind == policy::EngineKind::sglang) {
      in.mem_fraction_static = settings.share;
    } else {
      in.gpu_memory_utilization = settings.share;
    }
    o.plan = policy::plan_commit(in);
    if (settings.chunk_bytes && (*settings.chunk_bytes == 0 || *settings.chunk_bytes % granularity != 0))
      o.note = fmt::format(
          "KVREMAP_CHUNK_BYTES={} is not a multiple of the granularity ({}): the arena would refuse "
          "and the start would run as stock",
          *settings.chunk_bytes, report::format_bytes(granularity));
    outcomes.push_back(std::move(o));
  }
  if (outcomes.empty())
    throw std::invalid_argument(
        "no \"kv commit plan\" in the trace: what-if needs a start traced under KVREMAP_MODE=defer");
  return outcomes;
}

std::string render(const analysis::ProcessFigures& process, const Settings& settings,
                   const std::vector<Outcome>& outcomes) {
  using report::format_bytes;
  using report::format_signed_bytes;
  std::string out;
  cli::append(out, "{}: pid {}, traced at {} {:.2f}; replayed at {:.2f}\n", process.source,
                 process.header.pid, flag_name(settings.flag), outcomes.front().measured_utilization, settings.share);
  for (const Outcome& o : outcomes) {
    cli::append(out,
                   "device {}: KV {} or one step ({}) more: the engine rounds per tensor (traced start: {})\n",
                   o.device, format_bytes(o.kv_bytes), format_bytes(o.kv_step_bytes),
                   format_bytes(o.measured_kv_bytes));
    if (!o.refused.empty()) {
      cli::append(out, "  stock:   refuses to start: {}\n  kvremap: refuses likewise\n",
                     o.refused);
      continue;
    }
    if (o.stock_oom_phase.empty()) {
      cli::append(out, "  stock:   starts; needs {} (KV and the post-KV peak) of {} free\n",
                     format_bytes(o.stock_need_bytes), format_bytes(o.stock_available_bytes));
    } else {
      cli::append(out,
                     "  stock:   out of memory in {}: needs {} (KV and the post-KV peak), {} free\n", o.stock_oom_phase,
                     format_bytes(o.stock_need_bytes), format_bytes(o.stock_available_bytes));
    }
    const std::string_view verdict = policy::to_string(o.plan.verdict);
    cli::append(out, "  kvremap: {}: device {}, host {}, margin {} (headroom {})\n", verdict,
                   format_bytes(o.plan.device_bytes), format_bytes(o.plan.host_bytes),
                   format_signed_bytes(o.plan.margin_bytes), format_bytes(o.headroom_bytes));
    if (!o.note.empty()) cli::append(out, "  note: {}\n", o.note);
  }
  return out;
}

nlohmann::json render_json(const analysis::ProcessFigures& process, const Settings& settings,
                           const std::vector<Outcome>& outcomes) {
  nlohmann::json devices = nlohmann::json::array();
  for (const Outcome& o : outcomes) {
    const std::string_view verdict = policy::to_string(o.plan.verdict);
    devices.push_back({{"device", o.device},
                       {"kv_bytes", o.kv_bytes},
                       {"kv_step_bytes", o.kv_step_bytes},
                       {"measured_kv_bytes", o.measured_kv_bytes},
                       {"refused", o.refused},
                       {"stock",
                        {{"oom_phase", o.stock_oom_phase},
                         {"need_bytes", o.stock_need_bytes},
                         {"available_bytes", o.stock_available_bytes}}},
                       {"kvremap",
                        {{"verdict", verdict},
                         {"device_bytes", o.plan.device_bytes},
                         {"host_bytes", o.plan.host_bytes},
                         {"margin_bytes", o.plan.margin_bytes},
                         {"deficit_bytes", o.plan.deficit_bytes},
                         {"headroom_bytes", o.headroom_bytes}}},
                       {"note", o.note}});
  }
  const std::string flag = std::string(flag_name(settings.flag)).substr(2);
  std::string key = flag;
  std::replace(key.begin(), key.end(), '-', '_');
  return {{"source", process.source},
          {"share_flag", flag},
          {"measured_" + key, outcomes.front().measured_utilization},
          {key, settings.share},
          {"devices", devices}};
}

}  // namespace kvremap::what_if
