// Runs a program in a child process with a chosen environment and captures its output and status.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvremap::testing {

struct RunResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  std::string out;
  std::string err;
};

// argv[0] is the program path; `env` entries "NAME=VALUE" are added to (and override) the current
// environment; `unset` names are removed. Waits at most `timeout_s` seconds, then sends
// `timeout_signal` (SIGKILL by default; tests of signal handling pass SIGTERM) and waits for it.
// A non-empty `cwd` is the child's working directory.
RunResult run_program(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                      const std::vector<std::string>& unset = {}, int timeout_s = 60, int timeout_signal = 9,
                      const std::string& cwd = "");

// The current environment with `env` entries ("NAME=VALUE") added or overriding and `unset` names
// removed: what run_program gives its child.
std::vector<std::string> child_environment(const std::vector<std::string>& env, const std::vector<std::string>& unset = {});

// Starts `argv` with run_program's environment (output to /dev/null) and sends it SIGKILL once the kvremap-*.json traces in `trace_dir`
// hold `bytes` bytes together: a kill point set by how far the program has got, not by the clock, so
// a busy machine moves it by at most what the program writes between two polls. Returns the wait
// status (killed, or exited before the trace grew that far).
int kill_at_trace_bytes(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                        const std::string& trace_dir, std::uint64_t bytes);
// The bytes of every kvremap-*.json trace in `dir` together.
std::uint64_t trace_bytes(const std::string& dir);

// How many times a test repeats an expensive run: `full` in the labelled long suite
// (KVREMAP_LONG_TESTS=1, bench/long-tests.sh), `short_form` otherwise, divided by the build's
// KVREMAP_TEST_SLOWDOWN (sanitized builds run programs several times slower), never below `least`.
int repetitions(int full, int short_form, int least = 1);

// A fresh empty directory under the build tree's temp area.
std::string make_temp_dir();
// A symbolic link named `name` to `target` in a fresh temp directory, returned: runs a program under
// another name, e.g. the example engine as `vllm`, which kvremap recognises from the command line.
std::string link_as(const std::string& target, const std::string& name);
// The SIMCUDA_* settings of the simulated device a vllm_like scenario describes, as the engine
// prints them (`--print-simcuda-env`; `ranks` > 1 adds the device count of a multi-rank job).
std::vector<std::string> scenario_simcuda_env(const std::string& vllm_like, const std::string& scenario, int ranks = 1);
// KVREMAP_PRELOAD's parts: "libkvremap.so", or "<sanitizer runtime> libkvremap.so" in a sanitized build, where
// the runtime has to reach every program first.
struct Preload {
  std::string runtime;  // empty outside sanitized builds
  std::string library;
};
Preload split_preload(const std::string& preload);
// How often `needle` occurs in `text` (occurrences may overlap).
std::size_t count_of(const std::string& text, const std::string& needle);
// Every file in `dir` whose name matches kvremap-*.json.
std::vector<std::string> trace_files(const std::string& dir);

}  // namespace kvremap::testing
