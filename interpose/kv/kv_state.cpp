// The KV manager's state: made once from the options and the engine's command line; the hooks' quick counters.
#include "interpose/kv/kv_state.h"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "interpose/base/library.h"
#include "interpose/base/process_cmdline.h"
#include "interpose/base/process_object.h"

namespace kvremap::interpose::kv_internal {

namespace {
KvState* make_state() {
  auto* s = new KvState;
  const policy::Options& o = options();
  const std::vector<std::string> argv = engine_command_line();
  s->argv = argv;
  switch (o.engine) {
    case policy::EngineWhen::detect:
      s->engine = policy::profile_engine(argv);
      break;
    case policy::EngineWhen::vllm:
      s->engine = policy::with_kind(argv, policy::EngineKind::vllm);
      break;
    case policy::EngineWhen::sglang:
      s->engine = policy::with_kind(argv, policy::EngineKind::sglang);
      break;
    case policy::EngineWhen::other:
      s->engine = policy::with_kind(argv, policy::EngineKind::other);
      break;
  }
  for (const std::string_view name : policy::memory_environment_variables(s->engine.kind))
    if (const char* value = std::getenv(std::string(name).c_str()))
      s->environment.push_back(std::string(name) + "=" + value);
  if (const std::optional<std::string> file = policy::config_file(argv)) {
    // Read once, when the first allocation kvremap handles makes this state: early in the start-up whose
    // flags it holds (a relative name resolves from the working directory, as the engine's does).
    std::ifstream in(*file, std::ios::binary);
    std::ostringstream contents;
    contents << in.rdbuf();
    s->config = in ? fmt::format("{} fnv1a:{:016x}", *file, policy::fnv1a_64(contents.str())) : *file + " unreadable";
  }
  s->trigger_config.mode = o.commit;
  s->trigger_config.graphs_expected = s->engine.graphs_expected;
  s->trigger_config.serving_port_commits = s->engine.serving_port != 0 || !s->engine.serving_socket.empty();
  return s;
}
constinit ProcessObject<KvState, make_state> g_state;
}  // namespace

KvState& K() { return g_state.get(); }

void kv_child_after_fork() {
  g_state.replace(nullptr);
  kv_detail::g_any_arena.store(false, std::memory_order_relaxed);
  kv_detail::g_active.store(0, std::memory_order_relaxed);
  kv_detail::g_pending.store(0, std::memory_order_relaxed);
}

void refresh_counts(KvState& k) {
  int active = 0, pending = 0;
  for (const auto& d : k.devices) {
    if (!d || d->committed) continue;
    if (!d->regions.empty()) ++active;
    if (d->deferred && d->deferred_bytes > 0) ++pending;
  }
  kv_detail::g_active.store(active);
  kv_detail::g_pending.store(pending);
}

}  // namespace kvremap::interpose::kv_internal
