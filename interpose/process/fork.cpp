// Fork handling: the locks a fork must not split are taken before it, and a child starts afresh.
#include "interpose/process/fork.h"

#include <pthread.h>

#include "interpose/base/hook_threads.h"
#include "interpose/base/tick_clock.h"
#include "interpose/kv/kv_state.h"
#include "interpose/kv/stream_ages.h"
#include "interpose/trace/metrics_file.h"
#include "interpose/trace/trace_writer.h"
#include "interpose/track/oom_snapshot.h"
#include "interpose/track/tracker.h"

namespace kvremap::interpose {
namespace {

// The background writer is parked, then the stream table's lock, the hook-thread registry and the trace
// writer's locks are held across the fork, so none is copied in the middle of a change and no thread of
// kvremap's is inside the allocator; the parent releases them in the opposite order.
void prepare_fork() {
  trace().park_writer();  // first: the writer may need the locks taken below to finish its flush
  stream_ages_prepare_fork();
  hook_threads_prepare_fork();
  trace().prepare_fork();
}

void parent_after_fork() {
  trace().parent_after_fork();
  hook_threads_parent_after_fork();
  stream_ages_after_fork();
  trace().unpark_writer();
}

// The child has one thread and its own pid: its trace, tracking state and registries start empty,
// and any lock another parent thread held is left behind in memory nobody uses again.
void child_after_fork() {
  stream_ages_after_fork();  // the forking thread took it: the child's one thread releases it
  trace().child_after_fork();
  metrics::child_after_fork();
  hook_threads_child_after_fork();
  tracker_child_after_fork();
  oom_child_after_fork();
  kv_internal::kv_child_after_fork();
  tick_clock_child_after_fork();
}

}  // namespace

void install_fork_handlers() { pthread_atfork(prepare_fork, parent_after_fork, child_after_fork); }

}  // namespace kvremap::interpose
