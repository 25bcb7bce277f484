// The front process, the fork or spawn of the engine process, and its renaming (process_tree.h).
#include "process_tree.h"

#include "keep_serving.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace vllm_like {

namespace {

constexpr std::string_view kBootstrap = "from multiprocessing.spawn import spawn_main; spawn_main(";
constexpr std::string_view kPipeHandle = "pipe_handle=";

// The engine process dies with the front process, as the engines' children do when their parent is gone.
void die_with_parent(pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
}

[[noreturn]] void exec_spawned(int pipe_read) {
  const std::string bootstrap = std::string(kBootstrap) + "tracker_fd=-1, " + std::string(kPipeHandle) +
                                std::to_string(pipe_read) + ")";
  std::string python = "python3", dash_c = "-c", flag = "--multiprocessing-fork";
  std::string code = bootstrap;
  char* argv[] = {python.data(), dash_c.data(), code.data(), flag.data(), nullptr};
  execv("/proc/self/exe", argv);
  std::fprintf(stderr, "vllm_like: engine process: exec failed: %s\n", std::strerror(errno));
  _exit(127);
}

int wait_for(pid_t pid) {
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0)
    if (errno != EINTR) return 1;
  return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
}

}  // namespace

std::optional<int> start_engine_process(StartMethod method, const std::vector<std::string>& engine_args,
                                        bool forward_stop) {
  std::fflush(nullptr);  // nothing buffered may be written twice
  int fds[2] = {-1, -1};
  if (method == StartMethod::spawn && pipe(fds) != 0) {
    std::fprintf(stderr, "vllm_like: engine process: pipe failed: %s\n", std::strerror(errno));
    return 1;
  }
  const pid_t front = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    std::fprintf(stderr, "vllm_like: engine process: fork failed: %s\n", std::strerror(errno));
    return 1;
  }
  if (pid == 0) {
    die_with_parent(front);
    if (method == StartMethod::fork) return std::nullopt;
    close(fds[1]);
    exec_spawned(fds[0]);
  }
  if (method == StartMethod::spawn) {
    close(fds[0]);
    // The arguments, each NUL-terminated: what multiprocessing pickles into the pipe.
    std::string payload;
    for (const std::string& a : engine_args) payload.append(a).push_back('\0');
    std::size_t sent = 0;
    while (sent < payload.size()) {
      const ssize_t n = write(fds[1], payload.data() + sent, payload.size() - sent);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      sent += static_cast<std::size_t>(n);
    }
    close(fds[1]);
  }
  if (forward_stop) forward_stop_signals({pid});
  return wait_for(pid);
}

std::optional<std::vector<std::string>> spawned_engine_arguments(int argc, char** argv) {
  if (argc != 4 || std::string_view(argv[3]) != "--multiprocessing-fork") return std::nullopt;
  const std::string_view code = argv[2];
  const std::size_t at = code.find(kPipeHandle);
  if (!code.starts_with(kBootstrap) || at == std::string_view::npos) return std::nullopt;
  const int fd = std::atoi(code.data() + at + kPipeHandle.size());
  std::string payload;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    payload.append(buffer, static_cast<std::size_t>(n));
  }
  close(fd);
  std::vector<std::string> args;
  for (std::size_t start = 0; start < payload.size();) {
    const std::size_t end = payload.find('\0', start);
    if (end == std::string::npos) break;
    args.push_back(payload.substr(start, end - start));
    start = end + 1;
  }
  return args;
}

void set_process_title(int argc, char** argv, const std::string& title) {
  if (argc < 1) return;
  // The argv strings lie one after another; setproctitle takes the whole area.
  char* const begin = argv[0];
  char* end = argv[0] + std::strlen(argv[0]) + 1;
  for (int i = 1; i < argc; ++i)
    if (argv[i] == end) end = argv[i] + std::strlen(argv[i]) + 1;
  const std::size_t room = static_cast<std::size_t>(end - begin);
  std::memset(begin, 0, room);
  std::memcpy(begin, title.data(), std::min(title.size(), room - 1));
  prctl(PR_SET_NAME, title.c_str());
}

}  // namespace vllm_like
