// The threads that have run a hook, so that the exit can wait for the ones still inside one.
#pragma once

namespace kvremap::interpose {

// After tracking has stopped (g_finished set): waits until no other thread is inside a hook, or
// `max_ms` passed, so that the summary and the events are taken at one point. Each hook takes its
// scope before it reads tracking() (guard.h); the membarrier here makes the two sides see each
// other: a hook either saw tracking stop or is counted here. Returns how many threads were still
// inside a hook when `max_ms` passed (0 when all had left): their operations may be in the summary's
// counts without their events, and the summary says how many.
int wait_for_hooks_to_leave(int max_ms);

// pthread_atfork: the registry's lock is held across fork(); the child keeps only its own thread.
void hook_threads_prepare_fork();
void hook_threads_parent_after_fork();
void hook_threads_child_after_fork();

}  // namespace kvremap::interpose
