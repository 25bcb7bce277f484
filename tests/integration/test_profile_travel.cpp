// Profiles that travel between nodes: the model in the profile key is known by its config.json, so one model under
// different paths (a volume on one node, a Hugging Face cache snapshot on another) is sized from one profile.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "run_program.h"
#include "tools/trace/trace_reader.h"

namespace fs = std::filesystem;
using kvremap::testing::link_as;
using kvremap::testing::make_temp_dir;
using kvremap::testing::run_program;
using kvremap::testing::RunResult;
using kvremap::testing::trace_files;

namespace {

struct Start {
  RunResult run;
  std::vector<kvremap::trace::Trace> traces;
  bool has(const std::string& name) const {
    for (const auto& t : traces)
      for (const auto& e : t.other_events)
        if (e.name == name) return true;
    return false;
  }
};

// `vllm serve MODEL` of the seed scenario at 0.95 under LD_PRELOAD, profiles in `profiles`.
Start serve(const std::string& model, const std::string& profiles) {
  const std::string traces = make_temp_dir();
  std::vector<std::string> env = kvremap::testing::scenario_simcuda_env(VLLM_LIKE, SEED_SCENARIO);
  env.insert(env.end(), {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_TRACE_DIR=" + traces, "KVREMAP_PROFILE_DIR=" + profiles});
  Start s;
  s.run = run_program({link_as(VLLM_LIKE, "vllm"), "serve", model, "--scenario", SEED_SCENARIO,
                       "--gpu-memory-utilization", "0.95"},
                      env, {}, 120);
  for (const std::string& file : trace_files(traces)) s.traces.push_back(kvremap::trace::read_trace(file));
  return s;
}

std::size_t profiles_in(const std::string& dir) {
  std::size_t n = 0;
  for (const auto& entry : fs::directory_iterator(dir)) n += entry.path().extension() == ".json";
  return n;
}

constexpr const char* kLlamaConfig = R"({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 48})";

}  // namespace

TEST(ProfileTravel, OneModelUnderTwoPathsIsOneConfigurationAndAnotherConfigIsNot) {
  const std::string profiles = make_temp_dir();
  // Node one: the model on a volume.
  const std::string volume = make_temp_dir() + "/models/llama";
  fs::create_directories(volume);
  std::ofstream(volume + "/config.json") << kLlamaConfig;
  // Node two: a Hugging Face cache snapshot, whose config.json links to a blob.
  const std::string hub = make_temp_dir() + "/hub/models--org--llama";
  fs::create_directories(hub + "/blobs");
  fs::create_directories(hub + "/snapshots/0123abcd");
  std::ofstream(hub + "/blobs/9f86d081") << kLlamaConfig;
  fs::create_symlink("../../blobs/9f86d081", hub + "/snapshots/0123abcd/config.json");

  const Start first = serve(volume, profiles);
  ASSERT_EQ(first.run.exit_code, 0) << first.run.err;
  EXPECT_FALSE(first.has("kv sizing adjusted")) << "no profile yet";
  ASSERT_EQ(profiles_in(profiles), 1u);

  const Start elsewhere = serve(hub + "/snapshots/0123abcd", profiles);
  ASSERT_EQ(elsewhere.run.exit_code, 0) << elsewhere.run.err;
  EXPECT_TRUE(elsewhere.has("kv sizing adjusted")) << "the same model under another path: " << elsewhere.run.err;
  EXPECT_EQ(profiles_in(profiles), 1u);

  // Another model's config.json under the first model's old path is another configuration.
  std::ofstream(volume + "/config.json") << R"({"architectures": ["MixtralForCausalLM"]})";
  const Start other = serve(volume, profiles);
  ASSERT_EQ(other.run.exit_code, 0) << other.run.err;
  EXPECT_FALSE(other.has("kv sizing adjusted")) << other.run.err;
  EXPECT_EQ(profiles_in(profiles), 2u);
}
