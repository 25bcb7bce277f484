// exec hooks: an image about to be replaced writes out its pending trace events first.
// The trace file closes at exec (O_CLOEXEC) with neither a summary nor the closing ']', as a killed
// process's would; without these hooks it would also lose the events its threads still buffered
// (up to the background writer's period). A failed exec returns to a process whose tracing goes on.
// execl, execlp and execle reach the kernel inside libc without these: programs that use them are not covered.
#include <unistd.h>

#include <atomic>

#include "interpose/hooks/hook_export.h"
#include "interpose/driver/real.h"
#include "interpose/trace/trace_writer.h"

namespace {

using namespace kvremap::interpose;

std::atomic<void*> g_execve{nullptr}, g_execv{nullptr}, g_execvp{nullptr}, g_execvpe{nullptr};

// Resolved at load: a forked child of a threaded program calls exec next, where a first dlsym could
// wait forever on a loader lock another thread of the parent held at the fork.
__attribute__((constructor)) void resolve_exec_functions() {
  g_execve.store(next_definition("execve"));
  g_execv.store(next_definition("execv"));
  g_execvp.store(next_definition("execvp"));
  g_execvpe.store(next_definition("execvpe"));
}

template <typename Fn>
Fn flushed_then(std::atomic<void*>& slot, const char* name) {
  trace().flush_all();
  return cached_real<Fn>(slot, name, next_definition);
}

}  // namespace

KVREMAP_HOOK int execve(const char* path, char* const argv[], char* const envp[]) noexcept {
  return flushed_then<decltype(&execve)>(g_execve, "execve")(path, argv, envp);
}

KVREMAP_HOOK int execv(const char* path, char* const argv[]) noexcept {
  return flushed_then<decltype(&execv)>(g_execv, "execv")(path, argv);
}

KVREMAP_HOOK int execvp(const char* file, char* const argv[]) noexcept {
  return flushed_then<decltype(&execvp)>(g_execvp, "execvp")(file, argv);
}

KVREMAP_HOOK int execvpe(const char* file, char* const argv[], char* const envp[]) noexcept {
  return flushed_then<decltype(&execvpe)>(g_execvpe, "execvpe")(file, argv, envp);
}
