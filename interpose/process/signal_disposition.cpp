// The program's SIGTERM/SIGINT dispositions, where kvremap's summary handler stands in for a default one.
// Compiled uninstrumented in a sanitized build (interpose/CMakeLists.txt): a sanitizer runtime installs
// its own handlers through sigaction (the hook) while it starts, before its shadow state exists.
#include "interpose/process/signal_disposition.h"

#include <atomic>
#include <cerrno>

#include "interpose/driver/real.h"

namespace kvremap::interpose {
namespace {

int slot_of(int sig) { return sig == SIGTERM ? 0 : sig == SIGINT ? 1 : -1; }

// The disposition kvremap found and stands in for, as sigaction() reported it (its flags and mask).
struct sigaction g_program_disposition[2] {};
std::atomic<SiginfoHandler> g_stand_in{nullptr};
constinit std::atomic<SigactionFn> g_real_sigaction{nullptr};

// The one test of "kvremap's handler is installed for sig now": `current` receives the disposition.
bool query_stands_in(SigactionFn real, int sig, struct sigaction& current) {
  if (real(sig, nullptr, &current) != 0) return false;
  SiginfoHandler handler = g_stand_in.load(std::memory_order_acquire);
  return handler != nullptr && (current.sa_flags & SA_SIGINFO) && current.sa_sigaction == handler;
}

}  // namespace

SigactionFn real_sigaction() {
  SigactionFn fn = g_real_sigaction.load(std::memory_order_acquire);
  if (fn == nullptr) {
    fn = reinterpret_cast<SigactionFn>(next_definition("sigaction"));
    g_real_sigaction.store(fn, std::memory_order_release);
  }
  return fn;
}

bool stand_in_for_default(int sig, SiginfoHandler handler) {
  SigactionFn real = real_sigaction();
  const int slot = slot_of(sig);
  if (real == nullptr || slot < 0) return false;
  struct sigaction current {};
  if (real(sig, nullptr, &current) != 0) return false;
  if ((current.sa_flags & SA_SIGINFO) || current.sa_handler != SIG_DFL) return false;
  g_program_disposition[slot] = current;
  g_stand_in.store(handler, std::memory_order_release);
  struct sigaction action {};
  action.sa_sigaction = handler;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  return real(sig, &action, nullptr) == 0;
}

void restore_program_disposition(int sig) {
  SigactionFn real = real_sigaction();
  const int slot = slot_of(sig);
  if (real != nullptr && slot >= 0) real(sig, &g_program_disposition[slot], nullptr);
}

int program_sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  SigactionFn real = real_sigaction();
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  struct sigaction current {};
  if (slot_of(sig) < 0 || !query_stands_in(real, sig, current)) return real(sig, act, old);
  // kvremap's handler stands in: report the program's own disposition; a new one replaces kvremap's.
  if (act != nullptr && real(sig, act, nullptr) != 0) return -1;
  if (old != nullptr) *old = g_program_disposition[slot_of(sig)];
  return 0;
}

bool stands_in_for(int sig) {
  SigactionFn real = real_sigaction();
  struct sigaction current {};
  return slot_of(sig) >= 0 && real != nullptr && query_stands_in(real, sig, current);
}

}  // namespace kvremap::interpose
