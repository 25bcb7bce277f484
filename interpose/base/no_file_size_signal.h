// A scope in which kvremap's own file writes cannot raise SIGXFSZ at the program.
#pragma once

#include <cerrno>
#include <signal.h>
#include <time.h>

namespace kvremap::interpose {

// Under RLIMIT_FSIZE (Slurm, `docker --ulimit fsize`, systemd LimitFSIZE) a write past the limit fails
// with EFBIG and the kernel sends SIGXFSZ to the writing thread, whose default action kills the
// process. kvremap's writes happen on the program's threads, so each one runs with SIGXFSZ blocked
// and, when the write raised it, takes it back before unblocking: the write's EFBIG stops tracing
// (or the profile) with one line, and the program's own writes keep the kernel's behaviour. A
// SIGXFSZ that was already pending before the scope stays pending for the program.
// Async-signal-safe: system calls only.
class NoFileSizeSignal {
 public:
  NoFileSizeSignal() {
    sigemptyset(&only_);
    sigaddset(&only_, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &only_, &previous_);
    sigset_t pending;
    sigemptyset(&pending);
    was_pending_ = sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ) == 1;
  }
  ~NoFileSizeSignal() {
    // sigtimedwait finds nothing pending and sets errno to EAGAIN: the caller's errno is that of the
    // write this guarded, and must reach its error line unchanged.
    const int saved_errno = errno;
    if (!was_pending_) {
      const timespec now{0, 0};
      while (sigtimedwait(&only_, nullptr, &now) == SIGXFSZ) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
    errno = saved_errno;
  }
  NoFileSizeSignal(const NoFileSizeSignal&) = delete;
  NoFileSizeSignal& operator=(const NoFileSizeSignal&) = delete;

 private:
  sigset_t only_{};
  sigset_t previous_{};
  bool was_pending_ = false;
};

}  // namespace kvremap::interpose
