// Reading a small file the library does not own (a model's config.json, the shared metrics file) without blocking.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace kvremap::interpose {

// The whole of `path` when it is a regular file of at most `max_bytes`, opened without blocking (a FIFO under
// that name never holds the engine up) and, unless `follow_links`, without following a link. Nothing otherwise,
// or when it cannot be read whole.
std::optional<std::string> read_small_file(const std::string& path, off_t max_bytes, bool follow_links);

}  // namespace kvremap::interpose
