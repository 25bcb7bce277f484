// The one line the engine's root process prints when kvremap loads: that it is there, what it will do, where it writes.
#pragma once

#include <string>
#include <string_view>

#include "policy/engine.h"
#include "policy/options.h"

namespace kvremap::policy {

struct StartLineFacts {
  std::string_view version;      // the library's
  EngineKind engine = EngineKind::other;
  std::int64_t pid = 0;
  std::string_view trace_dir;    // where traces go; empty with options.trace off
  std::string_view profile_dir;  // where profiles are read and written; empty with profiles off
};

// e.g. "kvremap 0.1.0 loaded into vllm (pid 4242): KV deferral on (KVREMAP_MODE=defer); traces in
// /var/log/kvremap; profiles in /root/.cache/kvremap". It names what would surprise a reader: observe
// mode defers nothing, no trace, profiles off.
std::string start_up_line(const Options& options, const StartLineFacts& facts);

}  // namespace kvremap::policy
