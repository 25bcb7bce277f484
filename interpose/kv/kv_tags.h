// kvremap_tag_push/pop: the engine's own word on which allocations are its KV cache, per thread.
#pragma once

#include "policy/kv_recognition.h"

namespace kvremap::interpose {

// The calling thread's innermost open tag: `kv`, `not_kv` ("none"), or `untagged`.
policy::KvTag current_tag();

}  // namespace kvremap::interpose
