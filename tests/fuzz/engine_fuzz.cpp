// Fuzzes engine recognition: split_cmdline on /proc/<pid>/cmdline-style bytes, then profile_engine and with_kind.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "policy/engine.h"
#include "tests/fuzz/fuzz_check.h"

using namespace kvremap::policy;

namespace {

void check_profile(const EngineProfile& p) {
  FUZZ_CHECK(p.graphs_expected == p.eager_reason.empty(), "graphs_expected exactly when there is no eager reason");
  FUZZ_CHECK(p.kind != EngineKind::other || !p.graphs_expected, "an unrecognised engine expects no graphs");
  FUZZ_CHECK(kvremap::fuzz::is_one_line(p.eager_reason), "the eager reason is one line");
  for (const auto& share : {p.gpu_memory_utilization, p.mem_fraction_static})
    if (share) FUZZ_CHECK(std::isfinite(*share) && *share >= 0.0 && *share <= 1.0, "a memory share is in [0, 1]");
  FUZZ_CHECK(!p.gpu_memory_utilization || p.kind == EngineKind::vllm, "--gpu-memory-utilization is read for vLLM only");
  FUZZ_CHECK(!p.mem_fraction_static || p.kind == EngineKind::sglang, "--mem-fraction-static is read for SGLang only");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view raw(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string> argv = split_cmdline(raw);

  // The arguments joined by NUL are the input less one trailing NUL.
  std::string joined;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    FUZZ_CHECK(argv[i].find('\0') == std::string::npos, "an argument holds no NUL");
    if (i != 0) joined += '\0';
    joined += argv[i];
  }
  const std::string_view expected = raw.ends_with('\0') ? raw.substr(0, raw.size() - 1) : raw;
  FUZZ_CHECK(joined == expected, "split_cmdline keeps every byte of every argument");

  (void)is_multiprocessing_child(argv);
  const EngineProfile detected = profile_engine(argv);
  check_profile(detected);
  for (EngineKind kind : {EngineKind::vllm, EngineKind::sglang, EngineKind::other}) {
    const EngineProfile forced = with_kind(argv, kind);
    FUZZ_CHECK(forced.kind == kind, "with_kind sets the kind");
    check_profile(forced);
    if (kind == detected.kind) {
      FUZZ_CHECK(forced.graphs_expected == detected.graphs_expected && forced.eager_reason == detected.eager_reason &&
                     forced.gpu_memory_utilization == detected.gpu_memory_utilization &&
                     forced.mem_fraction_static == detected.mem_fraction_static &&
                     forced.kv_cache_memory == detected.kv_cache_memory,
                 "with_kind of the detected kind is profile_engine");
    }
  }
  return 0;
}
