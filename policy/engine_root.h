// The engine's root command line, handed from the process that started the engine to its descendants.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvremap::policy {

// The environment variable that carries it. Engines rename their processes (setproctitle, which
// overwrites /proc/<pid>/cmdline) before any CUDA call, and a spawned child's own line names only the
// multiprocessing bootstrap: the line the root was started with is read when kvremap loads into it,
// before the program runs, and inherited by every process it spawns or forks.
inline constexpr std::string_view kEngineRootVariable = "KVREMAP_ENGINE_ROOT";

// A process, named so that a reused pid is told apart: its pid and its start time (field 22 of
// /proc/<pid>/stat, in clock ticks since boot).
struct ProcessStamp {
  std::int64_t pid = 0;
  std::uint64_t start_time = 0;
  bool operator==(const ProcessStamp&) const = default;
};

struct EngineRoot {
  ProcessStamp process;
  std::vector<std::string> argv;  // secrets already redacted
  // The root's descriptor of the engine's serving flag (interpose/base/serving_flag.h), which a
  // descendant maps through /proc/<pid>/fd/<n>; -1 without one.
  int serving_flag_fd = -1;
};

// "2:<pid>:<start time>:<serving flag fd, or -1>:<argv as hex of the NUL-joined arguments>".
std::string encode_engine_root(const EngineRoot& root);

// The value decoded, or nullopt for anything else (a wrong version, a non-number, odd or non-hex
// digits, more than kMaxEngineRootBytes).
std::optional<EngineRoot> decode_engine_root(std::string_view value);
inline constexpr std::size_t kMaxEngineRootBytes = 64 * 1024;

// /proc/<pid>/stat's contents read: the process's stamp (its start time is field 22) and its parent's
// pid (field 4), counted after the parenthesised command name, which may hold spaces and parentheses.
// nullopt for anything else.
std::optional<ProcessStamp> stamp_from_stat(std::int64_t pid, std::string_view stat);
std::optional<std::int64_t> parent_from_stat(std::string_view stat);

// Whether a handed-down root may describe this process: it is one of its ancestors (pid and start time
// both match one of `ancestors`, this process's parent first). A value inherited from an unrelated
// process — an engine that exported it to a shell, a pid reused since — names none of them.
bool root_is_ancestor(const EngineRoot& root, std::span<const ProcessStamp> ancestors);

// Whether a process started by exec (not a multiprocessing child) whose own line is `own` takes a trusted
// handed-down `root` as its engine's line rather than becoming a root itself: only when its own line names
// no engine and the root's names one. A worker that a launcher execs below the engine — a Ray worker,
// exec'd by the raylet that `vllm serve` started — then reads the engine's flags; a line that names an
// engine itself (`vllm serve` started by a script below another engine) keeps its own, and below a root
// that names no engine (`ray start --head`) every exec'd process keeps its own.
bool adopts_root(std::span<const std::string> own, const EngineRoot& root);

}  // namespace kvremap::policy
