// Fuzzes the profile reader on raw bytes (round trip and bounds of what it accepts) and the profile key on a command line.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "policy/engine.h"
#include "policy/profile.h"
#include "tests/fuzz/fuzz_check.h"

using namespace kvremap::policy;

namespace {

// The key the seed profiles were written for (tests/fuzz/corpus/profile/valid).
constexpr std::string_view kSeedKey =
    "argv: vllm serve m --tensor-parallel-size 2; device: \"NVIDIA H100\"; total_bytes: 85520809984; rank: 0; "
    "driver: 12080; schema: 1";

void check_read(std::string_view text, std::string_view expected_key) {
  const ProfileRead read = read_profile(text, expected_key);
  if (!read.profile) {
    FUZZ_CHECK(!read.problem.empty(), "a refusal names its problem");
    FUZZ_CHECK(kvremap::fuzz::is_one_line(read.problem), "a refusal is one line");
    return;
  }
  FUZZ_CHECK(read.problem.empty(), "an accepted profile has no problem");
  FUZZ_CHECK(read.profile->key == expected_key, "an accepted profile has the expected key");
  FUZZ_CHECK(read.profile->schema_version == kProfileSchemaVersion, "an accepted profile has this schema version");
  const std::string written = to_json(*read.profile);
  const ProfileRead again = read_profile(written, expected_key);
  FUZZ_CHECK(again.profile.has_value(), "what to_json writes reads back");
  FUZZ_CHECK(*again.profile == *read.profile, "to_json then read_profile is the identity");
  // Whatever figures it holds, the bounds check names them on one line, on any device size.
  for (const std::uint64_t total : {std::uint64_t{0}, std::uint64_t{85'520'809'984}, ~std::uint64_t{0}}) {
    const auto out = profile_out_of_bounds(*read.profile, total);
    FUZZ_CHECK(!out || (!out->empty() && kvremap::fuzz::is_one_line(*out)), "a bounds problem is one line");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_read(text, kSeedKey);

  // The same bytes as a command line: the key is one line, stable, and accepted by a profile written for it.
  ProfileKey key;
  key.argv = split_cmdline(text);
  key.device_name = std::string(text.substr(0, 16));
  const std::string key_line = key_text(key);
  FUZZ_CHECK(kvremap::fuzz::is_one_line(key_line), "a key is one line");
  FUZZ_CHECK(key_line == key_text(key), "a key is a function of its inputs");
  const std::string name = profile_file_name(key);
  FUZZ_CHECK(name.find('/') == std::string::npos && name.ends_with(".json"), "a file name is one path component");
  const std::vector<std::string> normalised = normalised_cmdline(key.argv);
  FUZZ_CHECK(normalised.size() <= 2 * key.argv.size(), "normalising at most splits each argument in two");
  Profile profile;
  profile.key = key_line;
  check_read(to_json(profile), key_line);
  return 0;
}
