// read_small_file: a bounded, non-blocking whole-file read (small_file.h).
#include "interpose/base/small_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace kvremap::interpose {

std::optional<std::string> read_small_file(const std::string& path, off_t max_bytes, bool follow_links) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | (follow_links ? 0 : O_NOFOLLOW));
  if (fd < 0) return std::nullopt;
  std::optional<std::string> text;
  struct stat st {};
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= max_bytes) {
    std::string bytes(static_cast<std::size_t>(st.st_size), '\0');
    std::size_t got = 0;
    while (got < bytes.size()) {
      const ssize_t n = read(fd, bytes.data() + got, bytes.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    if (got == bytes.size()) text = std::move(bytes);
  }
  close(fd);
  return text;
}

}  // namespace kvremap::interpose
