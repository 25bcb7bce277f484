// A preload library for the path tests: the file system under PROFILE_DISK_FULL_DIR is full. Every write()
// into a regular file whose path lies in that directory fails with ENOSPC, as on a full disk; every other
// write() goes through.
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

using Write = ssize_t (*)(int, const void*, size_t);
Write real_write() {
  static const Write real = reinterpret_cast<Write>(dlsym(RTLD_NEXT, "write"));
  return real;
}

bool in_full_directory(int fd) {
  const char* full = std::getenv("PROFILE_DISK_FULL_DIR");
  if (full == nullptr || *full == '\0') return false;
  char link[64];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  char target[4096];
  const ssize_t length = readlink(link, target, sizeof target - 1);
  if (length <= 0) return false;
  target[length] = '\0';
  const std::size_t prefix = std::strlen(full);
  return std::strncmp(target, full, prefix) == 0 && target[prefix] == '/';
}

}  // namespace

extern "C" ssize_t write(int fd, const void* buffer, size_t bytes) {
  struct stat st {};
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && in_full_directory(fd)) {
    errno = ENOSPC;
    return -1;
  }
  return real_write()(fd, buffer, bytes);
}
