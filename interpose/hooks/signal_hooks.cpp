// sigaction and signal hooks: the program sees its own SIGTERM/SIGINT disposition while kvremap's
// summary handler stands in for the default one (process/exit_handlers.cpp,
// process/signal_disposition.cpp).
#include <signal.h>

#include <atomic>
#include <cerrno>

#include "interpose/driver/real.h"
#include "interpose/hooks/hook_export.h"
#include "interpose/process/signal_disposition.h"

namespace {

using namespace kvremap::interpose;

std::atomic<void*> g_signal{nullptr};

}  // namespace

KVREMAP_HOOK int sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  return program_sigaction(sig, act, old);
}

// glibc's signal() reaches the kernel through its internal sigaction, past the hook above. Where
// kvremap stands in it is written here with glibc's semantics (SA_RESTART, the signal blocked in its
// own handler); everywhere else libc's signal() runs unchanged.
KVREMAP_HOOK sighandler_t signal(int sig, sighandler_t handler) noexcept {
  if (!stands_in_for(sig)) {
    auto real = cached_real<sighandler_t (*)(int, sighandler_t)>(g_signal, "signal", next_definition);
    if (real == nullptr) {
      errno = ENOSYS;
      return SIG_ERR;
    }
    return real(sig, handler);
  }
  if (handler == SIG_ERR) {
    errno = EINVAL;
    return SIG_ERR;
  }
  struct sigaction action {}, old {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  sigaddset(&action.sa_mask, sig);
  action.sa_flags = SA_RESTART;
  if (program_sigaction(sig, &action, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}
