// The KV manager's state: made once from the options and the engine's command line; the hooks' quick counters.
#include "interpose/kv/kv_state.h"

#include <fmt/format.h>
#include <sys/stat.h>


#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "interpose/base/library.h"
#include "interpose/base/process_cmdline.h"
#include "interpose/base/process_object.h"
#include "interpose/base/small_file.h"
#include "interpose/kv/kv_arena.h"
#include "interpose/track/tracker.h"

namespace kvremap::interpose::kv_internal {

namespace {

// A model's config.json is a few KiB; anything this large is not one, and is not read.
constexpr off_t kMaxModelConfigBytes = off_t{4} << 20;

// The model identity (policy::ProfileKey::model_identity) of a model argument naming a local directory with a
// readable config.json, else empty. Links are followed (a Hugging Face cache snapshot links its files to
// blobs).
std::string model_identity(const std::string& model) {
  struct stat st {};
  if (model.empty() || stat(model.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return {};
  const std::optional<std::string> bytes = read_small_file(model + "/config.json", kMaxModelConfigBytes, true);
  return bytes && !bytes->empty() ? policy::model_identity_text(*bytes) : std::string();
}

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
  if (const std::optional<std::string> model = policy::model_argument(argv)) s->model_identity = model_identity(*model);
  s->trigger_config.mode = o.commit;
  s->trigger_config.graphs_expected = s->engine.graphs_expected;
  s->trigger_config.serving_port_commits = s->engine.serving_port != 0 || !s->engine.serving_socket.empty();
  return s;
}
constinit ProcessObject<KvState, make_state> g_state;
// Where the device's KV cache lies, for the trace's counters: what is deferred lies on the scratch until the
// commit, a committed region's host tail on host memory (serving's overflows are not KV and are not counted).
void publish_placement(const DeviceKv& d) {
  const std::uint64_t on_scratch = d.deferred && !d.committed ? d.deferred_bytes : 0;
  std::uint64_t on_host = 0;
  if (d.committed)
    for (const Placement& r : d.regions)
      if (r.kv) on_host += d.arena->host_bytes(r.base);
  set_kv_placement(d.device, on_scratch, on_scratch > 0 ? options().scratch_bytes : 0, on_host);
}

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
    if (d && d->arena) publish_placement(*d);
    if (!d || d->committed) continue;
    if (!d->regions.empty()) ++active;
    if (d->deferred && d->deferred_bytes > 0) ++pending;
  }
  kv_detail::g_active.store(active);
  kv_detail::g_pending.store(pending);
}

}  // namespace kvremap::interpose::kv_internal
