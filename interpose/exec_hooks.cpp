// exec hooks: an image about to be replaced writes out its pending trace events first.
// The trace file closes at exec (O_CLOEXEC) with neither a summary nor the closing ']', as a killed
// process's would; without these hooks it would also lose the events its threads still buffered
// (up to the background writer's period). A failed exec returns to a process whose tracing goes on.
// execl, execlp and execle reach the kernel inside libc without these: programs that use them are not covered.
#include <unistd.h>

#include "interpose/real.h"
#include "interpose/trace_writer.h"

#define KVREMAP_HOOK extern "C" __attribute__((visibility("default")))

namespace {

using namespace kvremap::interpose;

template <typename Fn>
Fn real(const char* name) {
  trace().flush_all();
  return reinterpret_cast<Fn>(next_definition(name));
}

}  // namespace

KVREMAP_HOOK int execve(const char* path, char* const argv[], char* const envp[]) noexcept {
  return real<decltype(&execve)>("execve")(path, argv, envp);
}

KVREMAP_HOOK int execv(const char* path, char* const argv[]) noexcept { return real<decltype(&execv)>("execv")(path, argv); }

KVREMAP_HOOK int execvp(const char* file, char* const argv[]) noexcept {
  return real<decltype(&execvp)>("execvp")(file, argv);
}

KVREMAP_HOOK int execvpe(const char* file, char* const argv[], char* const envp[]) noexcept {
  return real<decltype(&execvpe)>("execvpe")(file, argv, envp);
}
