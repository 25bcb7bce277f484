// The engine's serving flag: a memfd page the root creates at load and its descendants map.
#include "interpose/base/serving_flag.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "interpose/base/no_file_size_signal.h"

namespace kvremap::interpose {
namespace {

constexpr std::size_t kPageBytes = 4096;
constexpr char kName[] = "kvremap-serving";

// The flag in the shared page: a lock-free atomic, whose operations work across processes that map
// the same memory. Null until a page is mapped.
std::atomic<std::atomic<std::uint32_t>*> g_flag{nullptr};
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

bool map_flag(int fd) {
  void* page = ::mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (page == MAP_FAILED) return false;
  g_flag.store(static_cast<std::atomic<std::uint32_t>*>(page), std::memory_order_release);
  return true;
}

}  // namespace

int create_serving_flag() {
  const int fd = ::memfd_create(kName, MFD_CLOEXEC);
  if (fd < 0) return -1;
  bool sized = false;
  {
    // Sizing the memfd counts against RLIMIT_FSIZE like any file: under a limit below a page the
    // process has no flag, never a SIGXFSZ.
    NoFileSizeSignal quiet;
    sized = ::ftruncate(fd, kPageBytes) == 0;
  }
  if (!sized || !map_flag(fd)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool attach_serving_flag(std::int64_t root_pid, int fd) {
  if (root_pid <= 0 || fd < 0) return false;
  const std::string path = "/proc/" + std::to_string(root_pid) + "/fd/" + std::to_string(fd);
  // The descriptor must still be the root's flag: a memfd of kvremap's name ("/memfd:<name> (deleted)").
  char target[64] = {};
  const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
  const std::string expected = std::string("/memfd:") + kName + " (deleted)";
  if (n <= 0 || std::string(target, static_cast<std::size_t>(n)) != expected) return false;
  const int own = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (own < 0) return false;
  struct stat st {};
  const bool ours = ::fstat(own, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
                    st.st_size == static_cast<off_t>(kPageBytes);
  const bool mapped = ours && map_flag(own);
  ::close(own);  // the mapping keeps the page
  return mapped;
}

void set_serving_flag() {
  if (auto* flag = g_flag.load(std::memory_order_acquire)) flag->store(1, std::memory_order_release);
}

bool serving_flag_set() {
  const auto* flag = g_flag.load(std::memory_order_acquire);
  return flag != nullptr && flag->load(std::memory_order_acquire) != 0;
}

}  // namespace kvremap::interpose
