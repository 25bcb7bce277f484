// kvremap_tag_push/pop: a per-thread stack of open tags, exported for engines and plugins (ctypes).
#include "interpose/kv/kv_tags.h"

#include <string_view>

// Explicit tagging for engines and plugins (callable through ctypes): allocations made between
// kvremap_tag_push("kv") and the matching kvremap_tag_pop() are the KV cache.
extern "C" __attribute__((visibility("default"))) int kvremap_tag_push(const char* tag) {
  if (!tag) return -1;
  const std::string_view t = tag;
  if (t != "kv" && t != "none") return -1;  // "none": a nested region that is not KV
  auto& tags = kvremap::interpose::kv_tags_detail::t_tags;
  if (tags.depth == kvremap::interpose::kv_tags_detail::kMaxTagDepth) return -1;
  tags.kv[static_cast<std::size_t>(tags.depth++)] = t == "kv";
  return 0;
}

extern "C" __attribute__((visibility("default"))) int kvremap_tag_pop(void) {
  if (kvremap::interpose::kv_tags_detail::t_tags.depth == 0) return -1;
  --kvremap::interpose::kv_tags_detail::t_tags.depth;
  return 0;
}
