// Exit handling: the summary at atexit, and on SIGTERM/SIGINT when they would kill the process.
#include "interpose/process/exit_handlers.h"

#include <signal.h>

#include <atomic>
#include <cstdlib>

#include "interpose/base/guard.h"
#include "interpose/base/hook_threads.h"
#include "interpose/kv/kv_manager.h"
#include "interpose/trace/trace_writer.h"
#include "interpose/track/tracker.h"
#include "interpose/track/track_events.h"
#include "interpose/track/tracking_state.h"

namespace kvremap::interpose {
namespace tracker_detail {
namespace {

const char* g_signal_reason = "";

// Runs on the trace writer's thread, outside any signal handler.
void write_summary_for_signal() {
  try {
    trace().close(summary_json(g_signal_reason));
  } catch (...) {
  }
}

// Best effort from a signal handler, which may neither allocate nor take a lock (the interrupted
// code may hold malloc's or kvremap's): the summary is written by the trace writer's thread while
// this one waits at most a second. If the writer cannot finish by then (it waits on a lock the
// interrupted code holds), the trace stays a loadable file without a summary, as if the process had
// been killed.
void finish_from_signal(const char* reason) {
  // Inside one of kvremap's hooks on this thread, its locks may be held: no summary then.
  if (inside_hook() || g_finished.exchange(true)) return;
  const State* state = g_state.peek();
  if (!state || !state->trace_opened.load() || g_disabled.load()) return;
  g_signal_reason = reason;
  trace().run_on_writer(write_summary_for_signal, 1000);
}

struct sigaction g_previous_term {};
struct sigaction g_previous_int {};

void on_signal(int sig) {
  // Chain to what the program had installed. Only when the signal would kill the process outright
  // (no handler of its own) is the summary written first: otherwise the program decides whether it
  // exits, and a clean exit writes the summary through atexit.
  const struct sigaction& previous = sig == SIGTERM ? g_previous_term : g_previous_int;
  if (previous.sa_handler == SIG_IGN) return;
  if (previous.sa_handler == SIG_DFL || previous.sa_handler == nullptr) {
    finish_from_signal(sig == SIGTERM ? "SIGTERM" : "SIGINT");
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  if (previous.sa_flags & SA_SIGINFO) {
    previous.sa_sigaction(sig, nullptr, nullptr);
  } else {
    previous.sa_handler(sig);
  }
}

}  // namespace

void install_exit_handlers() {
  // Once per process image: a forked child inherits the atexit entry and the signal dispositions,
  // and installing again would save this library's own handler as the one to chain to, so that a
  // SIGTERM would call it for ever instead of ending the process. (An exec starts a new image.)
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;
  std::atexit([] { finish("atexit"); });
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, &g_previous_term);
  sigaction(SIGINT, &action, &g_previous_int);
}

}  // namespace tracker_detail

using namespace tracker_detail;

void finish(const char* reason) {
  if (g_finished.load()) return;
  kv_at_exit();
  if (g_finished.exchange(true)) return;
  // Hooks that were already running finish their accounting and their records first, so that the
  // summary and the events agree (other threads go on running while one of them calls exit()).
  wait_for_hooks_to_leave(200);
  if (!S().trace_opened.load() || g_disabled.load()) {
    trace().flush_all();
    return;
  }
  try {
    emit_all_counters();
    trace().close(summary_json(reason));
  } catch (...) {
  }
}

}  // namespace kvremap::interpose
