// `kvremap size`'s view of a start in progress: the `kv` events of every new trace, read as they are appended.
#include "tools/sizing_watch.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "policy/json_depth.h"
#include "policy/units.h"
#include "tools/text.h"

namespace kvremap::run {
namespace {

namespace fs = std::filesystem;

// The deepest `kv` event the library writes nests 3 levels; anything deeper is not one of them.
constexpr std::size_t kMaxKvEventDepth = 8;

std::uint64_t unsigned_field(const nlohmann::json& args, const char* name) {
  const auto it = args.find(name);
  return it != args.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
}

std::string text_field(const nlohmann::json& args, const char* name) {
  const auto it = args.find(name);
  return it != args.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

void SizingWatch::feed_line(const std::string& trace, std::string_view line) {
  if (line.find(R"("cat":"kv")") == std::string_view::npos) return;  // most lines: no parse
  if (line.starts_with(',')) line.remove_prefix(1);
  if (policy::json_nested_deeper_than(line, kMaxKvEventDepth)) return;
  const nlohmann::json event = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!event.is_object() || event.value("cat", "") != "kv") return;
  const std::string name = event.value("name", "");
  const nlohmann::json args = event.contains("args") && event["args"].is_object() ? event["args"] : nlohmann::json::object();
  if (name == "kv nothing deferred" || name == "kv observe only" || name == "kv stands aside") {
    if (nothing_deferred_.empty()) {
      nothing_deferred_ = name == "kv stands aside"
                              ? "another interposer (" + text_field(args, "library") + ") allocates through " +
                                    text_field(args, "api")
                              : text_field(args, "reason");
    }
    return;
  }
  const auto device_field = args.find("device");
  if (device_field == args.end() || !device_field->is_number_integer()) return;
  const int device = device_field->get<int>();
  SizedDevice& d = devices_[{trace, device}];
  d.trace = trace;
  d.device = device;
  if (name == "kv deferred") {
    d.deferred = true;
  } else if (name == "kv committed") {
    d.committed = true;
    d.kv_bytes = unsigned_field(args, "kv_bytes");
    d.device_bytes = unsigned_field(args, "device_bytes");
    d.host_bytes = unsigned_field(args, "host_bytes");
  } else if (name == "kv profile written" && d.committed) {
    d.profile_written = true;
    d.profile = text_field(args, "path");
  }
}

void SizingWatch::poll(const std::string& directory, const std::set<std::string>& before) {
  std::error_code ec;
  for (fs::directory_iterator it(directory, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with("kvremap-") || !name.ends_with(".json") || before.contains(name)) continue;
    const std::string path = it->path().string();
    Tail& tail = tails_[path];
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) continue;
    char buffer[1 << 16];
    for (;;) {
      const ssize_t n = pread(fd, buffer, sizeof buffer, static_cast<off_t>(tail.offset));
      if (n <= 0) break;
      tail.offset += static_cast<std::uint64_t>(n);
      tail.partial.append(buffer, static_cast<std::size_t>(n));
      std::size_t start = 0;
      for (std::size_t newline; (newline = tail.partial.find('\n', start)) != std::string::npos; start = newline + 1)
        feed_line(path, std::string_view(tail.partial).substr(start, newline - start));
      tail.partial.erase(0, start);
      // A line longer than any kv event cannot become one: drop it rather than hold it.
      if (tail.partial.size() > (std::size_t{1} << 20)) tail.partial.clear();
    }
    close(fd);
  }
}

bool SizingWatch::measured() const {
  bool any = false;
  for (const auto& [key, d] : devices_) {
    if (!d.deferred) continue;
    if (!d.profile_written) return false;
    any = true;
  }
  return any;
}

std::uint64_t SizingWatch::progress() const {
  std::uint64_t steps = 0;
  for (const auto& [key, d] : devices_) steps += d.deferred + d.committed + d.profile_written;
  return steps;
}

std::vector<SizedDevice> SizingWatch::devices() const {
  std::vector<SizedDevice> out;
  for (const auto& [key, d] : devices_)
    if (d.deferred) out.push_back(d);
  return out;
}

std::string sizing_line(const std::vector<SizedDevice>& devices) {
  std::vector<const SizedDevice*> measured;
  for (const SizedDevice& d : devices)
    if (d.profile_written) measured.push_back(&d);
  if (measured.empty()) return "nothing measured: no process committed its KV cache";
  const auto host_text = [](std::uint64_t bytes) {
    return bytes == 0 ? std::string("none on host memory") : policy::format_bytes(bytes) + " on host memory";
  };
  std::string line;
  if (measured.size() == 1) {
    const SizedDevice& d = *measured.front();
    cli::append(line, "measured 1 process: device {} holds {} of KV on the device, {}; profile written: {}", d.device,
                policy::format_bytes(d.device_bytes), host_text(d.host_bytes), d.profile);
    return line;
  }
  std::uint64_t least = UINT64_MAX, most = 0, host = 0;
  std::set<std::string> directories;
  for (const SizedDevice* d : measured) {
    least = std::min(least, d->device_bytes);
    most = std::max(most, d->device_bytes);
    host += d->host_bytes;
    directories.insert(fs::path(d->profile).parent_path().string());
  }
  std::string where;
  for (const std::string& dir : directories) where += (where.empty() ? "" : ", ") + dir;
  const std::string held = least == most ? policy::format_bytes(least)
                                         : policy::format_bytes(least) + " to " + policy::format_bytes(most);
  cli::append(line, "measured {} processes: each holds {} of KV on the device, {} in all; {} profiles written in {}",
              measured.size(), held, host_text(host), measured.size(), where);
  return line;
}

}  // namespace kvremap::run
