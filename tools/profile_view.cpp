// `kvremap profile list` and `show`: the profiles of each directory as rows, one profile's figures in human units.
#include <algorithm>
#include <array>
#include <ctime>

#include "policy/events.h"
#include "policy/units.h"
#include "tools/exit_status.h"
#include "tools/profile_actions.h"
#include "tools/text.h"

namespace kvremap::cli {
namespace {

std::string layer_title(const ProfileLayer& layer) {
  return text("{} ({}, from {})", layer.path, layer.writable ? "written" : "read-only", layer.origin);
}

std::string utc_time(std::int64_t seconds) {
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  if (gmtime_r(&t, &tm) == nullptr) return std::to_string(seconds);
  char out[32];
  std::strftime(out, sizeof out, "%Y-%m-%d %H:%M UTC", &tm);
  return out;
}

// Columns as wide as their widest cell; RANK, KV and AGE right-aligned; every cell shown() (a device name
// or a model argument is the engine's text).
std::string table(const std::vector<std::array<std::string, 7>>& rows) {
  std::array<std::size_t, 7> width{};
  std::vector<std::array<std::string, 7>> shown_rows;
  for (const auto& row : rows) {
    auto& cells = shown_rows.emplace_back();
    for (std::size_t i = 0; i < row.size(); ++i) {
      cells[i] = policy::printable(row[i]);
      width[i] = std::max(width[i], cells[i].size());
    }
  }
  std::string out;
  for (const auto& cells : shown_rows) {
    std::string line;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const bool right = i >= 3 && i <= 5;
      const std::string pad(width[i] - cells[i].size(), ' ');
      line += "  " + (right ? pad + cells[i] : i + 1 == cells.size() ? cells[i] : cells[i] + pad);
    }
    out += line + "\n";
  }
  return out;
}

std::string signed_bytes(std::int64_t v) {
  const std::uint64_t magnitude = v < 0 ? static_cast<std::uint64_t>(-(v + 1)) + 1 : static_cast<std::uint64_t>(v);
  return (v < 0 ? "-" : "") + policy::format_bytes(magnitude);
}

}  // namespace

std::string key_summary(const policy::KeyParts& parts) {
  return text("{}  {}  {} ({})  rank {}", policy::key_engine(parts), policy::key_model(parts), parts.device_name,
              policy::format_bytes(parts.device_total_bytes), parts.rank);
}

int profile_list(const std::vector<ProfileLayer>& layers, bool explicit_dir) {
  int status = kExitOk;
  const std::int64_t now = now_seconds();
  for (const ProfileLayer& layer : layers) {
    std::string problem;
    const auto store = open_layer(layer, &problem);
    if (!store) {
      std::printf("%s: %s\n", layer_title(layer).c_str(), policy::printable(problem).c_str());
      if (explicit_dir) status = kExitTraceProblem;
      continue;
    }
    std::vector<ProfileEntry> entries = judge_entries(*store, now);
    std::size_t profiles = 0, unusable = 0;
    for (const ProfileEntry& e : entries) {
      profiles += e.profile ? 1 : 0;
      unusable += e.kind == EntryKind::profile && !e.profile ? 1 : 0;
    }
    std::string out = text("{}: {} profile{}", layer_title(layer), profiles, profiles == 1 ? "" : "s");
    if (unusable) append(out, ", {} unusable (kvremap profile verify says why)", unusable);
    out += "\n";
    if (profiles) {
      std::vector<std::array<std::string, 7>> rows = {{"ENGINE", "MODEL", "DEVICE", "RANK", "KV", "AGE", "FILE"}};
      for (const ProfileEntry& e : entries) {
        if (!e.profile) continue;
        const policy::KeyParts& k = *e.parts;
        rows.push_back({policy::key_engine(k), policy::key_model(k),
                        text("{} ({})", k.device_name, policy::format_bytes(k.device_total_bytes)),
                        std::to_string(k.rank), policy::format_bytes(e.profile->kv_requested_bytes),
                        policy::format_age(now - e.profile->written_at), e.name});
      }
      out += table(rows);
    }
    std::fputs(out.c_str(), stdout);
  }
  return status;
}

int profile_show(const std::string& file_or_name, const std::vector<ProfileLayer>& layers) {
  std::string found_in;
  const ProfileEntry e = read_one_profile(file_or_name, layers, &found_in);
  if (!e.profile) {
    say("profile show", e.problem);
    return kExitTraceProblem;
  }
  const policy::Profile& p = *e.profile;
  const policy::KeyParts& k = *e.parts;
  const std::int64_t now = now_seconds();
  std::string out;
  append(out, "{}/{}\n", found_in, e.name);
  append(out, "  engine        {}\n  model         {}\n", policy::key_engine(k), policy::key_model(k));
  append(out, "  device        {} ({}), rank {}, driver {}\n", k.device_name, policy::format_bytes(k.device_total_bytes),
         k.rank, k.driver_version);
  std::string command;
  for (const std::string& arg : k.argv) command += (command.empty() ? "" : " ") + arg;
  append(out, "  command       {}\n", command);
  if (!k.config.empty()) append(out, "  config        {}\n", k.config);
  for (const std::string& variable : k.environment) append(out, "  environment   {}\n", variable);
  for (const std::string& module : k.software) append(out, "  software      {}\n", module);
  append(out, "  measured      {} ({} ago); written {}\n", utc_time(p.measured_at), policy::format_age(now - p.measured_at),
         utc_time(p.written_at));
  append(out, "  KV requested  {} in {} tensor{} (granularity {})\n", policy::format_bytes(p.kv_requested_bytes),
         p.kv_tensors, p.kv_tensors == 1 ? "" : "s", policy::format_bytes(p.granularity_bytes));
  append(out, "  margin        {}{}\n", signed_bytes(p.margin_bytes), p.margin_bytes < 0 ? " (a deficit)" : "");
  append(out, "  headroom      {}", policy::format_bytes(p.headroom_bytes));
  if (p.headroom_measured_bytes) append(out, " ({} of it measured)", policy::format_bytes(*p.headroom_measured_bytes));
  out += "\n";
  append(out, "  sizing shift  {}\n", signed_bytes(p.sizing_shift_bytes));
  if (p.memory_share) append(out, "  memory share  {:.2f}\n", *p.memory_share);
  if (p.sizing_query)
    append(out, "  sizing query  #{} in {}, the driver reported {} free\n", p.sizing_query->index, p.sizing_query->phase,
           policy::format_bytes(p.sizing_query->device_free_bytes));
  else
    out += "  sizing query  none recognised (the profile cannot size a start)\n";
  append(out, "  serving peak  {}\n", p.serving_peak_bytes ? policy::format_bytes(*p.serving_peak_bytes) : "not measured");
  for (std::size_t i = 0; i < p.post_kv.size(); ++i) {
    const policy::PostKvPeak& peak = p.post_kv[i];
    if (peak.resident_bytes == 0 && peak.transient_bytes == 0) continue;
    append(out, "  after KV      {}: {} held, {} more at its peak\n", policy::to_string(static_cast<policy::Category>(i)),
           policy::format_bytes(peak.resident_bytes), policy::format_bytes(peak.transient_bytes));
  }
  std::fputs(out.c_str(), stdout);
  return kExitOk;
}

}  // namespace kvremap::cli
