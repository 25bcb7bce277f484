// `kvremap run`'s process handling: the child's environment, fork and exec, signal forwarding, the one restart, the
// traces it left, the private trace directory's lifetime.
#include "tools/run_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "policy/json_depth.h"
#include "policy/options.h"
#include "policy/path_rules.h"
#include "policy/printable.h"
#include "tools/exit_status.h"
#include "tools/library_location.h"
#include "tools/run_summary.h"
#include "tools/sizing_watch.h"
#include "tools/text.h"
#include "tools/trace/trace_reader.h"

extern char** environ;

namespace kvremap::run {
namespace {

namespace fs = std::filesystem;

// What users and supervisors send to stop or poke an engine; kvremap passes them on to the command.
constexpr std::array<int, 6> kForwardedSignals = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

// A signal that asks the command to end: after one, a deficit exit is the end, not a restart.
bool asks_to_stop(int signal) { return signal == SIGINT || signal == SIGTERM || signal == SIGHUP || signal == SIGQUIT; }

// While the command runs (and between its two starts) the forwarded signals and SIGCHLD are blocked
// and read from a signalfd: one that arrives between fork and exec or between two starts stays
// pending instead of being lost or killing kvremap before it can pass on the command's status. Once
// the command is done they act as they did before, so a Ctrl-C can still stop a long summary.
class SignalChannel {
 public:
  SignalChannel() {
    sigemptyset(&blocked_);
    for (int signal : kForwardedSignals) sigaddset(&blocked_, signal);
    sigaddset(&blocked_, SIGCHLD);
    sigprocmask(SIG_BLOCK, &blocked_, &inherited_mask_);
    // An inherited SIG_IGN for SIGCHLD would have the kernel reap the command, and its status with it.
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    sigaction(SIGCHLD, &default_action, &inherited_sigchld_);
    fd_ = signalfd(-1, &blocked_, SFD_CLOEXEC);
    if (fd_ < 0) {
      const int error = errno;
      sigprocmask(SIG_SETMASK, &inherited_mask_, nullptr);
      throw std::runtime_error(std::string("signalfd: ") + std::strerror(error));
    }
  }
  ~SignalChannel() {
    close(fd_);
    sigaction(SIGCHLD, &inherited_sigchld_, nullptr);
    sigprocmask(SIG_SETMASK, &inherited_mask_, nullptr);
  }
  SignalChannel(const SignalChannel&) = delete;
  SignalChannel& operator=(const SignalChannel&) = delete;

  // In the child, before exec: the signal mask and SIGCHLD action kvremap was started with, so the
  // command starts as it would without kvremap. kvremap installs no handlers, so every other
  // disposition is already the inherited one (exec would reset handlers, not an inherited SIG_IGN).
  // Async-signal-safe.
  void restore_in_child() const {
    sigaction(SIGCHLD, &inherited_sigchld_, nullptr);
    sigprocmask(SIG_SETMASK, &inherited_mask_, nullptr);
  }

  // The next signal; blocks unless `wait` is false (then nullopt when none is pending).
  std::optional<signalfd_siginfo> next(bool wait) const {
    if (!wait) {
      sigset_t pending;
      sigpending(&pending);
      bool any = false;
      for (int signal : kForwardedSignals) any |= sigismember(&pending, signal) == 1;
      if (!any && sigismember(&pending, SIGCHLD) != 1) return std::nullopt;
    }
    signalfd_siginfo info{};
    for (;;) {
      const ssize_t n = read(fd_, &info, sizeof info);
      if (n == static_cast<ssize_t>(sizeof info)) return info;
      if (n < 0 && errno == EINTR) continue;
      return std::nullopt;
    }
  }

  // Whether a signal arrives within `timeout_ms` (next(true) then reads it without blocking); false also when
  // poll fails, so a caller polling for other reasons goes on.
  bool wait_for_signal(int timeout_ms) const {
    pollfd fd{fd_, POLLIN, 0};
    return poll(&fd, 1, timeout_ms) > 0;
  }

 private:
  sigset_t blocked_{};
  sigset_t inherited_mask_{};
  struct sigaction inherited_sigchld_ {};
  int fd_ = -1;
};

// One start of the command: its wait status, or why it could not be executed.
struct Start {
  int wait_status = 0;
  int exec_errno = 0;  // non-zero: execvp (or fork) failed with it
};

// The command runs in kvremap's process group, so what the terminal sends (Ctrl-C, Ctrl-\, the
// terminal's hangup: si_code SI_KERNEL) already reaches it; passing those on as well would deliver
// them twice, and a second SIGINT makes Python engines abandon their graceful shutdown. A signal a
// process sent to kvremap (kill(1), a supervisor, a job scheduler) would not reach the command, so it
// is passed on, unless the command itself sent it. A signal sent to the whole process group
// (kill -- -PGID) reaches the command twice: kvremap cannot tell it from one sent to it alone.
bool should_forward(const signalfd_siginfo& info, pid_t child) {
  if (info.ssi_signo == SIGCHLD) return false;
  if (info.ssi_code == SI_KERNEL) return false;
  return static_cast<pid_t>(info.ssi_pid) != child;
}

// A sizing run (`kvremap size`) in progress: its traces are followed, and once every process that deferred
// its KV cache has committed it and written its profile, and nothing has changed for the settle time, the
// command is asked to end (SIGTERM, as a supervisor stops a server), then killed after the grace time.
struct SizingRun {
  SizingWatch watch;
  std::string directory;
  std::set<std::string> before;
  std::chrono::milliseconds settle{2000};
  std::chrono::milliseconds grace{30000};
  std::uint64_t progress = 0;
  std::chrono::steady_clock::time_point changed{};
  bool asked_to_end = false;
  bool killed = false;
  std::chrono::steady_clock::time_point asked_at{};

  // Called while the command runs: follows the traces, ends the command when measured.
  void step(pid_t child) {
    const auto now = std::chrono::steady_clock::now();
    watch.poll(directory, before);
    if (watch.progress() != progress || changed == std::chrono::steady_clock::time_point{}) {
      progress = watch.progress();
      changed = now;
    }
    if (!asked_to_end && watch.measured() && now - changed >= settle) {
      asked_to_end = true;
      asked_at = now;
      kill(child, SIGTERM);
    } else if (asked_to_end && !killed && now - asked_at >= grace) {
      killed = true;
      kill(child, SIGKILL);
    }
  }
};

Start start_and_wait(const std::vector<std::string>& command, const std::vector<std::string>& environment,
                     const SignalChannel& signals, bool& stop_requested, SizingRun* sizing = nullptr) {
  // Everything the child needs is built before fork: between fork and exec it only makes system calls.
  std::vector<char*> argv, envp;
  for (const std::string& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  for (const std::string& entry : environment) envp.push_back(const_cast<char*>(entry.c_str()));
  envp.push_back(nullptr);

  // execvp's errno comes back through a close-on-exec pipe: end of file means the exec succeeded.
  int exec_report[2];
  if (pipe2(exec_report, O_CLOEXEC) != 0) return Start{0, errno};
  const pid_t child = fork();
  if (child < 0) {
    const int error = errno;
    close(exec_report[0]);
    close(exec_report[1]);
    return Start{0, error};
  }
  if (child == 0) {
    close(exec_report[0]);
    signals.restore_in_child();
    execvpe(argv[0], argv.data(), envp.data());
    const int error = errno;
    (void)!write(exec_report[1], &error, sizeof error);
    _exit(cli::kExitNotFound);
  }
  close(exec_report[1]);
  int exec_errno = 0;
  ssize_t n;
  do n = read(exec_report[0], &exec_errno, sizeof exec_errno);
  while (n < 0 && errno == EINTR);
  close(exec_report[0]);

  int status = 0;
  if (n == static_cast<ssize_t>(sizeof exec_errno)) {
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    return Start{0, exec_errno};
  }
  for (;;) {
    // Reap first: several SIGCHLDs may merge into one, and one may predate this start. Descendants
    // orphaned to kvremap (their subreaper) are reaped here too, so none lingers as a zombie.
    for (;;) {
      int reaped_status = 0;
      const pid_t reaped = waitpid(-1, &reaped_status, WNOHANG);
      if (reaped == child) return Start{reaped_status, 0};
      if (reaped > 0 || (reaped < 0 && errno == EINTR)) continue;
      if (reaped < 0) throw std::runtime_error(std::string("waiting for it: ") + std::strerror(errno));
      break;  // 0: the command still runs
    }
    if (sizing != nullptr) {
      sizing->step(child);
      if (!signals.wait_for_signal(/*timeout_ms=*/200)) continue;
    }
    const auto info = signals.next(/*wait=*/true);
    if (!info) {
      // The signalfd failed: fall back to waiting without forwarding rather than spin.
      while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
      }
      return Start{status, 0};
    }
    const int signal = static_cast<int>(info->ssi_signo);
    if (signal == SIGCHLD) continue;
    stop_requested |= asks_to_stop(signal);
    if (should_forward(*info, child)) kill(child, signal);
  }
}

// Like a shell's $?: the exit status, or 128 + the signal that killed it.
int shell_status(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return cli::kExitSignalBase + WTERMSIG(wait_status);
  return cli::kExitSignalBase;
}

// The environment with `overrides` ("NAME" → value) replacing or adding entries, the rest unchanged.
std::vector<std::string> child_environment(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    if (!overrides.contains(text.substr(0, text.find('=')))) environment.push_back(text);
  }
  for (const auto& [name, value] : overrides) environment.push_back(name + "=" + value);
  return environment;
}

std::string environment_value(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

// "/work/dir" for "dir" or "./dir/" in /work.
std::string absolute_path(const std::string& path) {
  std::error_code ec;
  std::string absolute = fs::absolute(path, ec).lexically_normal().string();
  if (ec) return path;
  if (absolute.size() > 1 && absolute.ends_with('/')) absolute.pop_back();
  return absolute;
}

struct TraceDirectory {
  std::string path;
  bool is_private = false;  // --discard-traces: made for this run, removed at its end unless a process that may write to it still runs
  bool is_run_directory = false;  // made for this run and kept: the summary names the commands that read it
};

// A new directory for this run's traces, kept: $XDG_STATE_HOME/kvremap/runs/<UTC date-time>-<pid> (the XDG base
// directory specification's state directory, ~/.local/state without XDG_STATE_HOME), mode 0700 since traces name
// the command's files. Where it cannot be made, one line says so and a temporary directory is used and kept instead.
std::optional<TraceDirectory> make_run_directory(std::string& error) {
  std::string state = environment_value("XDG_STATE_HOME");
  if (state.empty() || state.front() != '/') state = environment_value("HOME") + "/.local/state";
  char stamp[32] = "";
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
  const std::string runs = state + "/kvremap/runs";
  const std::string path = runs + "/" + stamp + "-" + std::to_string(getpid());
  std::error_code ec;
  fs::create_directories(runs, ec);
  if (!ec && mkdir(path.c_str(), 0700) != 0) ec = std::error_code(errno, std::generic_category());
  if (!ec) return TraceDirectory{path, false, true};
  std::string base = environment_value("TMPDIR");
  if (base.empty()) base = "/tmp";
  std::string templ = base + "/kvremap-run-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) {
    error = "cannot make the run directory " + path + " (" + ec.message() + ") nor a temporary one in " + base + ": " +
            std::strerror(errno) + "; name one with --trace-dir DIR";
    return std::nullopt;
  }
  cli::say("run", "cannot make the run directory " + path + ": " + ec.message() + "; the traces go to " + templ +
                      ", which is kept");
  return TraceDirectory{templ, false, true};
}

// Every KVREMAP_* variable of kvremap's environment read as the library reads it (policy::parse_options): its
// problem lines, empty when there are none. The library would only fall back and go on; the run stops first.
std::vector<std::string> environment_option_problems() {
  std::vector<std::pair<std::string, std::string>> variables;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text = *entry;
    if (!text.starts_with("KVREMAP_")) continue;
    const std::size_t equals = text.find('=');
    if (equals == std::string_view::npos) continue;
    variables.emplace_back(std::string(text.substr(0, equals)), std::string(text.substr(equals + 1)));
  }
  std::vector<std::string> lines;
  for (const policy::OptionProblem& problem : policy::parse_options(variables).problems)
    lines.push_back(policy::printable(problem.message));
  return lines;
}

// The directory the traces go to, created when missing and checked writable (the library would
// only warn and trace nothing). An error is one line for stderr.
std::optional<TraceDirectory> prepare_trace_directory(const std::string& requested, bool discard, std::string& error) {
  TraceDirectory directory;
  std::string origin = "--trace-dir";
  directory.path = requested;
  if (directory.path.empty()) {
    directory.path = environment_value("KVREMAP_TRACE_DIR");
    origin = "KVREMAP_TRACE_DIR";
  }
  if (directory.path.empty() && !discard) return make_run_directory(error);
  if (directory.path.empty()) {
    std::string base = environment_value("TMPDIR");
    if (base.empty()) base = "/tmp";
    std::string templ = base + "/kvremap-run-XXXXXX";
    if (mkdtemp(templ.data()) == nullptr) {
      error = "cannot make a private trace directory in " + base + ": " + std::strerror(errno) +
              "; name one with --trace-dir DIR";
      return std::nullopt;
    }
    directory.path = templ;
    directory.is_private = true;
    return directory;
  }
  // Checked before anything is created: a bad name never becomes a directory.
  if (const auto bad = policy::path_problem(directory.path)) {
    error = origin + "='" + policy::printable(directory.path) + "' " + *bad + ": expected " +
            std::string(policy::kPathRulesSummary) + "; the command is not run";
    return std::nullopt;
  }
  std::error_code ec;
  fs::create_directories(directory.path, ec);
  if (ec) {
    error = "cannot create the trace directory " + directory.path + " (" + origin + "): " + ec.message();
    return std::nullopt;
  }
  std::string probe = directory.path + "/.kvremap-run-XXXXXX";
  const int fd = mkstemp(probe.data());
  if (fd < 0) {
    error = "cannot write to the trace directory " + directory.path + " (" + origin + "): " + std::strerror(errno);
    return std::nullopt;
  }
  close(fd);
  unlink(probe.c_str());
  return directory;
}

// Names of the trace files in `dir`: kvremap-<host>-<pid>[.<n>].json. The writer never reuses a
// name (O_EXCL), so a name absent before a start is that start's.
std::set<std::string> trace_names(const std::string& dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with("kvremap-") && name.ends_with(".json")) names.insert(name);
  }
  return names;
}

// Whether a process the command started may still run. kvremap is the subreaper of everything it
// starts, so every descendant orphaned on the way is its child; with none left (ECHILD) nothing
// that inherited KVREMAP_TRACE_DIR can write another trace. Those that ended are reaped on the way.
// `subreaper` false (prctl refused): orphans went to another reaper and kvremap cannot tell.
bool descendants_remain(bool subreaper) {
  for (;;) {
    int status = 0;
    const pid_t reaped = waitpid(-1, &status, WNOHANG);
    if (reaped > 0 || (reaped < 0 && errno == EINTR)) continue;
    if (reaped == 0) return true;
    return !subreaper;
  }
}

// Reads what the summary uses: the header, the "kv" and "option error" events, and the compact memory timeline
// whose phases say what start-up work needed (tools/start_up_work.h) — about 48 bytes per allocation, the
// writer's hot lines read by the scanner.
ProcessTrace read_process_trace(const std::string& path, int attempt) {
  ProcessTrace process;
  process.attempt = attempt;
  process.path = path;
  trace::ReadOptions options;
  options.keep_raw_events = false;
  options.memory_timeline_only = true;
  options.keep_every_counter_sample = false;
  try {
    process.trace = trace::read_trace(path, options);
    std::erase_if(process.trace->other_events, [](const trace::OtherEvent& e) {
      return e.cat != "kv" && !(e.cat == "kvremap" && e.name == "option error");
    });
  } catch (const trace::TraceError& error) {
    process.read_error = error.what();
  } catch (const std::exception& error) {
    process.read_error = path + ": cannot read: " + error.what();
  }
  return process;
}

// The trace files that appeared since `before`, with the attempt they belong to.
void note_new_traces(const std::string& dir, const std::set<std::string>& before, int attempt,
                     std::vector<std::pair<std::string, int>>& out) {
  for (const std::string& name : trace_names(dir))
    if (!before.contains(name)) out.emplace_back(dir + "/" + name, attempt);
}

void print_summary(const TraceDirectory& dir, bool kept, const std::vector<ProcessTrace>& traces) {
  if (traces.empty()) {
    std::fprintf(stderr, "kvremap run: no process wrote a kvremap trace (no CUDA use seen, or KVREMAP_TRACE=off)\n");
    return;
  }
  const std::string where = dir.is_private && !kept ? "(not kept: --discard-traces)" : "in " + dir.path;
  std::fprintf(stderr, "%s", cli::text("kvremap run: {} process trace{} {}\n", traces.size(),
                                       traces.size() == 1 ? "" : "s", where)
                                 .c_str());
  std::fprintf(stderr, "%s", render_run_summary(traces).c_str());
  std::fprintf(stderr, "%s", render_option_fallbacks(traces).c_str());
  if (dir.is_run_directory) {
    std::fprintf(stderr, "%s",
                 cli::text("kvremap run: look at them with:\n  kvremap report {0}\n  kvremap plot {0} -o {0}/memory.html\n"
                           "  kvremap validate {0}\n",
                           dir.path)
                     .c_str());
  }
}

// Whether `line` is a `kv restart` event: a top-level object with cat "kv" and name "kv restart", as
// the library writes it before it exits with 75. Parsed, so the words inside another event's
// strings or arguments do not count.
bool is_restart_event(std::string_view line) {
  if (line.starts_with(',')) line.remove_prefix(1);
  if (line.ends_with(',')) line.remove_suffix(1);
  if (policy::json_nested_deeper_than(line, 64)) return false;
  const nlohmann::json event = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!event.is_object()) return false;
  const auto cat = event.find("cat");
  const auto name = event.find("name");
  return cat != event.end() && name != event.end() && *cat == "kv" && *name == "kv restart";
}

// Whether a trace `attempt` wrote holds a `kv restart` event: the library's own word that the
// start ended on a KV deficit with its profile written. Only lines naming it are parsed, so a trace
// of any size costs one pass.
bool any_trace_asks_restart(const std::vector<std::pair<std::string, int>>& traces, int attempt) {
  static constexpr std::string_view kMarker = R"("kv restart")";
  for (const auto& [path, made_by] : traces) {
    if (made_by != attempt) continue;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
      if (line.find(kMarker) != std::string::npos && is_restart_event(line)) return true;
  }
  return false;
}

// Why a sizing run cannot measure in this environment, or empty: it needs defer mode and a profile directory.
// KVREMAP_MODE is read as the library reads it (policy::parse_options: any case, an invalid value falling back
// to observe), so the run refuses exactly the modes in which the command's processes would defer nothing.
std::string sizing_run_problem(const RunOptions& options) {
  if (const char* mode = std::getenv("KVREMAP_MODE");
      mode != nullptr && policy::parse_options({{"KVREMAP_MODE", mode}}).options.mode != policy::Mode::defer)
    return "KVREMAP_MODE=" + std::string(mode) +
           " defers nothing, so a sizing run measures nothing; unset it or set KVREMAP_MODE=defer";
  const std::string profiles = options.profile_dir.empty() ? environment_value("KVREMAP_PROFILE_DIR") : options.profile_dir;
  if (profiles == "off")
    return std::string(options.profile_dir.empty() ? "KVREMAP_PROFILE_DIR=off" : "--profile-dir off") +
           " keeps no profile, so a sizing run would measure for nothing; name a directory with --profile-dir DIR";
  return {};
}

// The sizing run's status and its one line: 0 once every process that deferred its KV cache wrote its profile,
// whatever status the command ended with after kvremap asked it to end; otherwise the command's own status (1
// where it exited 0), with what was missing.
int sizing_run_status(const SizingRun& sizing, int command_status) {
  if (sizing.watch.measured()) {
    std::fprintf(stderr, "kvremap size: %s\n", sizing_line(sizing.watch.devices()).c_str());
    return cli::kExitOk;
  }
  std::string why;
  if (sizing.watch.devices().empty()) {
    why = sizing.watch.nothing_deferred().empty()
              ? "no process deferred a KV cache (no CUDA use seen, or no KV cache recognised)"
              : "nothing was deferred: " + sizing.watch.nothing_deferred();
  } else {
    why = "a process that deferred its KV cache ended before its commit wrote a profile";
  }
  cli::say("size", cli::text("the command ended with status {} before kvremap measured its start-up: {}; no profile "
                             "was written for it (kvremap run shows the start's summary)",
                             command_status, why));
  return command_status != 0 ? command_status : cli::kExitTraceProblem;
}

}  // namespace

std::string compose_ld_preload(std::string_view existing, const std::string& library) {
  std::vector<std::string> entries;
  std::string entry;
  for (const char c : existing) {
    if (c == ' ' || c == ':') {
      if (!entry.empty()) entries.push_back(std::move(entry));
      entry.clear();
    } else {
      entry += c;
    }
  }
  if (!entry.empty()) entries.push_back(std::move(entry));

  char resolved[PATH_MAX];
  const std::string library_file = realpath(library.c_str(), resolved) != nullptr ? resolved : library;
  // Every other entry keeps its place ahead of kvremap: a sanitizer runtime has to come first, and an
  // interposer of cudaMalloc (torch_memory_saver) must come before kvremap, or kvremap's hook places
  // that interposer's KV allocations itself and its pause frees nothing. kvremap listed already keeps
  // its first spelling, once, moved behind the others.
  std::string composed, listed;
  bool listed_last = false;
  std::size_t listed_times = 0;
  for (const std::string& e : entries) {
    const std::string file = realpath(e.c_str(), resolved) != nullptr ? resolved : e;
    listed_last = file == library_file;
    if (listed_last) {
      if (listed_times++ == 0) listed = e;
      continue;
    }
    composed += e + ":";
  }
  if (listed_times == 1 && listed_last) return std::string(existing);  // already where it belongs
  return composed + (listed_times > 0 ? listed : library);
}

int run_command(const RunOptions& options) {
  if (options.command.empty()) {
    std::fprintf(stderr, "kvremap run: no command to run: kvremap run [OPTIONS] -- COMMAND [ARGS...]\n");
    return cli::kExitUsage;
  }
  // A bad KVREMAP_* value would have the library fall back (deferral off, no trace) while the command runs
  // for nothing, or out of memory: nothing starts until the environment is what the user meant.
  if (const std::vector<std::string> problems = environment_option_problems(); !problems.empty()) {
    for (const std::string& line : problems) std::fprintf(stderr, "%s\n", line.c_str());
    cli::say(options.sizing_run ? "size" : "run",
             "the command was not started: fix or unset the variable" + std::string(problems.size() == 1 ? "" : "s") +
                 " above (the library alone, under plain LD_PRELOAD, falls back as each line says)");
    return cli::kExitUsage;
  }
  std::error_code ec;
  if (const std::string problem = cli::library_problem(options.library); !problem.empty()) {
    cli::say(options.sizing_run ? "size" : "run", "--library '" + policy::printable(options.library) + "' " + problem +
                                                       ": pass a built libkvremap.so with --library PATH");
    return cli::kExitUsage;
  }
  if (const auto bad = options.profile_dir == "off" ? std::nullopt : policy::path_problem(options.profile_dir);
      bad && !options.profile_dir.empty()) {
    cli::say(options.sizing_run ? "size" : "run", "--profile-dir '" + policy::printable(options.profile_dir) + "' " +
                                                       *bad + ": expected " + std::string(policy::kPathRulesSummary) +
                                                       " (or off); the command is not run");
    return cli::kExitUsage;
  }
  // Absolute: the command may change directory before it starts the processes that load it.
  const std::string library = absolute_path(options.library);

  std::string error;
  const std::optional<TraceDirectory> trace_dir = prepare_trace_directory(options.trace_dir, options.discard_traces, error);
  if (!trace_dir) {
    cli::say("run", error);
    return cli::kExitUsage;
  }
  // Directories absolute too: the summary reads the traces from where the processes wrote them.
  std::map<std::string, std::string> overrides = {
      {"LD_PRELOAD", compose_ld_preload(environment_value("LD_PRELOAD"), library)},
      {"KVREMAP_TRACE_DIR", absolute_path(trace_dir->path)}};
  if (options.sizing_run) {
    // A sizing run measures through the traces and keeps what it measured in a profile.
    if (const std::string problem = sizing_run_problem(options); !problem.empty()) {
      cli::say("size", problem);
      if (trace_dir->is_private) fs::remove_all(trace_dir->path, ec);
      if (trace_dir->is_run_directory) fs::remove(trace_dir->path, ec);  // nothing ran: an empty run directory goes
      return cli::kExitUsage;
    }
    overrides["KVREMAP_TRACE"] = "on";
  }
  // "off" is the library's word for no profiles, not a directory.
  if (!options.profile_dir.empty())
    overrides["KVREMAP_PROFILE_DIR"] = options.profile_dir == "off" ? "off" : absolute_path(options.profile_dir);
  const std::vector<std::string> environment = child_environment(overrides);

  // Every descendant orphaned while the command runs becomes kvremap's child, so that at the end
  // kvremap knows whether any process that inherited the trace directory still runs.
  const bool subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0;

  int status = 0;
  bool exec_failed = false;
  std::vector<std::pair<std::string, int>> new_traces;  // path, attempt
  std::optional<SizingRun> sizing;
  try {
    const SignalChannel signals;
    bool stop_requested = false;
    for (int attempt = 1; attempt <= 2; ++attempt) {
      const std::set<std::string> before = trace_names(trace_dir->path);
      if (options.sizing_run) {
        sizing.emplace();
        sizing->directory = trace_dir->path;
        sizing->before = before;
        sizing->settle = std::chrono::milliseconds(options.settle_ms);
        sizing->grace = std::chrono::milliseconds(options.grace_ms);
      }
      const Start start =
          start_and_wait(options.command, environment, signals, stop_requested, sizing ? &*sizing : nullptr);
      if (start.exec_errno != 0) {
        cli::say("run", "cannot run '" + options.command[0] + "': " + std::strerror(start.exec_errno));
        status = start.exec_errno == ENOENT ? cli::kExitNotFound : cli::kExitCannotExecute;
        exec_failed = true;
        break;
      }
      status = shell_status(start.wait_status);
      note_new_traces(trace_dir->path, before, attempt, new_traces);
      // A stop signal that came while the command was exiting is still pending: it counts too.
      while (const auto info = signals.next(/*wait=*/false)) stop_requested |= asks_to_stop(info->ssi_signo);
      // Only the library's own `kv restart` event in a trace of this attempt asks for the restart: a
      // command may exit 75 for reasons of its own, and a multi-process engine's front process
      // reports a worker's exit its own way.
      const bool restart_asked = status != 0 && any_trace_asks_restart(new_traces, attempt);
      // A sizing run's deficit is what it measured: the profile is written, nothing to start again.
      if (attempt == 2 || !restart_asked || stop_requested || options.sizing_run) break;
      std::fprintf(stderr,
                   "kvremap run: the first start had a KV deficit; its profile is written; starting again sized "
                   "from it\n");
    }
  } catch (const std::exception& e) {
    // No signalfd, or the command's status lost: nothing sensible to pass on.
    cli::say("run", "cannot run '" + options.command[0] + "': " + e.what());
    status = cli::kExitCannotExecute;
    exec_failed = true;
  }
  // A process the command left running (a daemon, a background worker) may still write its trace:
  // the private directory stays, named, rather than vanish under it.
  const bool others_may_write = descendants_remain(subreaper);
  const bool keep_private = trace_dir->is_private && others_may_write;
  if (keep_private) {
    cli::say("run", std::string(subreaper ? "processes the command started still run"
                                          : "cannot tell whether processes the command started still run") +
                        "; their trace directory " + trace_dir->path + " is kept: remove it once they have ended");
  }
  if (!exec_failed && sizing) {
    sizing->watch.poll(sizing->directory, sizing->before);  // what was written while the command ended
    status = sizing_run_status(*sizing, status);
  } else if (!exec_failed) {
    // Read once the signals act as usual again: a long trace's reading can be interrupted.
    std::vector<ProcessTrace> traces;
    for (const auto& [path, attempt] : new_traces) traces.push_back(read_process_trace(path, attempt));
    print_summary(*trace_dir, keep_private, traces);
  }
  if (trace_dir->is_private && !keep_private) fs::remove_all(trace_dir->path, ec);
  // A run directory nothing was written to, and nothing still may write to, is no run to look at.
  if (trace_dir->is_run_directory && !others_may_write) fs::remove(trace_dir->path, ec);
  return status;
}

}  // namespace kvremap::run
