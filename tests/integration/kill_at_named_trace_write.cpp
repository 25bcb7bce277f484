// A preload library for one test: the process SIGKILLs itself at its first write() into a descriptor whose
// path is a kvremap trace's name (kvremap-*.json), before the bytes land — where a trace created by name and
// written after is still empty. A file created unnamed (O_TMPFILE) keeps its "#… (deleted)" path on its
// descriptor after it is linked to its name, so its writes pass.
#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

extern "C" ssize_t write(int fd, const void* buffer, size_t bytes) {
  using Write = ssize_t (*)(int, const void*, size_t);
  static const Write real = reinterpret_cast<Write>(dlsym(RTLD_NEXT, "write"));
  char link[64];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  char target[4096];
  const ssize_t length = readlink(link, target, sizeof target - 1);
  if (length > 0) {
    target[length] = '\0';
    const char* base = std::strrchr(target, '/');
    base = base ? base + 1 : target;
    if (std::strncmp(base, "kvremap-", 8) == 0 && std::strstr(base, ".json") != nullptr &&
        std::strstr(base, "(deleted)") == nullptr)
      raise(SIGKILL);
  }
  return real(fd, buffer, bytes);
}
