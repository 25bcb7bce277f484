// The one line a process prints at its KV commit: where the KV cache landed, and what to do when host memory holds part of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kvremap::policy {

struct CommitLineFacts {
  int device = 0;
  std::uint64_t kv_bytes = 0;
  std::uint64_t host_bytes = 0;
  std::int64_t margin_bytes = 0;  // device memory left beside the KV cache and the headroom (< 0: short)
  std::size_t tensors = 0;
  std::uint64_t host_bytes_per_tensor = 0;
  std::string profile_path;         // the profile this commit wrote; empty: none
  bool profile_sizes_next = false;  // learned sizing can size the next start from it
  std::string flag_hint;            // the commit plan's advice on the engine's flags; empty: none
};

// e.g. "device 0: KV cache committed: 23.91 GiB, all on the device (218.40 MiB to spare)", or, with part
// on host memory, its share, where it sits, what that costs and what the next start does about it.
std::string commit_line(const CommitLineFacts& facts);

}  // namespace kvremap::policy
