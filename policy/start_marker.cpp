// The per-start marker's name, text and failure judgement (policy/start_marker.h).
#include "policy/start_marker.h"

#include <algorithm>
#include <charconv>
#include <vector>

namespace kvremap::policy {
namespace {

constexpr std::string_view kFirstLine = "kvremap start marker 1";
constexpr std::string_view kUnconfirmed = ".unconfirmed";

bool printable_text(std::string_view s) {
  for (const char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  return true;
}

template <typename T>
std::optional<T> number(std::string_view s) {
  T v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

}  // namespace

bool same_place(const StartIdentity& a, const StartIdentity& b) {
  return !a.host.empty() && !a.boot_id.empty() && !a.pid_namespace.empty() && a.host == b.host &&
         a.boot_id == b.boot_id && a.pid_namespace == b.pid_namespace;
}

std::string marker_prefix(std::string_view profile) { return std::string(profile) + std::string(kUnconfirmed) + "."; }
std::string shared_marker_name(std::string_view profile) { return std::string(profile) + std::string(kUnconfirmed); }

std::string marker_file_name(std::string_view profile, const StartIdentity& who) {
  std::string host;
  for (const char c : who.host) {
    if (host.size() == 64) break;
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    host += keep ? c : '_';
  }
  if (host.empty()) host = "_";
  return marker_prefix(profile) + host + "." + std::to_string(who.pid) + "." + std::to_string(who.start_ticks);
}

std::string marker_text(const StartIdentity& who) {
  return std::string(kFirstLine) + "\nhost " + who.host + "\nboot_id " + who.boot_id + "\npid_namespace " +
         who.pid_namespace + "\npid " + std::to_string(who.pid) + "\nstart_ticks " + std::to_string(who.start_ticks) +
         "\n";
}

std::optional<StartIdentity> read_marker(std::string_view text, std::string* problem) {
  if (text.size() > kMaxMarkerBytes) {
    *problem = "larger than " + std::to_string(kMaxMarkerBytes) + " bytes: not a kvremap start marker";
    return std::nullopt;
  }
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    if (end == std::string_view::npos) {
      *problem = "its last line is unterminated: not a whole kvremap start marker";
      return std::nullopt;
    }
    lines.push_back(text.substr(0, end));
    text.remove_prefix(end + 1);
  }
  if (lines.size() != 6 || lines[0] != kFirstLine) {
    *problem = "not a kvremap start marker (its first line is not \"" + std::string(kFirstLine) + "\" or it is not 6 lines)";
    return std::nullopt;
  }
  StartIdentity who;
  const auto field = [&](std::size_t i, std::string_view name) -> std::optional<std::string_view> {
    const std::string_view line = lines[i];
    if (!line.starts_with(name) || line.size() <= name.size() || line[name.size()] != ' ' || !printable_text(line)) {
      *problem = "line " + std::to_string(i + 1) + " is not `" + std::string(name) + " VALUE`: not a kvremap start marker";
      return std::nullopt;
    }
    return line.substr(name.size() + 1);
  };
  const auto host = field(1, "host"), boot = field(2, "boot_id"), ns = field(3, "pid_namespace");
  if (!host || !boot || !ns) return std::nullopt;
  const auto pid_text = field(4, "pid"), ticks_text = field(5, "start_ticks");
  if (!pid_text || !ticks_text) return std::nullopt;
  const auto pid = number<std::int64_t>(*pid_text);
  const auto ticks = number<std::uint64_t>(*ticks_text);
  if (!pid || *pid <= 0 || !ticks) {
    *problem = "its pid or start_ticks is not a whole number: not a kvremap start marker";
    return std::nullopt;
  }
  who.host = std::string(*host);
  who.boot_id = std::string(*boot);
  who.pid_namespace = std::string(*ns);
  who.pid = *pid;
  who.start_ticks = *ticks;
  return who;
}

std::optional<std::uint64_t> start_ticks_from_stat(std::string_view stat) {
  const std::size_t close = stat.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view rest = stat.substr(close + 1);
  // Fields after the command: 3 (state) ... 22 (starttime): the 20th space-separated one.
  for (int field = 3;; ++field) {
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    const std::size_t end = std::min(rest.find(' '), rest.size());
    if (end == 0) return std::nullopt;
    if (field == 22) {
      std::string_view value = rest.substr(0, end);
      while (!value.empty() && value.back() == '\n') value.remove_suffix(1);
      return number<std::uint64_t>(value);
    }
    rest.remove_prefix(end);
  }
}

bool marker_failed(const StartIdentity& owner, const StartIdentity& here, std::optional<std::uint64_t> owner_ticks_now,
                   std::int64_t age_seconds) {
  if (same_place(owner, here)) {
    if (owner.pid == here.pid && owner.start_ticks == here.start_ticks) return true;
    return !owner_ticks_now || *owner_ticks_now != owner.start_ticks;
  }
  return age_seconds > kForeignMarkerSeconds;
}

}  // namespace kvremap::policy
