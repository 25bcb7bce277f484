// kvremap_tag_push/pop: the engine's own word on which allocations are its KV cache, per thread.
#pragma once

#include <array>
#include <cstddef>

#include "policy/kv_recognition.h"

namespace kvremap::interpose {

namespace kv_tags_detail {
// The calling thread's open tags, innermost last. Trivially destructible, so allocations made while
// the process exits (after thread_local destructors ran) still read it; in the static TLS block
// (the library is built -ftls-model=initial-exec), so every allocation reads it with one load.
inline constexpr int kMaxTagDepth = 32;
struct OpenTags {
  std::array<bool, kMaxTagDepth> kv{};  // true: "kv", false: "none"
  int depth = 0;
};
inline constinit thread_local OpenTags t_tags;
}  // namespace kv_tags_detail

// The calling thread's innermost open tag: `kv`, `not_kv` ("none"), or `untagged`.
inline policy::KvTag current_tag() {
  const kv_tags_detail::OpenTags& t = kv_tags_detail::t_tags;
  if (t.depth == 0) return policy::KvTag::untagged;
  return t.kv[static_cast<std::size_t>(t.depth - 1)] ? policy::KvTag::kv : policy::KvTag::not_kv;
}

}  // namespace kvremap::interpose
