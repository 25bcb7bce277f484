// `kvremap run`'s process handling: the child's environment, fork and exec, signal forwarding, the one restart, the
// traces it left, the private trace directory's lifetime.
#include "tools/run_command.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
#include "policy/printable.h"
#include "tools/exit_status.h"
#include "tools/run_summary.h"
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

Start start_and_wait(const std::vector<std::string>& command, const std::vector<std::string>& environment,
                     const SignalChannel& signals, bool& stop_requested) {
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
  bool is_private = false;  // made for this run, removed at its end unless a process that may write to it still runs
};

// The directory the traces go to, created when missing and checked writable (the library would
// only warn and trace nothing). An error is one line for stderr.
std::optional<TraceDirectory> prepare_trace_directory(const std::string& requested, std::string& error) {
  TraceDirectory directory;
  std::string origin = "--trace-dir";
  directory.path = requested;
  if (directory.path.empty()) {
    directory.path = environment_value("KVREMAP_TRACE_DIR");
    origin = "KVREMAP_TRACE_DIR";
  }
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

// Reads only what the summary uses (header, "kv" events): memory stays small on long traces.
ProcessTrace read_process_trace(const std::string& path, int attempt) {
  ProcessTrace process;
  process.attempt = attempt;
  process.path = path;
  std::vector<trace::OtherEvent> kv_events;
  trace::ReadOptions options;
  options.keep_raw_events = false;
  options.keep_records = false;
  options.on_event = [&](const nlohmann::json& event, std::size_t index, std::size_t line, const trace::Header&) {
    if (!event.is_object()) return;
    const auto cat = event.find("cat");
    const auto name = event.find("name");
    if (cat == event.end() || !cat->is_string() || *cat != "kv" || name == event.end() || !name->is_string()) return;
    trace::OtherEvent kv;
    kv.event.index = index;
    kv.event.line = line;
    kv.cat = "kv";
    kv.name = name->get<std::string>();
    const auto args = event.find("args");
    if (args != event.end()) kv.args = *args;
    kv_events.push_back(std::move(kv));
  };
  try {
    process.trace = trace::read_trace(path, options);
    process.trace->other_events = std::move(kv_events);
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
  const std::string where = dir.is_private && !kept ? "(not kept: --trace-dir DIR keeps them)" : "in " + dir.path;
  std::fprintf(stderr, "%s", cli::text("kvremap run: {} process trace{} {}\n", traces.size(),
                                       traces.size() == 1 ? "" : "s", where)
                                 .c_str());
  std::fprintf(stderr, "%s", render_run_summary(traces).c_str());
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
  std::error_code ec;
  if (!fs::is_regular_file(options.library, ec)) {
    cli::say("run", "no library at " + options.library + "; pass a built libkvremap.so with --library PATH");
    return cli::kExitUsage;
  }
  // Absolute: the command may change directory before it starts the processes that load it.
  const std::string library = absolute_path(options.library);

  std::string error;
  const std::optional<TraceDirectory> trace_dir = prepare_trace_directory(options.trace_dir, error);
  if (!trace_dir) {
    cli::say("run", error);
    return cli::kExitUsage;
  }
  // Directories absolute too: the summary reads the traces from where the processes wrote them.
  std::map<std::string, std::string> overrides = {
      {"LD_PRELOAD", compose_ld_preload(environment_value("LD_PRELOAD"), library)},
      {"KVREMAP_TRACE_DIR", absolute_path(trace_dir->path)}};
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
  try {
    const SignalChannel signals;
    bool stop_requested = false;
    for (int attempt = 1; attempt <= 2; ++attempt) {
      const std::set<std::string> before = trace_names(trace_dir->path);
      const Start start = start_and_wait(options.command, environment, signals, stop_requested);
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
      if (attempt == 2 || !restart_asked || stop_requested) break;
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
  const bool keep_private = trace_dir->is_private && descendants_remain(subreaper);
  if (keep_private) {
    cli::say("run", std::string(subreaper ? "processes the command started still run"
                                          : "cannot tell whether processes the command started still run") +
                        "; their trace directory " + trace_dir->path + " is kept: remove it once they have ended");
  }
  if (!exec_failed) {
    // Read once the signals act as usual again: a long trace's reading can be interrupted.
    std::vector<ProcessTrace> traces;
    for (const auto& [path, attempt] : new_traces) traces.push_back(read_process_trace(path, attempt));
    print_summary(*trace_dir, keep_private, traces);
  }
  if (trace_dir->is_private && !keep_private) fs::remove_all(trace_dir->path, ec);
  return status;
}

}  // namespace kvremap::run
