// listen hook: the engine's server starting to listen on its serving port ends every start-up window (kv_manager.h).
#include <sys/socket.h>

#include <atomic>
#include <cerrno>

#include "interpose/driver/real.h"
#include "interpose/hooks/hook_export.h"
#include "interpose/kv/kv_manager.h"

namespace {

std::atomic<void*> g_listen{nullptr};

}  // namespace

KVREMAP_HOOK int listen(int fd, int backlog) noexcept {
  using namespace kvremap::interpose;
  auto real = cached_real<int (*)(int, int)>(g_listen, "listen", next_definition);
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  const int r = real(fd, backlog);
  if (r == 0) {
    const int saved = errno;
    kv_listening(fd);
    errno = saved;
  }
  return r;
}
