// `kvremap run` through the real CLI: exit statuses, signal forwarding, LD_PRELOAD, the one restart, and the summary of
// a two-rank engine start.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "policy/units.h"
#include "run_program.h"
#include "tools/trace/trace_reader.h"

namespace fs = std::filesystem;
using kvremap::testing::child_environment;
using kvremap::testing::count_of;
using kvremap::testing::Preload;
using kvremap::testing::link_as;
using kvremap::testing::make_temp_dir;
using kvremap::testing::run_program;
using kvremap::testing::RunResult;
using kvremap::testing::trace_files;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

// The sanitizer runtime, if any, and the library of this build's KVREMAP_PRELOAD.
Preload split_preload() { return kvremap::testing::split_preload(KVREMAP_PRELOAD); }

// The environment every run starts from: LD_PRELOAD holds the sanitizer runtime, or nothing.
std::vector<std::string> base_env() {
  const Preload p = split_preload();
  return p.runtime.empty() ? std::vector<std::string>{} : std::vector<std::string>{"LD_PRELOAD=" + p.runtime};
}
std::vector<std::string> base_unset() {
  std::vector<std::string> unset = {"KVREMAP_TRACE_DIR", "KVREMAP_PROFILE_DIR"};
  if (split_preload().runtime.empty()) unset.push_back("LD_PRELOAD");
  return unset;
}

// argv of `kvremap run --library <lib> [options] -- command...`.
std::vector<std::string> kvremap_run(const std::vector<std::string>& options, const std::vector<std::string>& command) {
  std::vector<std::string> argv = {KVREMAP_CLI, "run", "--library", split_preload().library};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back("--");
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

RunResult run(const std::vector<std::string>& options, const std::vector<std::string>& command,
              std::vector<std::string> extra_env = {}, int timeout_s = 60) {
  std::vector<std::string> env = base_env();
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  return run_program(kvremap_run(options, command), env, base_unset(), timeout_s);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string write_script(const std::string& text) {
  const std::string path = make_temp_dir() + "/script.sh";
  std::ofstream(path) << text;
  return path;
}

constexpr const char* kRestartLine =
    "kvremap run: the first start had a KV deficit; its profile is written; starting again sized from it\n";

// Starts `kvremap run` with stdout on a pipe, waits until the command has printed "ready" (it has set
// up its traps by then), sends `signal` to the kvremap process and returns its wait status. The
// signals are reset to their defaults first: a shell cannot trap a signal ignored on entry, which
// an inherited disposition (a test runner started with `&`) would otherwise make it.
int signal_when_ready(const std::vector<std::string>& argv, int sig, std::string& err_path) {
  std::vector<std::string> environment = child_environment(base_env(), base_unset());
  std::vector<std::string> args_copy = argv;
  std::vector<char*> args, envp;
  for (auto& a : args_copy) args.push_back(a.data());
  args.push_back(nullptr);
  for (auto& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);
  err_path = make_temp_dir() + "/stderr";
  int out[2];
  if (pipe(out) != 0) return -1;
  const pid_t child = fork();
  if (child == 0) {
    setpgid(0, 0);  // its own group, so that a hung run can be killed whole
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) ::signal(s, SIG_DFL);
    dup2(out[1], 1);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(err, 2);
    close(out[0]);
    execve(args[0], args.data(), envp.data());
    _exit(126);
  }
  close(out[1]);
  std::string output;
  char buf[256];
  // The bound only keeps a broken build from hanging the suite; the command prints "ready" at once.
  pollfd fd{out[0], POLLIN, 0};
  while (output.find("ready\n") == std::string::npos && poll(&fd, 1, 60000) > 0) {
    const ssize_t n = read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    output.append(buf, static_cast<std::size_t>(n));
  }
  if (output.find("ready\n") != std::string::npos) kill(child, sig);
  close(out[0]);
  // Again only a guard against hanging: a signal that never reaches the command leaves it waiting,
  // so after a minute the whole group (kvremap, the command, its sleep) is killed and the test fails.
  int status = 0;
  for (int waited_ms = 0; waitpid(child, &status, WNOHANG) == 0; waited_ms += 10) {
    if (waited_ms >= 60000) {
      kill(-child, SIGKILL);
      waitpid(child, &status, 0);
      break;
    }
    usleep(10000);
  }
  return status;
}

// A shell function writing this process's trace into $KVREMAP_TRACE_DIR with the `kv restart` event
// the library writes before it exits with 75 under KVREMAP_DEFICIT=restart.
const std::string kWriteRestartTrace = R"(write_restart_trace() {
  printf '[\n{"ph":"M","cat":"kvremap","name":"kvremap_trace","pid":%d,"tid":%d,"ts":0,"args":{"schema_version":1,"library_version":"0","hostname":"h","pid":%d,"ppid":1,"cmdline":"c","start_unix_ns":1,"options":{"KVREMAP_MODE":"defer"}}}\n,{"ph":"i","s":"p","cat":"kv","name":"kv restart","pid":%d,"tid":%d,"ts":5,"args":{"device":0,"deficit_bytes":1024,"exit_status":75}}\n' $$ $$ $$ $$ $$ > "$KVREMAP_TRACE_DIR/kvremap-h-$$.json"
}
)";

// A command that counts its starts in the file $1 and exits with the status its start's number
// picks from the rest of its arguments (the last one for every later start). A status written with
// an "r" (75r) first writes a trace holding the library's `kv restart` event, as a start under
// KVREMAP_DEFICIT=restart does before it exits.
const std::string kCountingScript = kWriteRestartTrace + R"(count=$1; shift
n=$(( $(cat "$count" 2>/dev/null || echo 0) + 1 ))
echo $n > "$count"
status=0
i=0
for s in "$@"; do i=$((i + 1)); status=$s; [ $i -eq $n ] && break; done
case $status in *r)
  status=${status%r}
  write_restart_trace;;
esac
exit $status
)";

}  // namespace

TEST(Run, TheCommandsExitStatusIsKvremapsAndASignalIs128PlusItsNumber) {
  const RunResult three = run({}, {"/bin/sh", "-c", "exit 3"});
  EXPECT_EQ(three.exit_code, 3) << three.err;
  const RunResult zero = run({}, {"true"});  // found in PATH
  EXPECT_EQ(zero.exit_code, 0) << zero.err;
  const RunResult killed = run({}, {"/bin/sh", "-c", "kill -KILL $$"});
  EXPECT_EQ(killed.exit_code, 128 + SIGKILL) << killed.err;
  EXPECT_EQ(killed.signal, 0) << "kvremap itself exits";
}

TEST(Run, ArgumentsAfterTheDoubleDashReachTheCommandUntouched) {
  const RunResult r = run({}, {"/bin/sh", "-c", "printf '[%s]' \"$@\"", "sh", "--flag", "--", "-x", "--trace-dir"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[--flag][--][-x][--trace-dir]");
}

TEST(Run, BadInputIsOneLineAndAShellsStatus) {
  RunResult r = run({}, {"no-such-command-kvremap-run"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_EQ(r.err, "kvremap run: cannot run 'no-such-command-kvremap-run': No such file or directory\n");
  const std::string not_executable = make_temp_dir() + "/data.txt";
  std::ofstream(not_executable) << "data";
  r = run({}, {not_executable});
  EXPECT_EQ(r.exit_code, 126);
  EXPECT_EQ(r.err, "kvremap run: cannot run '" + not_executable + "': Permission denied\n");

  r = run_program({KVREMAP_CLI, "run", "--library", make_temp_dir() + "/libkvremap.so", "--", "true"}, base_env(),
                  base_unset());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, ::testing::MatchesRegex("kvremap run: --library '[^\n]*/libkvremap.so' is not a file: pass a "
                                             "built libkvremap.so with --library PATH\n"));
  r = run_program({KVREMAP_CLI, "run", "--library", split_preload().library, "--"}, base_env(), base_unset());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(count_of(r.err, "\n"), 1u) << r.err;

  const std::string file = make_temp_dir() + "/file";
  std::ofstream(file) << "x";
  r = run({"--trace-dir", file + "/traces"}, {"true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "kvremap run: cannot create the trace directory " + file + "/traces (--trace-dir): Not a directory\n");
}

// A command's name (or any path) reaches stderr with its control bytes as \xNN: it cannot forge a
// line of kvremap's own or send a terminal escape.
TEST(Run, ControlCharactersInItsMessagesAreEscaped) {
  const RunResult r = run({}, {"no-such\x1b[31m\nkvremap run: forged"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_EQ(r.err, "kvremap run: cannot run 'no-such\\x1b[31m\\x0akvremap run: forged': No such file or directory\n");
}

TEST(Run, TheEnvironmentNamesTheTraceAndProfileDirectoriesAndKeepsTheRest) {
  const std::string print = "echo \"$KVREMAP_TRACE_DIR|$KVREMAP_PROFILE_DIR|$RUN_TEST_VALUE\"";
  const std::string traces = make_temp_dir() + "/a/b", profiles = make_temp_dir() + "/p";
  RunResult r = run({"--trace-dir", traces, "--profile-dir", profiles}, {"/bin/sh", "-c", print},
                    {"RUN_TEST_VALUE=kept as it was"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, traces + "|" + profiles + "|kept as it was\n");
  EXPECT_TRUE(fs::is_directory(traces)) << "created like mkdir -p";

  const std::string from_env = make_temp_dir() + "/env-traces";
  r = run({}, {"/bin/sh", "-c", print}, {"KVREMAP_TRACE_DIR=" + from_env});
  EXPECT_EQ(r.out, from_env + "||\n");
  EXPECT_TRUE(fs::is_directory(from_env));

  // Neither, with --discard-traces: a private directory under $TMPDIR, gone when kvremap run ends.
  const std::string tmp = make_temp_dir();
  r = run({"--discard-traces"}, {"/bin/sh", "-c", print}, {"TMPDIR=" + tmp});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string private_dir = r.out.substr(0, r.out.find('|'));
  EXPECT_EQ(fs::path(private_dir).parent_path(), fs::path(tmp)) << r.out;
  EXPECT_FALSE(fs::exists(private_dir));
  EXPECT_TRUE(fs::is_empty(tmp));
}

TEST(Run, AnExistingPreloadStaysFirstAndTheLibraryIsAddedOnce) {
  const Preload p = split_preload();
  const std::string first = (p.runtime.empty() ? "" : p.runtime + " ") + "libm.so.6";
  const std::string first_joined = (p.runtime.empty() ? "" : p.runtime + ":") + "libm.so.6";
  const std::vector<std::string> print = {"/bin/sh", "-c", "echo \"$LD_PRELOAD\""};
  RunResult r =
      run_program(kvremap_run({}, print), {"LD_PRELOAD=" + first}, {"KVREMAP_TRACE_DIR", "KVREMAP_PROFILE_DIR"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, first_joined + ":" + p.library + "\n");

  // Already there (under another spelling of its path): left as it is.
  const std::string link = link_as(p.library, "libkvremap.so");
  const std::string already = first + ":" + link;
  r = run_program(kvremap_run({}, print), {"LD_PRELOAD=" + already}, {"KVREMAP_TRACE_DIR", "KVREMAP_PROFILE_DIR"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, already + "\n");
}

// SIGTERM and SIGINT sent to kvremap (not by a terminal) reach the command, whose trap records it.
TEST(Run, SignalsSentToKvremapReachTheCommand) {
  const std::string script = write_script(R"(mark=$1; sig=$2; status=$3
trap 'echo "$sig" > "$mark"; kill $pid 2>/dev/null; exit $status' "$sig"
sleep 1000 & pid=$!
echo ready
wait $pid
echo "the wait ended without $sig" >&2
exit 99
)");
  for (const auto& [name, number, status] : {std::tuple{"TERM", SIGTERM, 7}, std::tuple{"INT", SIGINT, 8}}) {
    const std::string mark = make_temp_dir() + "/mark";
    std::string err;
    const int wait_status =
        signal_when_ready(kvremap_run({}, {"/bin/sh", script, mark, name, std::to_string(status)}), number, err);
    ASSERT_TRUE(WIFEXITED(wait_status)) << name << ": kvremap did not exit by itself; " << slurp(err);
    EXPECT_EQ(WEXITSTATUS(wait_status), status) << name << ": " << slurp(err);
    EXPECT_EQ(slurp(mark), std::string(name) + "\n") << name;
  }
}

// The library's `kv restart` event in a trace of the start is the only evidence of a deficit: with
// it, a failed start (75, or a front process's own status for a worker's exit) runs once more.
TEST(Run, RestartsExactlyOnceAndOnlyOnTheTracesRestartEvent) {
  const std::string script = write_script(kCountingScript);
  struct Case {
    std::vector<std::string> statuses;
    int expected_exit;
    int expected_starts;
  };
  for (const Case& c : {Case{{"75r", "75r"}, 75, 2}, Case{{"75r", "0"}, 0, 2}, Case{{"1r", "0"}, 0, 2},
                        Case{{"1", "75r"}, 1, 1}, Case{{"0"}, 0, 1}, Case{{"0r", "75"}, 0, 1},
                        Case{{"78", "75r"}, 78, 1}}) {
    const std::string count = make_temp_dir() + "/starts";
    std::vector<std::string> command = {"/bin/sh", script, count};
    command.insert(command.end(), c.statuses.begin(), c.statuses.end());
    const RunResult r = run({}, command);
    const std::string label = "statuses " + c.statuses.front() + (c.statuses.size() > 1 ? "," + c.statuses[1] : "");
    EXPECT_EQ(r.exit_code, c.expected_exit) << label << ": " << r.err;
    EXPECT_EQ(slurp(count), std::to_string(c.expected_starts) + "\n") << label;
    EXPECT_EQ(count_of(r.err, kRestartLine), c.expected_starts == 2 ? 1u : 0u) << label << ": " << r.err;
  }
}

// A command's own status 75 without the library's `kv restart` event is no deficit: no second start,
// no restart line, and the 75 is kvremap's status.
TEST(Run, ABareExit75IsPassedThroughWithoutARestart) {
  const std::string script = write_script(kCountingScript);
  const std::string count = make_temp_dir() + "/starts";
  const std::string traces = make_temp_dir();
  for (const auto& options : {std::vector<std::string>{}, std::vector<std::string>{"--trace-dir", traces}}) {
    std::filesystem::remove(count);
    const RunResult r = run(options, {"/bin/sh", script, count, "75", "0"});
    EXPECT_EQ(r.exit_code, 75) << r.err;
    EXPECT_EQ(slurp(count), "1\n") << r.err;
    EXPECT_THAT(r.err, Not(HasSubstr("deficit"))) << r.err;
    EXPECT_THAT(r.err, Not(HasSubstr("starting again"))) << r.err;
  }
}

// A deficit exit after the user asked the command to stop ends the run.
TEST(Run, NoRestartAfterAStopSignal) {
  const std::string script = write_script(kWriteRestartTrace + R"(count=$1
n=$(( $(cat "$count" 2>/dev/null || echo 0) + 1 ))
echo $n > "$count"
trap 'write_restart_trace; kill $pid 2>/dev/null; exit 75' TERM
sleep 1000 & pid=$!
echo ready
wait $pid
exit 0
)");
  const std::string count = make_temp_dir() + "/starts";
  std::string err;
  const int status = signal_when_ready(kvremap_run({}, {"/bin/sh", script, count}), SIGTERM, err);
  ASSERT_TRUE(WIFEXITED(status)) << slurp(err);
  EXPECT_EQ(WEXITSTATUS(status), 75) << slurp(err);
  EXPECT_EQ(slurp(count), "1\n");
  EXPECT_THAT(slurp(err), Not(HasSubstr(kRestartLine)));
}

namespace {

const kvremap::trace::OtherEvent* find_event(const kvremap::trace::Trace& t, const std::string& name) {
  const kvremap::trace::OtherEvent* found = nullptr;
  for (const auto& e : t.other_events)
    if (e.name == name) found = &e;  // the last: "kv profile written" comes after the commit and at exit
  return found;
}

std::string signed_bytes(std::int64_t bytes) {
  if (bytes == 0) return "0 B";
  return (bytes < 0 ? "-" : "+") +
         kvremap::policy::format_bytes(bytes < 0 ? 0 - static_cast<std::uint64_t>(bytes) : bytes);
}

}  // namespace

// The seed start-up at 0.95 as two ranks, each its own process on its own device: one summary line
// per process, with the figures of its trace's "kv committed".
TEST(Run, ASummaryLinePerRankWithItsCommittedFigures) {
  const std::string traces = make_temp_dir(), profiles = make_temp_dir();
  std::vector<std::string> env = kvremap::testing::scenario_simcuda_env(VLLM_LIKE, SEED_SCENARIO, 2);
  env.push_back("KVREMAP_MODE=defer");
  const RunResult r =
      run({"--trace-dir", traces, "--profile-dir", profiles},
          {link_as(VLLM_LIKE, "vllm"), "--scenario", SEED_SCENARIO, "--gpu-memory-utilization", "0.95", "--ranks", "2"},
          env, 240);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("kvremap run: 2 process traces in " + traces + "\n"));

  const std::regex line_pattern(R"(kvremap run: attempt 1, pid ([0-9]+), device ([0-9]+): ([^\n]*))");
  std::map<std::int64_t, std::pair<int, std::string>> lines;  // pid -> device, the rest of the line
  for (std::sregex_iterator it(r.err.begin(), r.err.end(), line_pattern), end; it != end; ++it)
    lines[std::stoll((*it)[1])] = {std::stoi((*it)[2]), (*it)[3]};
  ASSERT_EQ(lines.size(), 2u) << r.err;

  const auto files = trace_files(traces);
  ASSERT_EQ(files.size(), 2u);
  std::vector<int> devices;
  for (const std::string& file : files) {
    const auto trace = kvremap::trace::read_trace(file);
    const auto line = lines.find(trace.header.pid);
    ASSERT_NE(line, lines.end()) << "no summary line for " << file << ":\n" << r.err;
    const auto* deferred = find_event(trace, "kv deferred");
    const auto* committed = find_event(trace, "kv committed");
    const auto* written = find_event(trace, "kv profile written");
    ASSERT_NE(deferred, nullptr);
    ASSERT_NE(committed, nullptr);
    ASSERT_NE(written, nullptr);
    const auto& c = committed->args;
    EXPECT_EQ(line->second.first, c.at("device").get<int>());
    devices.push_back(line->second.first);
    const std::string figures =
        "KV requested " + kvremap::policy::format_bytes(deferred->args.at("deferred_bytes").get<std::uint64_t>()) +
        ", committed " + kvremap::policy::format_bytes(c.at("device_bytes").get<std::uint64_t>()) + " on device + " +
        kvremap::policy::format_bytes(c.at("host_bytes").get<std::uint64_t>()) + " on host, margin " +
        signed_bytes(c.at("margin_bytes").get<std::int64_t>()) + ";";
    EXPECT_TRUE(line->second.second.starts_with(figures)) << line->second.second << "\nexpected: " << figures;
    EXPECT_GT(c.at("host_bytes").get<std::uint64_t>(), 0u) << "0.95 does not fit on the seed device";
    // What start-up work needed is named beneath, not given as per-category rises.
    EXPECT_THAT(line->second.second, Not(HasSubstr("post-KV peaks")));
    EXPECT_THAT(line->second.second, HasSubstr("; profile written: " + written->args.at("path").get<std::string>()));
    EXPECT_TRUE(written->args.at("path").get<std::string>().starts_with(profiles + "/"));
    // Nothing shifted this first start: the engine's command line is already the same start.
    EXPECT_EQ(c.at("same_start_flags").get<std::string>(), "");
    EXPECT_THAT(line->second.second, Not(HasSubstr("same start without kvremap")));
  }
  std::sort(devices.begin(), devices.end());
  EXPECT_EQ(devices, (std::vector<int>{0, 1}));
  EXPECT_EQ(count_of(r.err, "\n  post-KV warm-up (compilation, autotuning): peak "), 2u) << r.err;
  EXPECT_EQ(count_of(r.err, "\n  CUDA-graph capture: graph pool "), 2u) << r.err;
}

// KVREMAP_DEFICIT=restart under `kvremap run`, two ranks at 0.95: each rank of the first start writes
// its profile and exits with 75 before serving; kvremap run starts the launch once more, and each rank
// of the second start is sized from its profile and holds its whole KV cache on the device.
TEST(Run, ADeficitRestartsOnceAndTheSecondStartIsSizedFromTheProfiles) {
  const std::string traces = make_temp_dir(), profiles = make_temp_dir();
  std::vector<std::string> env = kvremap::testing::scenario_simcuda_env(VLLM_LIKE, SEED_SCENARIO, 2);
  env.insert(env.end(), {"KVREMAP_DEFICIT=restart"});
  const RunResult r =
      run({"--trace-dir", traces, "--profile-dir", profiles},
          {link_as(VLLM_LIKE, "vllm"), "--scenario", SEED_SCENARIO, "--gpu-memory-utilization", "0.95", "--ranks", "2"},
          env, 240);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_of(r.err, "starting again sized from it"), 1u) << r.err;
  EXPECT_EQ(count_of(r.err, "restart requested"), 2u) << r.err;
  EXPECT_EQ(count_of(r.err, "sized from profile"), 2u) << r.err;
  EXPECT_EQ(count_of(r.err, "same start without kvremap: --kv-cache-memory "), 2u) << r.err;
  const auto files = trace_files(traces);
  ASSERT_EQ(files.size(), 4u) << "two ranks, two attempts";
  int committed = 0;
  for (const std::string& file : files) {
    const auto trace = kvremap::trace::read_trace(file);
    const auto* c = find_event(trace, "kv committed");
    if (!c) {
      EXPECT_NE(find_event(trace, "kv restart"), nullptr) << file;
      continue;
    }
    ++committed;
    EXPECT_EQ(c->args.at("host_bytes").get<std::uint64_t>(), 0u) << file;
    EXPECT_NE(find_event(trace, "kv sizing adjusted"), nullptr) << file;
  }
  EXPECT_EQ(committed, 2);
}

// A process the command started in the background writes its trace after the command has exited.
// With --discard-traces the private directory stays while such a process runs, named on stderr, and
// the trace lands in it.
TEST(Run, APrivateTraceDirectoryStaysWhileAProcessTheCommandStartedRuns) {
  const std::string tmp = make_temp_dir();
  const std::string fifo = make_temp_dir() + "/go";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string done = make_temp_dir() + "/done";
  // The background engine starts only once the test writes to the FIFO: after kvremap run has ended.
  const std::string script = write_script(R"(fifo=$1; done=$2; shift 2
( read go < "$fifo"; "$@"; echo $? > "$done.tmp"; mv "$done.tmp" "$done" ) </dev/null >/dev/null 2>&1 &
exit 0
)");
  std::vector<std::string> env = kvremap::testing::scenario_simcuda_env(VLLM_LIKE, SEED_SCENARIO, 1);
  env.push_back("TMPDIR=" + tmp);
  const RunResult r = run({"--discard-traces"}, {"/bin/sh", script, fifo, done, link_as(VLLM_LIKE, "vllm"), "--scenario", SEED_SCENARIO,
                               "--gpu-memory-utilization", "0.9"},
                          env);
  // Release the background process whatever happened above, so that none is left waiting. The
  // bounds here and below only keep a broken build from hanging the suite.
  bool released = false;
  for (int waited_ms = 0; !released && waited_ms < 60000; waited_ms += 10) {
    const int fd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) {
      released = write(fd, "go\n", 3) == 3;
      close(fd);
    } else {
      usleep(10000);
    }
  }
  ASSERT_TRUE(released) << "the background process never opened the FIFO";
  EXPECT_EQ(r.exit_code, 0) << r.err;

  std::vector<std::string> kept;
  for (const auto& entry : fs::directory_iterator(tmp)) kept.push_back(entry.path().string());
  ASSERT_EQ(kept.size(), 1u) << "the private directory was removed under the background process:\n" << r.err;
  EXPECT_TRUE(fs::path(kept[0]).filename().string().starts_with("kvremap-run-")) << kept[0];
  EXPECT_THAT(r.err, HasSubstr("kvremap run: processes the command started still run; their trace directory " +
                               kept[0] + " is kept: remove it once they have ended\n"));
  EXPECT_EQ(count_of(r.err, "\n"), 2u) << "that line and 'no process wrote a kvremap trace':\n" << r.err;

  for (int waited_ms = 0; !fs::exists(done) && waited_ms < 240000; waited_ms += 20) usleep(20000);
  ASSERT_EQ(slurp(done), "0\n") << "the background engine did not finish";
  const auto traces = trace_files(kept[0]);
  ASSERT_EQ(traces.size(), 1u);
  const auto trace = kvremap::trace::read_trace(traces[0]);
  EXPECT_TRUE(trace.complete) << traces[0];
  EXPECT_THAT(trace.header.cmdline, HasSubstr("--gpu-memory-utilization 0.9"));
  fs::remove_all(kept[0]);
}

// A KVREMAP_* value the library would fall back from (KVREMAP_MODE=fast turns deferral off) or an unknown name
// stops `kvremap run` and `kvremap size` before the command starts: status 2, the library's line, what to do.
TEST(Run, ABadKvremapVariableStopsTheRunBeforeTheCommandStarts) {
  const std::string marker = make_temp_dir() + "/started";
  const std::vector<std::string> touch = {"/bin/sh", "-c", "touch " + marker};
  const std::string not_started =
      "the command was not started: fix or unset the variable above (the library alone, under plain LD_PRELOAD, "
      "falls back as each line says)\n";

  RunResult r = run({}, touch, {"KVREMAP_MODE=fast"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_FALSE(fs::exists(marker)) << "the command ran:\n" << r.err;
  EXPECT_THAT(r.err, HasSubstr("KVREMAP_MODE"));
  EXPECT_THAT(r.err, HasSubstr("fast"));
  EXPECT_THAT(r.err, HasSubstr("kvremap run: " + not_started));
  EXPECT_EQ(count_of(r.err, "\n"), 2u) << r.err;

  r = run({}, touch, {"KVREMAP_TRACEDIR=" + make_temp_dir()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_FALSE(fs::exists(marker));
  EXPECT_THAT(r.err, HasSubstr("kvremap: unknown variable KVREMAP_TRACEDIR (did you mean KVREMAP_TRACE_DIR?)"));
  EXPECT_THAT(r.err, HasSubstr("kvremap run: " + not_started));

  std::vector<std::string> size = kvremap_run({"--profile-dir", make_temp_dir()}, touch);
  size[1] = "size";
  std::vector<std::string> env = base_env();
  env.push_back("KVREMAP_HEADROOM=lots");
  r = run_program(size, env, base_unset());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_FALSE(fs::exists(marker));
  EXPECT_THAT(r.err, HasSubstr("KVREMAP_HEADROOM"));
  EXPECT_THAT(r.err, HasSubstr("kvremap size: " + not_started));
}

// Without --trace-dir the traces stay in a new run directory under $XDG_STATE_HOME/kvremap/runs, and the summary
// ends with the commands that read it; each reader takes the directory for the traces in it. An option the engine
// set in its own environment, which kvremap run could not check, is repeated from the trace.
TEST(Run, TracesAreKeptInARunDirectoryThatEveryReaderTakes) {
  const std::string state = make_temp_dir();
  std::vector<std::string> env = kvremap::testing::scenario_simcuda_env(VLLM_LIKE, SEED_SCENARIO, 1);
  env.push_back("XDG_STATE_HOME=" + state);
  const RunResult r = run({}, {"/bin/sh", "-c", "KVREMAP_LOG_LEVEL=loud exec \"$@\"", "sh", link_as(VLLM_LIKE, "vllm"),
                               "--scenario", SEED_SCENARIO, "--gpu-memory-utilization", "0.9"},
                          env, 240);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<fs::path> runs;
  for (const auto& entry : fs::directory_iterator(state + "/kvremap/runs")) runs.push_back(entry.path());
  ASSERT_EQ(runs.size(), 1u) << r.err;
  const std::string dir = runs[0].string();
  EXPECT_TRUE(std::regex_match(runs[0].filename().string(), std::regex(R"([0-9]{8}T[0-9]{6}Z-[0-9]+)"))) << dir;
  EXPECT_EQ(fs::status(dir).permissions() & fs::perms::all, fs::perms::owner_all);
  ASSERT_EQ(trace_files(dir).size(), 1u) << r.err;
  EXPECT_THAT(r.err, HasSubstr("kvremap run: 1 process trace in " + dir + "\n"));
  EXPECT_THAT(r.err, HasSubstr("kvremap run: an option fell back in pid "));
  EXPECT_THAT(r.err, HasSubstr("KVREMAP_LOG_LEVEL"));
  EXPECT_TRUE(r.err.ends_with("kvremap run: look at them with:\n  kvremap report " + dir + "\n  kvremap plot " + dir +
                              " -o " + dir + "/memory.html\n  kvremap validate " + dir + "\n"))
      << r.err;

  const auto cli = [](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {KVREMAP_CLI};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_program(argv, {});
  };
  const std::string trace = trace_files(dir)[0];
  RunResult tool = cli({"report", dir});
  EXPECT_EQ(tool.exit_code, 0) << tool.err;
  EXPECT_EQ(tool.out, cli({"report", trace}).out);
  tool = cli({"validate", dir});
  EXPECT_EQ(tool.exit_code, 0) << tool.err;
  EXPECT_EQ(tool.out, cli({"validate", trace}).out);
  tool = cli({"plot", dir, "-o", dir + "/memory.html"});
  EXPECT_EQ(tool.exit_code, 0) << tool.err;
  EXPECT_TRUE(fs::is_regular_file(dir + "/memory.html"));
  tool = cli({"diff", dir, dir});
  EXPECT_EQ(tool.exit_code, 0) << tool.err;
  EXPECT_EQ(tool.out, cli({"diff", trace, trace}).out);
  const std::string merged = make_temp_dir() + "/merged.json";
  tool = cli({"merge", dir, "-o", merged});
  EXPECT_EQ(tool.exit_code, 0) << tool.err;
  EXPECT_THAT(tool.out, HasSubstr(merged + ": 1 traces"));

  const std::string empty = make_temp_dir();
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"report", empty}, {"validate", empty}, {"plot", empty, "-o", empty + "/p.html"},
        {"merge", empty, "-o", empty + "/m.json"}, {"diff", empty, trace}}) {
    tool = cli(args);
    EXPECT_EQ(tool.exit_code, 2) << args[0] << ": " << tool.err;
    EXPECT_EQ(tool.err, "kvremap " + args[0] + ": " + empty +
                            ": the directory holds no trace files (*.json); name a directory kvremap run wrote, or "
                            "trace files\n");
  }
}
