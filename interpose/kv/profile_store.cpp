// Profile files on disk: directory resolution, the temporary-file-and-rename write, the bounded read.
#include "interpose/kv/profile_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kvremap::interpose {
namespace {

std::string error_text(int error) { return std::strerror(error); }

// mkdir -p: every missing component is created with `mode`; existing ones are left as they are.
bool make_directories(const std::string& path, mode_t mode, std::string* problem) {
  for (std::size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string prefix = slash == std::string::npos ? path : path.substr(0, slash);
    if (!prefix.empty() && mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST) {
      *problem = "cannot create the profile directory " + prefix + ": " + error_text(errno);
      return false;
    }
    if (slash == std::string::npos) break;
  }
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    *problem = "the profile directory " + path + " is not a directory";
    return false;
  }
  return true;
}

bool write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

ProfileDirectory profile_directory(std::string_view option, const char* xdg_cache_home, const char* home) {
  if (option == "off") return {};
  if (!option.empty()) return {std::string(option), false};
  // The XDG base-directory rules: a relative $XDG_CACHE_HOME is invalid and ignored.
  if (xdg_cache_home && xdg_cache_home[0] == '/') return {std::string(xdg_cache_home) + "/kvremap", true};
  if (home && home[0] != '\0') return {std::string(home) + "/.cache/kvremap", true};
  return {};
}

std::optional<std::string> write_profile_file(const ProfileDirectory& directory, std::string_view name,
                                              std::string_view text, std::string* problem) {
  if (!make_directories(directory.path, directory.is_default ? 0700 : 0777, problem)) return std::nullopt;
  const std::string path = directory.path + "/" + std::string(name);
  const std::string temporary = path + ".tmp." + std::to_string(getpid());
  const int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *problem = "cannot write the profile " + temporary + ": " + error_text(errno);
    return std::nullopt;
  }
  // fsync before the rename: after a crash the final name holds the old file or the whole new one.
  const bool written = write_all(fd, text) && fsync(fd) == 0;
  const int write_error = errno;
  const bool closed = close(fd) == 0;
  if (!written || !closed) {
    *problem = "cannot write the profile " + temporary + ": " + error_text(written ? errno : write_error);
    unlink(temporary.c_str());
    return std::nullopt;
  }
  if (rename(temporary.c_str(), path.c_str()) != 0) {
    *problem = "cannot rename the profile " + temporary + " to " + path + ": " + error_text(errno);
    unlink(temporary.c_str());
    return std::nullopt;
  }
  return path;
}

std::optional<policy::Profile> load_profile_file(const std::string& path, std::string_view expected_key,
                                                 std::string* problem) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) *problem = "cannot read the profile " + path + ": " + error_text(errno);
    return std::nullopt;
  }
  // One byte past the limit, so a file that is too large is told apart from one exactly at it.
  std::string text(policy::kMaxProfileBytes + 1, '\0');
  std::size_t size = 0;
  while (size < text.size()) {
    const ssize_t n = read(fd, text.data() + size, text.size() - size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *problem = "cannot read the profile " + path + ": " + error_text(errno);
      close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    size += static_cast<std::size_t>(n);
  }
  close(fd);
  text.resize(size);
  policy::ProfileRead read = policy::read_profile(text, expected_key);
  if (!read.profile) *problem = "ignoring the profile " + path + ": " + read.problem;
  return std::move(read.profile);
}

}  // namespace kvremap::interpose
