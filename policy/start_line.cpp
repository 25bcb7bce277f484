// The one line the engine's root process prints when kvremap loads.
#include "policy/start_line.h"

#include "policy/printable.h"

namespace kvremap::policy {

std::string start_up_line(const Options& options, const StartLineFacts& facts) {
  std::string line = "kvremap " + std::string(facts.version) + " loaded into " +
                     (facts.engine == EngineKind::other ? std::string("this engine") : std::string(to_string(facts.engine))) +
                     " (pid " + std::to_string(facts.pid) + "): ";
  line += options.mode == Mode::defer
              ? "KV deferral on (KVREMAP_MODE=defer): the KV cache waits on scratch through autotuning and graph "
                "capture, then is committed before serving"
              : "tracking only (KVREMAP_MODE=observe): nothing is deferred";
  line += facts.trace_dir.empty() ? "; no trace (KVREMAP_TRACE=off)" : "; traces in " + printable(facts.trace_dir);
  line += facts.profile_dir.empty() ? "; profiles off (KVREMAP_PROFILE_DIR=off)"
                                    : "; profiles in " + printable(facts.profile_dir);
  // The read-only layers (KVREMAP_PROFILE_PATH) only when there are any: most starts have none.
  if (!facts.profile_dir.empty() && !options.profile_path.empty())
    line += ", then read-only " + printable(options.profile_path);
  return line;
}

}  // namespace kvremap::policy
