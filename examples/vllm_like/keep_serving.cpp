// SIGTERM and SIGINT under VLLM_LIKE_KEEP_SERVING=1: held, forwarded down the process tree, waited for (keep_serving.h).
#include "keep_serving.h"

#include <pthread.h>
#include <signal.h>

#include <thread>

namespace vllm_like {
namespace {

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

void block_stop_signals() {
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void forward_stop_signals(std::vector<pid_t> children) {
  std::thread([children = std::move(children)] {
    for (;;) {
      wait_for_stop_signal();
      for (const pid_t child : children)
        if (child > 0) kill(child, SIGTERM);
    }
  }).detach();
}

int wait_for_stop_signal() {
  const sigset_t set = stop_signals();
  int signal = 0;
  while (sigwait(&set, &signal) != 0) {
  }
  return signal;
}

}  // namespace vllm_like
