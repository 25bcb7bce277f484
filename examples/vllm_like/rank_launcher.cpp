// The --ranks launcher of vllm_like: fork/exec one engine per rank, wait for all, report failures.
#include "rank_launcher.h"

#include "keep_serving.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace vllm_like {

namespace {

// The child runs this program (by /proc/self/exe, so a relative argv[0] after chdir cannot miss)
// under the launcher's own name, with the engine arguments and the rank's device.
[[noreturn]] void exec_rank(const std::string& name, int rank, int ranks, const std::vector<std::string>& engine_args) {
  const std::string rank_text = std::to_string(rank);
  setenv("RANK", rank_text.c_str(), 1);
  setenv("LOCAL_RANK", rank_text.c_str(), 1);
  setenv("WORLD_SIZE", std::to_string(ranks).c_str(), 1);
  std::vector<std::string> args{name};
  args.insert(args.end(), engine_args.begin(), engine_args.end());
  args.push_back("--device");
  args.push_back(rank_text);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv("/proc/self/exe", argv.data());
  std::fprintf(stderr, "vllm_like: rank %d: exec failed: %s\n", rank, std::strerror(errno));
  _exit(127);
}

}  // namespace

int launch_ranks(const std::string& name, int ranks, const std::vector<std::string>& engine_args, bool forward_stop) {
  std::fflush(nullptr);  // nothing buffered may be written twice by the children
  std::vector<pid_t> pids;
  for (int rank = 0; rank < ranks; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) exec_rank(name, rank, ranks, engine_args);
    if (pid < 0) {
      std::fprintf(stderr, "vllm_like: rank %d: fork failed: %s\n", rank, std::strerror(errno));
      pids.push_back(-1);
      continue;
    }
    pids.push_back(pid);
  }
  if (forward_stop) forward_stop_signals(pids);
  int result = 0;
  for (int rank = 0; rank < ranks; ++rank) {
    int code = 1;
    if (pids[rank] > 0) {
      int wstatus = 0;
      while (waitpid(pids[rank], &wstatus, 0) < 0 && errno == EINTR) {
      }
      if (WIFEXITED(wstatus)) {
        code = WEXITSTATUS(wstatus);
        if (code == 0)
          std::printf("vllm_like: rank %d (device %d) started\n", rank, rank);
        else
          std::fprintf(stderr, "vllm_like: rank %d (device %d) failed: exit status %d\n", rank, rank, code);
      } else {
        code = 128 + WTERMSIG(wstatus);
        std::fprintf(stderr, "vllm_like: rank %d (device %d) failed: killed by signal %d\n", rank, rank,
                     WTERMSIG(wstatus));
      }
    }
    if (code != 0 && result == 0) result = code;
  }
  if (result == 0) std::printf("vllm_like: all %d ranks started\n", ranks);
  return result;
}

}  // namespace vllm_like
