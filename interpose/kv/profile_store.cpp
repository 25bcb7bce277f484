// Profile files on disk: directory resolution and trust, the exclusive temporary-file-and-rename write, the
// bounded non-blocking read of trusted files only, the failed-start marker.
#include "interpose/kv/profile_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "interpose/base/no_file_size_signal.h"
#include "policy/path_rules.h"
#include "policy/printable.h"

namespace kvremap::interpose {
namespace {

std::string error_text(int error) { return std::strerror(error); }
std::string shown(std::string_view path) { return policy::printable(path); }

std::string mode_text(mode_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// Whether a file or directory with this status is this user's to trust: owned by the user or root,
// writable by nobody else. Root's own files count (an administrator's shared, read-only cache).
std::optional<std::string> untrusted_because(const struct stat& st) {
  const uid_t me = geteuid();
  if (st.st_uid != me && st.st_uid != 0)
    return "is owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " + std::to_string(me) +
           ") or root";
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return "is writable by group or others (mode " + mode_text(st.st_mode) + ")";
  return std::nullopt;
}

const char* file_type(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// mkdir -p: every missing component is created 0700 (nobody else may plant files in a directory kvremap
// made); existing ones are left as they are.
bool make_directories(const std::string& path, std::string* problem) {
  for (std::size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string prefix = slash == std::string::npos ? path : path.substr(0, slash);
    if (!prefix.empty() && mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      *problem = "cannot create the profile directory " + shown(prefix) + ": " + error_text(errno);
      return false;
    }
    if (slash == std::string::npos) break;
  }
  return true;
}

bool write_all(int fd, std::string_view text) {
  const NoFileSizeSignal no_signal;  // a file size limit fails the write (EFBIG), never the program
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

// A temporary name nobody can have guessed ahead: the pid, the clock and a counter. Created with O_EXCL,
// a name that exists (planted, or left by a killed start) is never opened, only skipped.
std::string temporary_name(std::string_view name, unsigned attempt) {
  const auto now = static_cast<unsigned long long>(std::chrono::steady_clock::now().time_since_epoch().count());
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, ".tmp.%d.%llx%02x", static_cast<int>(getpid()), now, attempt);
  return std::string(name) + suffix;
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

std::optional<ProfileStore> ProfileStore::open(const ProfileDirectory& directory, bool create, DirectoryProblem* kind,
                                               std::string* problem) {
  *kind = DirectoryProblem::unusable;
  problem->clear();
  // A default built from $XDG_CACHE_HOME or $HOME obeys the path rules too: no bad name is ever created.
  if (const auto bad = policy::path_problem(directory.path)) {
    *problem = "the profile directory " + shown(directory.path) + " (from " +
               (!directory.origin.empty()  ? directory.origin
                : directory.is_default ? std::string("XDG_CACHE_HOME or HOME")
                                       : std::string("KVREMAP_PROFILE_DIR")) + ") " + *bad;
    return std::nullopt;
  }
  if (create && !make_directories(directory.path, problem)) return std::nullopt;
  const int fd = ::open(directory.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    if (!create && errno == ENOENT) {
      *kind = DirectoryProblem::none;
      return std::nullopt;
    }
    *problem = errno == ENOTDIR ? "the profile directory " + shown(directory.path) + " is not a directory"
                                : "cannot open the profile directory " + shown(directory.path) + ": " + error_text(errno);
    return std::nullopt;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    *problem = "cannot inspect the profile directory " + shown(directory.path) + ": " + error_text(errno);
    ::close(fd);
    return std::nullopt;
  }
  if (const auto why = untrusted_because(st)) {
    *kind = DirectoryProblem::untrusted;
    *problem = "the profile directory " + shown(directory.path) + " " + *why +
               (directory.read_only
                    ? ": another user could plant or replace profiles there, so this read-only layer is not searched; "
                      "make it writable by its owner only (chmod go-w) or drop it from KVREMAP_PROFILE_PATH"
                    : ": another user could plant or replace profiles there, so profiles are off for this process; "
                      "use a directory only this user can write (chmod go-w, or KVREMAP_PROFILE_DIR naming another)");
    ::close(fd);
    return std::nullopt;
  }
  *kind = DirectoryProblem::none;
  return ProfileStore(fd, directory.path);
}

ProfileStore::ProfileStore(ProfileStore&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) {
  other.fd_ = -1;
}

ProfileStore::~ProfileStore() {
  if (fd_ >= 0) ::close(fd_);
}

std::optional<std::string> ProfileStore::write(std::string_view name, std::string_view text,
                                               std::string* problem) const {
  std::string temporary;
  int fd = -1;
  for (unsigned attempt = 0; attempt < 8 && fd < 0; ++attempt) {
    temporary = temporary_name(name, attempt);
    fd = ::openat(fd_, temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    *problem = "cannot write the profile " + shown(path_of(temporary)) + ": " + error_text(errno);
    return std::nullopt;
  }
  // fsync before the rename: after a crash the final name holds the old file or the whole new one.
  const bool written = write_all(fd, text) && fsync(fd) == 0;
  const int write_error = errno;
  const bool closed = ::close(fd) == 0;
  if (!written || !closed) {
    *problem = "cannot write the profile " + shown(path_of(temporary)) + ": " + error_text(written ? errno : write_error);
    unlinkat(fd_, temporary.c_str(), 0);
    return std::nullopt;
  }
  // A rename replaces whatever entry has the final name (a link included) and never follows it.
  const std::string final_name(name);
  if (renameat(fd_, temporary.c_str(), fd_, final_name.c_str()) != 0) {
    *problem = "cannot rename the profile " + shown(path_of(temporary)) + " to " + shown(path_of(name)) + ": " +
               error_text(errno);
    unlinkat(fd_, temporary.c_str(), 0);
    return std::nullopt;
  }
  return path_of(name);
}

std::optional<policy::Profile> ProfileStore::load(std::string_view name, std::string_view expected_key,
                                                  std::string* problem) const {
  const std::optional<std::string> text = read_trusted(name, problem);
  if (!text) return std::nullopt;
  policy::ProfileRead read = policy::read_profile(*text, expected_key);
  if (!read.profile) *problem = "ignoring the profile " + shown(path_of(name)) + ": " + policy::printable(read.problem);
  return std::move(read.profile);
}

std::optional<std::string> ProfileStore::read_trusted(std::string_view name, std::string* problem) const {
  const std::string file(name);
  const std::string path = shown(path_of(name));
  // O_NOFOLLOW: a link is refused, never read through; O_NONBLOCK: opening a FIFO returns at once.
  const int fd = ::openat(fd_, file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP)
      *problem = "ignoring the profile " + path + ": it is a symbolic link, which is never followed";
    else if (errno != ENOENT)
      *problem = "cannot read the profile " + path + ": " + error_text(errno);
    return std::nullopt;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    *problem = "cannot inspect the profile " + path + ": " + error_text(errno);
    ::close(fd);
    return std::nullopt;
  }
  std::optional<std::string> refused;
  if (!S_ISREG(st.st_mode))
    refused = std::string("it is ") + file_type(st.st_mode);
  else if (const auto why = untrusted_because(st))
    refused = "it " + *why;
  else if (static_cast<std::uint64_t>(st.st_size) > policy::kMaxProfileBytes)
    refused = "larger than " + std::to_string(policy::kMaxProfileBytes >> 20) + " MiB: not a kvremap profile";
  if (refused) {
    *problem = "ignoring the profile " + path + ": " + *refused;
    ::close(fd);
    return std::nullopt;
  }
  // One byte past the limit, so a file that grew past it since the fstat is told apart from one at it.
  std::string text(policy::kMaxProfileBytes + 1, '\0');
  std::size_t size = 0;
  while (size < text.size()) {
    const ssize_t n = read(fd, text.data() + size, text.size() - size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *problem = "cannot read the profile " + path + ": " + error_text(errno);
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    size += static_cast<std::size_t>(n);
  }
  ::close(fd);
  text.resize(size);
  return text;
}

namespace {

// A small text file of the kernel's, whole, or empty.
std::string read_proc(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string text(4096, '\0');
  std::size_t size = 0;
  while (size < text.size()) {
    const ssize_t n = read(fd, text.data() + size, text.size() - size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    size += static_cast<std::size_t>(n);
  }
  ::close(fd);
  text.resize(size);
  return text;
}

std::string first_line(std::string text) {
  const std::size_t end = text.find('\n');
  if (end != std::string::npos) text.resize(end);
  return text;
}

}  // namespace

std::optional<std::uint64_t> process_start_ticks(std::int64_t pid) {
  const std::string stat = read_proc("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return std::nullopt;
  return policy::start_ticks_from_stat(stat);
}

policy::StartIdentity this_start() {
  // The host, boot and namespace do not change in a process's life; the pid and start time do at a fork.
  // Never destroyed: profiles are written at exit, after static destructors have run.
  static const policy::StartIdentity* const place = [] {
    auto* p = new policy::StartIdentity;
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0) p->host = host;
    p->boot_id = first_line(read_proc("/proc/sys/kernel/random/boot_id"));
    char ns[128] = {};
    const ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
    if (n > 0) p->pid_namespace.assign(ns, static_cast<std::size_t>(n));
    return p;
  }();
  policy::StartIdentity me = *place;
  me.pid = getpid();
  me.start_ticks = process_start_ticks(me.pid).value_or(0);
  return me;
}

bool ProfileStore::mark(std::string_view name, const policy::StartIdentity& me, std::string* problem) const {
  const std::string marker = policy::marker_file_name(name, me);
  // Whole or absent under its name: readers never see a half-written marker (they would not know
  // whose it is). The temporary name is the profile's own kind, so no reader takes it for a marker.
  std::string temporary;
  int fd = -1;
  for (unsigned attempt = 0; attempt < 8 && fd < 0; ++attempt) {
    temporary = temporary_name(name, attempt);
    fd = ::openat(fd_, temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    *problem = "cannot create this start's marker " + shown(path_of(marker)) + ": " + error_text(errno);
    return false;
  }
  const bool written = write_all(fd, policy::marker_text(me));
  const int write_error = errno;
  ::close(fd);
  if (!written || renameat(fd_, temporary.c_str(), fd_, marker.c_str()) != 0) {
    *problem = "cannot create this start's marker " + shown(path_of(marker)) + ": " +
               error_text(written ? errno : write_error);
    unlinkat(fd_, temporary.c_str(), 0);
    return false;
  }
  return true;
}

std::vector<std::string> ProfileStore::entries() const {
  std::vector<std::string> out;
  const int listing = ::openat(fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* dir = listing < 0 ? nullptr : fdopendir(listing);
  if (!dir) {
    if (listing >= 0) ::close(listing);
    return out;
  }
  while (const dirent* entry = readdir(dir)) {
    const std::string file = entry->d_name;
    if (file != "." && file != "..") out.push_back(file);
  }
  closedir(dir);
  std::sort(out.begin(), out.end());
  return out;
}

bool ProfileStore::remove(std::string_view name, std::string* problem) const {
  if (unlinkat(fd_, std::string(name).c_str(), 0) == 0) return true;
  *problem = "cannot remove " + shown(path_of(name)) + ": " + error_text(errno);
  return false;
}

void ProfileStore::unmark(std::string_view name, const policy::StartIdentity& me) const {
  unlinkat(fd_, policy::marker_file_name(name, me).c_str(), 0);
}

std::vector<ProfileStore::Marker> ProfileStore::markers(std::string_view name, const policy::StartIdentity& here,
                                                        std::int64_t now) const {
  std::vector<Marker> out;
  const int listing = ::openat(fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* dir = listing < 0 ? nullptr : fdopendir(listing);
  if (!dir) {
    if (listing >= 0) ::close(listing);
    return out;
  }
  const std::string prefix = policy::marker_prefix(name), shared = policy::shared_marker_name(name);
  while (const dirent* entry = readdir(dir)) {
    const std::string file = entry->d_name;
    if (file != shared && !file.starts_with(prefix)) continue;
    Marker m;
    m.file = file;
    const std::string path = shown(path_of(file));
    const int fd = ::openat(fd_, file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) continue;  // its start removed it since the listing
      m.problem = "ignoring " + path + ": " +
                  (errno == ELOOP ? std::string("a symbolic link, which is never followed") : error_text(errno));
      out.push_back(std::move(m));
      continue;
    }
    struct stat st {};
    std::optional<std::string> refused;
    std::string text(policy::kMaxMarkerBytes + 1, '\0');
    std::size_t size = 0;
    if (fstat(fd, &st) != 0)
      refused = error_text(errno);
    else if (!S_ISREG(st.st_mode))
      refused = std::string("it is ") + file_type(st.st_mode);
    else if (const auto why = untrusted_because(st))
      refused = "it " + *why;
    else {
      while (size < text.size()) {
        const ssize_t n = read(fd, text.data() + size, text.size() - size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        size += static_cast<std::size_t>(n);
      }
    }
    ::close(fd);
    if (!refused && file != shared) {
      text.resize(size);
      std::string problem;
      m.owner = policy::read_marker(text, &problem);
      if (!m.owner) refused = problem;
    }
    if (refused) {
      m.problem = "ignoring " + path + ": " + policy::printable(*refused);
      out.push_back(std::move(m));
      continue;
    }
    if (!m.owner) {
      m.failed = true;  // the shared marker names no start that could still be running
    } else {
      const bool here_place = policy::same_place(*m.owner, here);
      m.failed = policy::marker_failed(*m.owner, here, here_place ? process_start_ticks(m.owner->pid) : std::nullopt,
                                       now - static_cast<std::int64_t>(st.st_mtime));
    }
    out.push_back(std::move(m));
  }
  closedir(dir);
  std::sort(out.begin(), out.end(), [](const Marker& a, const Marker& b) { return a.file < b.file; });
  return out;
}

void ProfileStore::remove_failed(std::string_view name, const policy::StartIdentity& here, std::int64_t now) const {
  for (const Marker& m : markers(name, here, now))
    if (m.failed && m.problem.empty()) unlinkat(fd_, m.file.c_str(), 0);
}

}  // namespace kvremap::interpose
