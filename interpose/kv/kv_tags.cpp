// kvremap_tag_push/pop: a per-thread stack of open tags, exported for engines and plugins (ctypes).
#include "interpose/kv/kv_tags.h"

#include <array>
#include <cstddef>
#include <string_view>

namespace kvremap::interpose {
namespace {

// kvremap_tag_push/pop: the calling thread's open tags, innermost last. Trivially destructible,
// so allocations made while the process exits (after thread_local destructors ran) still read it.
constexpr int kMaxTagDepth = 32;
struct OpenTags {
  std::array<bool, kMaxTagDepth> kv{};  // true: "kv", false: "none"
  int depth = 0;
};
constinit thread_local OpenTags t_tags;

}  // namespace

policy::KvTag current_tag() {
  if (t_tags.depth == 0) return policy::KvTag::untagged;
  return t_tags.kv[static_cast<std::size_t>(t_tags.depth - 1)] ? policy::KvTag::kv : policy::KvTag::not_kv;
}

}  // namespace kvremap::interpose

// Explicit tagging for engines and plugins (callable through ctypes): allocations made between
// kvremap_tag_push("kv") and the matching kvremap_tag_pop() are the KV cache.
extern "C" __attribute__((visibility("default"))) int kvremap_tag_push(const char* tag) {
  if (!tag) return -1;
  const std::string_view t = tag;
  if (t != "kv" && t != "none") return -1;  // "none": a nested region that is not KV
  auto& tags = kvremap::interpose::t_tags;
  if (tags.depth == kvremap::interpose::kMaxTagDepth) return -1;
  tags.kv[static_cast<std::size_t>(tags.depth++)] = t == "kv";
  return 0;
}

extern "C" __attribute__((visibility("default"))) int kvremap_tag_pop(void) {
  if (kvremap::interpose::t_tags.depth == 0) return -1;
  --kvremap::interpose::t_tags.depth;
  return 0;
}
