// Child-process runner for integration tests: fork/exec with pipes, an environment, and a timeout.
#include <algorithm>
#include "run_program.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace kvremap::testing {

std::vector<std::string> child_environment(const std::vector<std::string>& env, const std::vector<std::string>& unset) {
  std::vector<std::string> environment;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    bool dropped = false;
    for (const auto& u : unset) dropped |= name == u;
    for (const auto& o : env) dropped |= name == o.substr(0, o.find('='));
    if (!dropped) environment.push_back(entry);
  }
  environment.insert(environment.end(), env.begin(), env.end());
  // Each run starts without profiles unless the test names a profile directory: a profile one test
  // left behind must never size another test's start.
  const bool profiles_named = std::any_of(env.begin(), env.end(), [](const std::string& e) {
    return e.starts_with("KVREMAP_PROFILE_DIR=") || e.starts_with("XDG_CACHE_HOME=");
  });
  if (!profiles_named) {
    std::erase_if(environment, [](const std::string& e) { return e.starts_with("XDG_CACHE_HOME="); });
    environment.push_back("XDG_CACHE_HOME=" + make_temp_dir());
  }
  // Likewise the state directory, where `kvremap run` keeps its runs' traces: never the user's own.
  if (std::none_of(env.begin(), env.end(), [](const std::string& e) { return e.starts_with("XDG_STATE_HOME="); })) {
    std::erase_if(environment, [](const std::string& e) { return e.starts_with("XDG_STATE_HOME="); });
    environment.push_back("XDG_STATE_HOME=" + make_temp_dir());
  }
  return environment;
}

std::uint64_t trace_bytes(const std::string& dir) {
  std::uint64_t total = 0;
  for (const std::string& file : trace_files(dir)) {
    struct stat st {};
    if (::stat(file.c_str(), &st) == 0) total += static_cast<std::uint64_t>(st.st_size);
  }
  return total;
}

int kill_at_trace_bytes(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                        const std::string& trace_dir, std::uint64_t bytes) {
  std::vector<std::string> environment = child_environment(env);
  std::vector<std::string> argv_copy = argv;
  std::vector<char*> args, envp;
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);
  for (auto& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t child = fork();
  if (child < 0) throw std::runtime_error("fork failed");
  if (child == 0) {
    const int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  int status = 0;
  for (;;) {
    if (waitpid(child, &status, WNOHANG) == child) return status;
    if (trace_bytes(trace_dir) >= bytes) break;
    const timespec poll_interval{0, 200'000};
    nanosleep(&poll_interval, nullptr);
  }
  kill(child, SIGKILL);
  waitpid(child, &status, 0);
  return status;
}

int repetitions(int full, int short_form, int least) {
  const char* long_tests = std::getenv("KVREMAP_LONG_TESTS");
  const int wanted = long_tests != nullptr && std::string(long_tests) == "1" ? full : short_form;
  return std::max(least, wanted / KVREMAP_TEST_SLOWDOWN);
}

RunResult run_program(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                      const std::vector<std::string>& unset, int timeout_s, int timeout_signal,
                      const std::string& cwd) {
  std::vector<std::string> environment = child_environment(env, unset);
  std::vector<char*> envp, args;
  for (auto& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) throw std::runtime_error("pipe failed");
  const pid_t child = fork();
  if (child == 0) {
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    // Only 1 and 2 may reach the program: a copy of a pipe's write end that a background descendant
    // inherits would hold the run open until that descendant ends.
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]})
      if (fd > 2) close(fd);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  RunResult result;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  bool signalled = false;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[4096];
  while (open_fds > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      if (signalled) {
        kill(child, SIGKILL);  // it ignored the first signal for 10 s
        break;
      }
      // Keep reading what it writes while it reacts: closing the pipes now would kill it with SIGPIPE.
      kill(child, timeout_signal);
      signalled = true;
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      continue;
    }
    if (poll(fds, 2, static_cast<int>(left.count())) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        (i == 0 ? result.out : result.err).append(buf, static_cast<std::size_t>(n));
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) close(f.fd);
  int status = 0;
  waitpid(child, &status, 0);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

std::string make_temp_dir() {
  std::string templ = std::string(KVREMAP_TEST_TMP) + "/kvremap-XXXXXX";
  if (!mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
  return templ;
}

std::string link_as(const std::string& target, const std::string& name) {
  const std::string link = make_temp_dir() + "/" + name;
  if (symlink(target.c_str(), link.c_str()) != 0) throw std::runtime_error("symlink failed: " + link);
  return link;
}

std::vector<std::string> scenario_simcuda_env(const std::string& vllm_like, const std::string& scenario, int ranks) {
  std::vector<std::string> argv = {vllm_like, "--scenario", scenario, "--print-simcuda-env"};
  if (ranks > 1) {
    argv.push_back("--ranks");
    argv.push_back(std::to_string(ranks));
  }
  const RunResult r = run_program(argv, {});
  std::vector<std::string> env;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("SIMCUDA_", 0) == 0) env.push_back(line);
  return env;
}

std::vector<std::string> trace_files(const std::string& dir) {
  std::vector<std::string> files;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* entry = readdir(d)) {
      const std::string name = entry->d_name;
      if (name.rfind("kvremap-", 0) == 0 && name.size() > 5 && name.substr(name.size() - 5) == ".json")
        files.push_back(dir + "/" + name);
    }
    closedir(d);
  }
  return files;
}

Preload split_preload(const std::string& preload) {
  const auto space = preload.rfind(' ');
  if (space == std::string::npos) return {"", preload};
  return {preload.substr(0, space), preload.substr(space + 1)};
}

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace kvremap::testing
