// A preload library for the trace-room tests: the file system fills up under a kvremap trace in the middle
// of one of its writes. At the first write() of at least TRACE_DISK_FILLS_AT bytes into a descriptor whose
// path is a trace's name (kvremap-*.json), the file's room ends halfway through that write: the write is
// short, and every later write past the room fails — with ENOSPC (TRACE_DISK_FILLS_MODE=enospc, a full
// disk as this library plays it) or EFBIG (fsize: the room becomes the process's RLIMIT_FSIZE, and the
// kernel refuses). What reached the file by then is copied to TRACE_DISK_FILLS_COPY, for the test to
// compare the trace with.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

using Write = ssize_t (*)(int, const void*, size_t);
Write real_write() {
  static const Write real = reinterpret_cast<Write>(dlsym(RTLD_NEXT, "write"));
  return real;
}

// The trace file whose room ended, and where it ends (0: not yet).
ino_t g_inode = 0;
off_t g_room = 0;

bool is_trace(int fd) {
  char link[64];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  char target[4096];
  const ssize_t length = readlink(link, target, sizeof target - 1);
  if (length <= 0) return false;
  target[length] = '\0';
  const char* base = std::strrchr(target, '/');
  base = base ? base + 1 : target;
  return std::strncmp(base, "kvremap-", 8) == 0 && std::strstr(base, ".json") != nullptr;
}

// The file's bytes [0, g_room) into TRACE_DISK_FILLS_COPY.
void copy_what_reached(int fd) {
  const char* copy = std::getenv("TRACE_DISK_FILLS_COPY");
  if (!copy) return;
  std::string bytes(static_cast<std::size_t>(g_room), '\0');
  if (pread(fd, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) return;
  const int out = open(copy, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (out < 0) return;
  (void)!real_write()(out, bytes.data(), bytes.size());
  close(out);
}

}  // namespace

extern "C" ssize_t write(int fd, const void* buffer, size_t bytes) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !is_trace(fd)) return real_write()(fd, buffer, bytes);
  const bool enospc = std::getenv("TRACE_DISK_FILLS_MODE") && std::strcmp(std::getenv("TRACE_DISK_FILLS_MODE"), "enospc") == 0;
  if (g_room == 0) {
    const char* at = std::getenv("TRACE_DISK_FILLS_AT");
    if (!at || bytes < std::strtoull(at, nullptr, 10)) return real_write()(fd, buffer, bytes);
    g_inode = st.st_ino;
    g_room = st.st_size + static_cast<off_t>(bytes / 2);
    if (!enospc) {
      const rlimit limit{static_cast<rlim_t>(g_room), static_cast<rlim_t>(g_room)};
      setrlimit(RLIMIT_FSIZE, &limit);
    }
    const ssize_t n = enospc ? real_write()(fd, buffer, bytes / 2) : real_write()(fd, buffer, bytes);
    copy_what_reached(fd);
    return n;
  }
  if (!enospc || st.st_ino != g_inode) return real_write()(fd, buffer, bytes);
  if (st.st_size >= g_room) {
    errno = ENOSPC;
    return -1;
  }
  const auto room = static_cast<std::size_t>(g_room - st.st_size);
  return real_write()(fd, buffer, bytes < room ? bytes : room);
}
