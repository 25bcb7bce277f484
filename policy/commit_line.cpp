// The one line a process prints at its KV commit.
#include "policy/commit_line.h"

#include <cstdio>

#include "policy/printable.h"
#include "policy/units.h"

namespace kvremap::policy {
namespace {

std::string percent(std::uint64_t part, std::uint64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  return buf;
}

}  // namespace

std::string commit_line(const CommitLineFacts& f) {
  std::string line = "device " + std::to_string(f.device) + ": KV cache committed: " + format_bytes(f.kv_bytes);
  if (f.host_bytes == 0) {
    line += ", all on the device";
    if (f.margin_bytes >= 0) line += " (" + format_bytes(static_cast<std::uint64_t>(f.margin_bytes)) + " to spare)";
    return line;
  }
  const std::uint64_t device_bytes = f.kv_bytes - f.host_bytes;
  line += ": " + format_bytes(device_bytes) + " (" + percent(device_bytes, f.kv_bytes) + ") on the device, " +
          format_bytes(f.host_bytes) + " (" + percent(f.host_bytes, f.kv_bytes) + ") on host memory";
  if (f.tensors > 1 && f.host_bytes_per_tensor > 0)
    line += " (the last " + format_bytes(f.host_bytes_per_tensor) + " of each of " + std::to_string(f.tensors) +
            " KV tensors)";
  else if (f.tensors == 1)
    line += " (the end of the one KV allocation: with a layer-major layout as vLLM's, whole last layers that every "
            "forward pass reads from host memory)";
  line += ": requests that reach those blocks run slower. ";
  if (!f.profile_path.empty() && f.profile_sizes_next)
    line += "The next start of this configuration is sized from profile " + printable(f.profile_path) +
            " and keeps its KV cache on the device; `kvremap size -- <command>` makes that start ahead of serving.";
  else if (!f.flag_hint.empty())
    line += "To keep it all on the device: " + f.flag_hint + ".";
  else
    line += "A lower memory share for the engine keeps it all on the device.";
  return line;
}

}  // namespace kvremap::policy
