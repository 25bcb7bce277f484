// The load-time constructor: reads KVREMAP_* once, sets up logging and pthread_atfork. No CUDA work here.
#include "interpose/base/library.h"

#include <pthread.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "interpose/base/process_cmdline.h"
#include "interpose/base/process_tree.h"
#include "interpose/kv/kv_manager.h"
#include "interpose/kv/kv_observe_only.h"
#include "interpose/kv/profile_store.h"
#include "interpose/version_number.h"
#include "interpose/process/exit_handlers.h"
#include "interpose/process/fork.h"
#include "interpose/trace/trace_writer.h"
#include "policy/engine.h"
#include "policy/start_line.h"
#include "policy/tree_notice.h"
#include "interpose/track/oom_snapshot.h"
#include "interpose/track/tracker.h"

extern char** environ;

namespace kvremap::interpose {
namespace library_detail {
policy::Options* g_options = nullptr;

const policy::Options& default_options() {
  static const policy::Options defaults = policy::default_options();
  return defaults;
}
}  // namespace library_detail

namespace {
using library_detail::g_options;

// Plain pointers, constant-initialised: the constructor below may run before dynamic initialisers.
std::vector<policy::OptionProblem>* g_problems = nullptr;
std::shared_ptr<spdlog::logger>* g_logger = nullptr;

std::vector<std::pair<std::string, std::string>> kvremap_environment() {
  std::vector<std::pair<std::string, std::string>> env;
  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "KVREMAP_", 8) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    if (!eq) continue;
    env.emplace_back(std::string(*e, static_cast<std::size_t>(eq - *e)), std::string(eq + 1));
  }
  return env;
}

spdlog::level::level_enum to_spdlog(policy::LogLevel level) {
  return static_cast<spdlog::level::level_enum>(static_cast<int>(level));
}

// Lines every process of an engine tree would print alike, printed once: by the first process that
// loads kvremap, which names itself in `variable` for its descendants; one with the same lines stays quiet
// (policy/tree_notice.h).
void print_once_per_tree(std::string_view variable_name, const std::vector<std::string>& lines) {
  const std::string variable(variable_name);
  const char* inherited_text = std::getenv(variable.c_str());
  const std::optional<policy::TreeNotice> inherited =
      inherited_text ? policy::decode_tree_notice(inherited_text) : std::nullopt;
  if (lines.empty() || policy::printed_by_ancestor(lines, inherited, ancestors())) return;
  for (const std::string& line : lines) std::fprintf(stderr, "%s\n", line.c_str());
  if (const auto self = stamp_of(std::to_string(::getpid())))
    setenv(variable.c_str(), policy::encode_tree_notice({*self, policy::lines_hash(lines)}).c_str(), 1);
}

// Option errors once per tree; every process still falls back on its own and its trace records them.
void print_option_problems(const std::vector<policy::OptionProblem>& problems) {
  std::vector<std::string> lines;
  for (const policy::OptionProblem& p : problems) lines.push_back(p.message);
  print_once_per_tree(policy::kOptionErrorsShownVariable, lines);
}

// The engine's root process says kvremap is there, at the default log level: what it does and where it
// writes. Its workers (multiprocessing children, exec'd processes that name no engine) say nothing.
void print_start_up_line(const policy::Options& options) {
  if (!started_as_engine_root() || options.log_level > policy::LogLevel::warn) return;
  std::string trace_dir;
  if (options.trace) {
    trace_dir = options.trace_dir;
    if (!trace_dir.starts_with('/')) {
      char cwd[4096];
      if (::getcwd(cwd, sizeof cwd) != nullptr) trace_dir = trace_dir == "." ? cwd : std::string(cwd) + "/" + trace_dir;
    }
  }
  const ProfileDirectory profiles =
      profile_directory(options.profile_dir, std::getenv("XDG_CACHE_HOME"), std::getenv("HOME"));
  const std::string line = policy::start_up_line(
      options, {KVREMAP_VERSION_STRING, policy::named_engine(own_command_line()), ::getpid(), trace_dir, profiles.path});
  print_once_per_tree(policy::kStartLineShownVariable, {line});
}

__attribute__((constructor)) void load() {
  // First, whatever fails below: tracking writes its summary at exit and on a terminating signal.
  set_tracking_start_hook(&tracker_detail::install_exit_handlers);
  set_out_of_memory_hook(&kv_out_of_memory);
  try {
    trace_now_us();  // fixes the trace's time origin at load
    capture_command_line_at_load();  // before the program can rename itself
    policy::ParsedOptions parsed = policy::parse_options(kvremap_environment());
    g_options = new policy::Options(parsed.options);
    library_detail::g_hot_options = {true, g_options->mode, g_options->stack_min_bytes, g_options->kv_min_bytes,
                                     g_options->kv_tensor_bytes};
    auto logger = std::make_shared<spdlog::logger>("kvremap", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    logger->set_pattern("kvremap: [pid %P] %l: %v");
    logger->set_level(to_spdlog(g_options->log_level));
    g_logger = new std::shared_ptr<spdlog::logger>(std::move(logger));
    print_option_problems(parsed.problems);
    g_problems = new std::vector<policy::OptionProblem>(parsed.problems);
    if (parsed.exit_requested()) {
      std::fprintf(stderr, "kvremap: exiting because KVREMAP_STRICT=1 and the configuration is invalid\n");
      std::_Exit(1);
    }
    print_start_up_line(*g_options);
    // Settings that give up what deferral gains: said once, at load, so nobody expects the gain.
    for (const std::string& notice : policy::gain_notices(*g_options)) log().warn("{}", notice);
    install_fork_handlers();
    kv_observe_only_at_load();
  } catch (...) {
    std::fprintf(stderr, "kvremap: initialisation failed; passing every call through\n");
  }
}

}  // namespace

spdlog::logger& log() {
  if (g_logger) return **g_logger;
  static spdlog::logger* silent = new spdlog::logger("kvremap-silent");
  return *silent;
}

void notice(const std::string& text) {
  const policy::LogLevel level = g_options ? g_options->log_level : policy::LogLevel::warn;
  if (level > policy::LogLevel::warn) return;
  std::fprintf(stderr, "kvremap: [pid %d] %s\n", static_cast<int>(::getpid()), text.c_str());
}

const std::vector<policy::OptionProblem>& option_problems() {
  static const std::vector<policy::OptionProblem> none;
  return g_problems ? *g_problems : none;
}

}  // namespace kvremap::interpose
