// A sized start's marker beside its profile: who wrote it, its text, and whether its start failed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvremap::policy {

// A marker of another host (or of this host's other boot or PID namespace, whose processes this start
// cannot see) counts as a failed start once it is older than this: no start-up takes longer from its
// sizing query to its commit (weights are loaded before the sizing query; graph capture and warm-up
// after it take minutes). Younger, it counts as a start still running.
inline constexpr std::int64_t kForeignMarkerSeconds = 30 * 60;
// Larger files are not markers; a marker is a few lines.
inline constexpr std::size_t kMaxMarkerBytes = 4096;

// Where a process's pid means something, and which process it is: the host name, the kernel's boot id,
// the PID namespace (its /proc/self/ns/pid link), the pid and the process's start time in clock ticks
// since boot (/proc/<pid>/stat field 22), so a reused pid is told apart. Empty texts where unknown.
struct StartIdentity {
  std::string host;
  std::string boot_id;
  std::string pid_namespace;
  std::int64_t pid = 0;
  std::uint64_t start_ticks = 0;
  bool operator==(const StartIdentity&) const = default;
};

// Whether `a` and `b` can see each other's processes: same host name, boot and PID namespace, all known.
bool same_place(const StartIdentity& a, const StartIdentity& b);

// The marker's file name for profile `profile`: `<profile>.unconfirmed.<host>.<pid>.<start ticks>`, the
// host with every character but letters, digits and '-' as '_' and at most 64 of them. One per start.
std::string marker_file_name(std::string_view profile, const StartIdentity& who);
// `<profile>.unconfirmed.`: every marker of the profile begins with it.
std::string marker_prefix(std::string_view profile);
// `<profile>.unconfirmed`: the one marker a profile had before markers were per start; it names no
// start, so it counts as failed.
std::string shared_marker_name(std::string_view profile);

// The marker's text: a first line saying what it is, then `host`, `boot_id`, `pid_namespace`, `pid`,
// `start_ticks` lines.
std::string marker_text(const StartIdentity& who);
// The identity in a marker's text, or nothing with `problem` set (one line) when the text is not one
// kvremap wrote: too large, another first line, a field missing or malformed, control characters.
std::optional<StartIdentity> read_marker(std::string_view text, std::string* problem);

// The start time in clock ticks of the process whose /proc/<pid>/stat text this is (field 22, counted
// after the command's closing parenthesis, which may itself hold spaces and parentheses).
std::optional<std::uint64_t> start_ticks_from_stat(std::string_view stat);

// Whether the start that wrote marker `owner` failed, judged by a start `here`:
// - of the same place (same_place): failed when its pid now runs a process of another start time, or
//   none (`owner_ticks_now` empty), or when it is `here` itself (an earlier program this process ran
//   before an exec marked it and never committed);
// - else: failed once the marker is older than kForeignMarkerSeconds (`age_seconds`, from the file's
//   modification time).
// A start still running is never judged failed.
bool marker_failed(const StartIdentity& owner, const StartIdentity& here, std::optional<std::uint64_t> owner_ticks_now,
                   std::int64_t age_seconds);

}  // namespace kvremap::policy
