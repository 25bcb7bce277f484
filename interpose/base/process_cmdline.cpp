// The engine's command line: read at load before the program can rename itself, handed to descendants, or found in /proc.
#include "interpose/base/process_cmdline.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>

#include "interpose/base/process_tree.h"
#include "interpose/base/serving_flag.h"
#include "policy/engine.h"
#include "policy/engine_root.h"
#include "policy/redact.h"

namespace kvremap::interpose {
namespace {

std::vector<std::string> cmdline_of(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/cmdline", std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return policy::split_cmdline(raw);
}

// The command line this process image was started with, read at load; a forked child keeps its
// parent's, which is the line its code runs under.
std::vector<std::string>* g_load_command_line = nullptr;
// The root's line, where this process was started by exec and adopted its ancestor's root at load
// (policy::adopts_root); a forked child keeps it too.
std::vector<std::string>* g_adopted_root_line = nullptr;

// The root in KVREMAP_ENGINE_ROOT, decoded, whoever left it there.
std::optional<policy::EngineRoot> handed_down_root() {
  const char* value = std::getenv(std::string(policy::kEngineRootVariable).c_str());
  if (value == nullptr) return std::nullopt;
  return policy::decode_engine_root(value);
}

// The root handed down by an ancestor, when it is one.
std::optional<policy::EngineRoot> inherited_root() {
  std::optional<policy::EngineRoot> root = handed_down_root();
  if (!root || !policy::root_is_ancestor(*root, ancestors())) return std::nullopt;
  return root;
}

// In a process started by exec whose own line names no engine: the line of the engine an ancestor
// started it below, with that engine's serving flag mapped; nullopt where there is none to trust, or no
// flag (a line whose flags expect graphs must hear the engine's port open: without the flag this process
// keeps its own line, which expects none). The root stays in the environment, unchanged, for what this
// process starts.
std::optional<std::vector<std::string>> adopt_ancestor_root(const std::vector<std::string>& own) {
  std::optional<policy::EngineRoot> root = handed_down_root();
  if (!root || !policy::adopts_root(own, *root) || !policy::root_is_ancestor(*root, ancestors()) ||
      !attach_serving_flag(root->process.pid, root->serving_flag_fd))
    return std::nullopt;
  return std::move(root->argv);
}

}  // namespace

void capture_command_line_at_load() {
  std::vector<std::string> argv = own_command_line();
  g_load_command_line = new std::vector<std::string>(argv);
  if (argv.empty()) return;
  if (policy::is_multiprocessing_child(argv)) {
    if (const auto root = inherited_root()) attach_serving_flag(root->process.pid, root->serving_flag_fd);
    return;
  }
  if (std::optional<std::vector<std::string>> line = adopt_ancestor_root(argv)) {
    g_adopted_root_line = new std::vector<std::string>(std::move(*line));
    return;
  }
  // Any other process started by exec is the root of what it starts: its line, secrets redacted, and its
  // serving flag, for them.
  const auto self = stamp_of(std::to_string(::getpid()));
  if (!self) return;
  const std::string value =
      policy::encode_engine_root({*self, policy::redact_command_line(argv), create_serving_flag()});
  if (value.size() <= policy::kMaxEngineRootBytes)
    setenv(std::string(policy::kEngineRootVariable).c_str(), value.c_str(), 1);
  else
    unsetenv(std::string(policy::kEngineRootVariable).c_str());
}

bool started_as_engine_root() {
  return g_load_command_line != nullptr && g_adopted_root_line == nullptr && !g_load_command_line->empty() &&
         !policy::is_multiprocessing_child(*g_load_command_line) &&
         policy::named_engine(*g_load_command_line) != policy::EngineKind::other;
}

std::vector<std::string> own_command_line() { return cmdline_of(std::to_string(::getpid())); }

std::vector<std::string> engine_command_line() {
  if (g_adopted_root_line != nullptr) return *g_adopted_root_line;
  if (g_load_command_line != nullptr && !g_load_command_line->empty()) {
    if (!policy::is_multiprocessing_child(*g_load_command_line)) return *g_load_command_line;
    if (auto root = inherited_root()) return std::move(root->argv);
  }
  // Loaded late, or a multiprocessing child whose root did not run kvremap: the nearest ancestor whose
  // line is not a multiprocessing child's (a process title where the engine renamed it).
  std::string pid = std::to_string(::getpid());
  std::vector<std::string> argv = cmdline_of(pid);
  // vLLM's engine core and workers, SGLang's schedulers: a few levels at most.
  for (int level = 0; level < 8 && policy::is_multiprocessing_child(argv); ++level) {
    pid = parent_of(pid);
    if (pid.empty() || pid == "0") break;
    std::vector<std::string> parent = cmdline_of(pid);
    if (parent.empty()) break;
    argv = std::move(parent);
  }
  return argv;
}

}  // namespace kvremap::interpose
