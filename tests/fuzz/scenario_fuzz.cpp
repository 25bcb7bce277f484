// Fuzzes the example engine's scenario loader (vllm_like::load_scenario, path-only: the input goes through a temp file).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "examples/vllm_like/scenario.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

// One scratch file per fuzzing process, removed at exit.
const std::string& scratch_path() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    std::string templ = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/kvremap-scenario-fuzz-XXXXXX";
    const int fd = mkstemp(templ.data());
    FUZZ_CHECK(fd >= 0, "mkstemp");
    close(fd);
    static std::string to_remove = templ;
    std::atexit([] { std::remove(to_remove.c_str()); });
    return templ;
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = scratch_path();
  std::FILE* file = std::fopen(path.c_str(), "wb");
  FUZZ_CHECK(file != nullptr, "open the scratch file");
  FUZZ_CHECK(size == 0 || std::fwrite(data, 1, size, file) == size, "write the scratch file");
  std::fclose(file);

  try {
    const vllm_like::Scenario scenario = vllm_like::load_scenario(path);
    FUZZ_CHECK(scenario.activation_tensors >= 1 || scenario.activation_peak == 0, "activation split is usable");
  } catch (const vllm_like::ScenarioError& e) {
    FUZZ_CHECK(std::string_view(e.what()).starts_with(path + ": "), "a ScenarioError names the file first");
  }

  // The scenario's own size syntax, on the input as one string.
  try {
    const std::uint64_t bytes = vllm_like::parse_size(std::string(reinterpret_cast<const char*>(data), size));
    FUZZ_CHECK(bytes <= 9'000'000'000'000'000'000ULL, "a scenario size is at most 9e18 bytes");
  } catch (const vllm_like::ScenarioError&) {
  }
  return 0;
}
