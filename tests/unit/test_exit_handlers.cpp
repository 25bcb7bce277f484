// The exit and signal handlers in-process: installed once per process image, whoever asks again.
#include "interpose/process/exit_handlers.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

// In a child: the handlers asked for twice (a forked child starting tracking of its own asks again,
// and inherits the parent's handlers), then SIGTERM. The child must die of SIGTERM: a handler that
// had saved itself as the previous one would call itself for ever (or until the stack overflows).
int terminated_after_installs(int installs) {
  const pid_t child = fork();
  if (child == 0) {
    for (int i = 0; i < installs; ++i) kvremap::interpose::tracker_detail::install_exit_handlers();
    alarm(10);  // a handler that loops instead of ending the process ends by SIGALRM here
    raise(SIGTERM);
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFSIGNALED(status) ? WTERMSIG(status) : -WEXITSTATUS(status);
}

TEST(ExitHandlers, SigtermEndsTheProcessWhateverTheInstallCount) {
  EXPECT_EQ(terminated_after_installs(1), SIGTERM);
  EXPECT_EQ(terminated_after_installs(2), SIGTERM);
  EXPECT_EQ(terminated_after_installs(3), SIGTERM);
}

}  // namespace
