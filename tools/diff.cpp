// Compares two processes' figures phase by phase and category by category (tools/diff.h).
#include "tools/diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <set>

#include "tools/report.h"
#include "tools/text.h"

namespace kvremap::diff {
namespace {

std::int64_t signed_of(std::uint64_t bytes) { return static_cast<std::int64_t>(bytes); }

std::uint64_t at(const analysis::ByCategory& table, const std::string& name) {
  const auto found = table.find(name);
  return found == table.end() ? 0 : found->second;
}

const analysis::PhaseFigures* phase_named(const analysis::DeviceFigures& d, const std::string& phase) {
  // A phase can recur only in a malformed trace; the last one counts, as it ends the start-up.
  const analysis::PhaseFigures* found = nullptr;
  for (const auto& p : d.phases)
    if (p.phase == phase) found = &p;
  return found;
}

}  // namespace

std::vector<Row> compare(const analysis::DeviceFigures& a, const analysis::DeviceFigures& b) {
  std::vector<Row> rows;
  const auto add = [&rows](std::string what, std::int64_t x, std::int64_t y) {
    if (x != 0 || y != 0) rows.push_back({std::move(what), x, y});
  };
  std::vector<std::string> phases;
  for (const auto& p : a.phases) phases.push_back(p.phase);
  for (const auto& p : b.phases)
    if (std::find(phases.begin(), phases.end(), p.phase) == phases.end()) phases.push_back(p.phase);
  const analysis::PhaseFigures none;
  for (const std::string& phase : phases) {
    const analysis::PhaseFigures* pa = phase_named(a, phase);
    const analysis::PhaseFigures* pb = phase_named(b, phase);
    const analysis::PhaseFigures& x = pa ? *pa : none;
    const analysis::PhaseFigures& y = pb ? *pb : none;
    add(phase + ": peak, all categories", signed_of(x.peak_bytes), signed_of(y.peak_bytes));
    std::set<std::string> names;
    for (const auto* table : {&x.peak_by_category, &y.peak_by_category, &x.live_at_end, &y.live_at_end})
      for (const auto& [name, bytes] : *table) names.insert(name);
    for (const std::string& name : names) {
      add(phase + ": " + name + " peak", signed_of(at(x.peak_by_category, name)),
          signed_of(at(y.peak_by_category, name)));
      add(phase + ": " + name + " at end", signed_of(at(x.live_at_end, name)), signed_of(at(y.live_at_end, name)));
    }
  }
  add("kv: size", signed_of(a.kv.kv_bytes), signed_of(b.kv.kv_bytes));
  add("kv: on the device", signed_of(a.kv.device_bytes), signed_of(b.kv.device_bytes));
  add("kv: on the host", signed_of(a.kv.host_bytes), signed_of(b.kv.host_bytes));
  add("kv: commit margin", a.kv.margin_bytes, b.kv.margin_bytes);
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& x, const Row& y) { return std::llabs(x.delta()) > std::llabs(y.delta()); });
  return rows;
}

std::string render_diff(const analysis::ProcessFigures& a, const analysis::ProcessFigures& b) {
  std::string out;
  cli::append(out, "A: {} (pid {})\nB: {} (pid {})\n", a.source, a.header.pid, b.source,
                 b.header.pid);
  // Devices pair by position: two ranks of one job use different device numbers.
  const std::size_t pairs = std::min(a.devices.size(), b.devices.size());
  if (pairs == 0) out += "no device memory recorded in one of them\n";
  if (a.devices.size() != b.devices.size())
    cli::append(out, "A has {} devices, B {}; the first {} are compared\n", a.devices.size(),
                   b.devices.size(), pairs);
  for (std::size_t i = 0; i < pairs; ++i) {
    const analysis::DeviceFigures& da = a.devices[i];
    const analysis::DeviceFigures& db = b.devices[i];
    cli::append(out, "\ndevice {} (A) against device {} (B)\n", da.device, db.device);
    cli::append(out,
                   "  KV: A {} ({} device, {} host, margin {}), B {} ({} device, {} host, margin {})\n",
                   report::format_bytes(da.kv.kv_bytes), report::format_bytes(da.kv.device_bytes),
                   report::format_bytes(da.kv.host_bytes), report::format_signed_bytes(da.kv.margin_bytes),
                   report::format_bytes(db.kv.kv_bytes), report::format_bytes(db.kv.device_bytes),
                   report::format_bytes(db.kv.host_bytes), report::format_signed_bytes(db.kv.margin_bytes));
    cli::append(out, "  {:<40} {:>12} {:>12} {:>13}\n", "figure", "A", "B", "B - A");
    for (const Row& row : compare(da, db)) {
      const auto bytes = [](std::int64_t v) {
        return v < 0 ? report::format_signed_bytes(v) : report::format_bytes(static_cast<std::uint64_t>(v));
      };
      cli::append(out, "  {:<40} {:>12} {:>12} {:>13}\n", row.what, bytes(row.a), bytes(row.b),
                     row.delta() == 0 ? std::string("=") : report::format_signed_bytes(row.delta()));
    }
  }
  return out;
}

}  // namespace kvremap::diff
