// Exit handling: the summary at atexit, and on SIGTERM/SIGINT where their default action would end the process.
#include "interpose/process/exit_handlers.h"

#include <signal.h>

#include <atomic>
#include <cstdlib>

#include "interpose/base/guard.h"
#include "interpose/base/hook_threads.h"
#include "interpose/kv/kv_manager.h"
#include "interpose/process/signal_disposition.h"
#include "interpose/trace/trace_writer.h"
#include "interpose/track/tracker.h"
#include "interpose/track/track_events.h"
#include "interpose/track/tracking_state.h"

namespace kvremap::interpose {
namespace tracker_detail {
namespace {

// Set in the signal handler, read on the writer's thread after the hand-over (run_on_writer).
std::atomic<const char*> g_signal_reason{""};

// Runs on the trace writer's thread, outside any signal handler.
void write_summary_for_signal() {
  try {
    trace().close(summary_json(g_signal_reason.load(std::memory_order_acquire)));
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
  g_signal_reason.store(reason, std::memory_order_release);
  trace().run_on_writer(write_summary_for_signal, 1000);
}

// SIGTERM and SIGINT: kvremap stands in for a default disposition only (the signal would end the
// process without a summary). A handler of the program's own is left alone — the program decides
// whether it exits, and a clean exit writes the summary through atexit — and so is an ignored signal
// (children exec'd from the process inherit SIG_IGN, as the shell arranged). While kvremap's handler
// stands in, the program sees its own disposition (process/signal_disposition.cpp,
// hooks/signal_hooks.cpp).
constexpr int kSignals[] = {SIGTERM, SIGINT};

void on_signal(int sig, siginfo_t*, void*) {
  // Only installed over SIG_DFL: write the summary, then end the process as the default would.
  finish_from_signal(sig == SIGTERM ? "SIGTERM" : "SIGINT");
  restore_program_disposition(sig);
  // Blocked while this handler runs: delivered with the default action as it returns.
  raise(sig);
}

}  // namespace

void install_exit_handlers() {
  // Once per process image: a forked child inherits the atexit entry and the signal dispositions,
  // and installing again would save this library's own handler as the one to chain to, so that a
  // SIGTERM would call it for ever instead of ending the process. (An exec starts a new image.)
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;
  std::atexit([] { finish("atexit"); });
  for (int sig : kSignals) stand_in_for_default(sig, on_signal);
}

}  // namespace tracker_detail

using namespace tracker_detail;

void finish(const char* reason) {
  if (g_finished.load()) return;
  kv_at_exit();
  if (g_finished.exchange(true)) return;
  // Hooks that were already running finish their accounting and their records first, so that the
  // summary and the events agree (other threads go on running while one of them calls exit()).
  // Bounded: a hook blocked for good (a synchronising call on a stuck stream) must not hold up the
  // exit; the summary then says how many threads were still inside one.
  const int hooks_in_flight = wait_for_hooks_to_leave(1000);
  if (!S().trace_opened.load() || g_disabled.load()) {
    trace().flush_all();
    return;
  }
  try {
    emit_all_counters();
    trace().close(summary_json(reason, hooks_in_flight));
  } catch (...) {
  }
}

}  // namespace kvremap::interpose
