// Profile keys (what changes them and what does not) and the profile text (round trip, every refusal).
#include "policy/profile.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <limits>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

using namespace kvremap::policy;
using nlohmann::json;

namespace {

using Args = std::vector<std::string>;

ProfileKey vllm_key(Args argv) {
  ProfileKey key;
  key.argv = std::move(argv);
  key.device_name = "NVIDIA H100 80GB HBM3";
  key.device_total_bytes = 85'520'809'984;
  key.rank = 0;
  key.driver_version = 12080;
  return key;
}

const Args kVllm = {"/usr/bin/vllm",
                    "serve",
                    "meta-llama/Llama-3.1-8B",
                    "--tensor-parallel-size",
                    "2",
                    "--max-model-len",
                    "8192",
                    "--port",
                    "8000",
                    "--host",
                    "0.0.0.0",
                    "--gpu-memory-utilization",
                    "0.9"};
const Args kSglang = {"python3", "-m",    "sglang.launch_server",  "--model-path", "Qwen/Qwen3-8B", "--tp", "2",
                      "--port",  "30000", "--mem-fraction-static", "0.85",         "--log-level",   "info"};

std::string text_of(const Args& argv) { return key_text(vllm_key(argv)); }

Args with(Args argv, const Args& more) {
  argv.insert(argv.end(), more.begin(), more.end());
  return argv;
}

Args without(Args argv, std::string_view flag) {
  for (auto it = argv.begin(); it != argv.end(); ++it)
    if (*it == flag) {
      argv.erase(it, it + 2);
      break;
    }
  return argv;
}

TEST(ProfileKey, ArgumentsThatDoNotDecideMemoryAreDropped) {
  const std::string base = text_of(kVllm);
  EXPECT_EQ(text_of(without(kVllm, "--port")), base);
  EXPECT_EQ(text_of(without(kVllm, "--host")), base);
  EXPECT_EQ(text_of(without(kVllm, "--gpu-memory-utilization")), base);
  EXPECT_EQ(text_of(with(kVllm, {"--uvicorn-log-level", "debug", "--disable-log-requests", "--disable-log-stats"})),
            base);
  EXPECT_EQ(text_of(with(kVllm, {"--kv-cache-memory", "8GiB"})), base);
  EXPECT_EQ(text_of(with(kVllm, {"--kv-cache-memory-bytes=8589934592"})), base);
  EXPECT_EQ(text_of(with(kVllm, {"--api-key", "k1", "k2", "--served-model-name", "a", "b"})), base);
  EXPECT_EQ(text_of(with(kVllm, {"--no-disable-log-stats", "--enable-log-requests"})), base);
  EXPECT_EQ(base.find("8000"), std::string::npos) << base;
  EXPECT_EQ(base.find("0.9"), std::string::npos) << base;
}

TEST(ProfileKey, PortOrShareChangeKeepsTheKey) {
  Args other_port = kVllm;
  other_port[8] = "8001";
  Args other_share = kVllm;
  other_share[12] = "0.95";
  EXPECT_EQ(text_of(other_port), text_of(kVllm));
  EXPECT_EQ(text_of(other_share), text_of(kVllm));
  EXPECT_EQ(profile_file_name(vllm_key(other_share)), profile_file_name(vllm_key(kVllm)));
}

TEST(ProfileKey, EqualsSpellingMatchesSpaceSpelling) {
  const Args spaced = {"vllm", "serve", "m", "--port", "8000", "--max-model-len", "4096"};
  const Args joined = {"vllm", "serve", "m", "--port=8000", "--max-model-len=4096"};
  EXPECT_EQ(text_of(spaced), text_of(joined));
  EXPECT_EQ(profile_file_name(vllm_key(spaced)), profile_file_name(vllm_key(joined)));
}

TEST(ProfileKey, SglangFlagsThatDoNotDecideMemoryAreDropped) {
  Args changed = kSglang;
  changed[8] = "30001";   // --port
  changed[10] = "0.9";    // --mem-fraction-static
  changed[12] = "debug";  // --log-level
  EXPECT_EQ(text_of(changed), text_of(kSglang));
  EXPECT_EQ(text_of(with(kSglang, {"--log-requests", "--log-requests-level", "3", "--served-model-name", "x",
                                   "--api-key", "secret", "--host=::"})),
            text_of(kSglang));
  EXPECT_NE(text_of(kSglang).find("sglang.launch_server"), std::string::npos) << "the module name stays";
  EXPECT_EQ(profile_file_name(vllm_key(kSglang)).rfind("sglang-", 0), 0u);
}

// Flags that change no memory, some random per launch in scripts (ENGINES-2026.md finding 12), and
// spellings the engines' parsers take as one.
TEST(ProfileKey, FrontEndFlagsRandomPortsAndSpellingsKeepTheKey) {
  EXPECT_EQ(text_of(with(kVllm, {"--chat-template",
                                 "t.jinja",
                                 "--tool-call-parser",
                                 "hermes",
                                 "--reasoning-parser",
                                 "qwen3",
                                 "--ssl-keyfile",
                                 "k.pem",
                                 "--ssl-certfile=c.pem",
                                 "--allowed-origins",
                                 R"(["*"])",
                                 "--root-path",
                                 "/v1",
                                 "--middleware",
                                 "m.M",
                                 "--max-log-len",
                                 "100",
                                 "--log-config-file",
                                 "l.json",
                                 "--enable-log-outputs",
                                 "--seed",
                                 "1234",
                                 "--disable-fastapi-docs"})),
            text_of(kVllm));
  EXPECT_EQ(text_of(with(kSglang, {"--nccl-port", "41235", "--dist-init-addr", "10.0.0.1:5000", "--random-seed", "7",
                                   "--chat-template", "t", "--watchdog-timeout", "600", "--enable-metrics",
                                   "--crash-dump-folder", "/tmp/d", "--decode-log-interval", "40"})),
            text_of(kSglang));
  EXPECT_EQ(text_of(with(kSglang, {"--nccl-port", "41235"})), text_of(with(kSglang, {"--nccl-port=50111"})));
  const Args dashes = {"vllm", "serve", "m", "--max-model-len", "4096", "--enforce-eager"};
  const Args underscores = {"vllm", "serve", "m", "--max_model_len=4096", "--enforce_eager"};
  EXPECT_EQ(text_of(dashes), text_of(underscores));
  EXPECT_EQ(profile_file_name(vllm_key(dashes)), profile_file_name(vllm_key(underscores)));
  EXPECT_NE(text_of(with(dashes, {"--max-num-seqs", "8"})), text_of(dashes)) << "a memory flag still counts";
}

// `vllm serve MODEL` and `vllm serve --model MODEL` are one start (the positional model takes precedence,
// entrypoints/cli/serve.py:51-53); SGLang's --model is --model-path (server_args.py:384,410).
TEST(ProfileKey, TheModelIsOneKeyWhicheverWayItIsGiven) {
  const Args positional = {"vllm", "serve", "org/m", "--max-model-len", "4096"};
  EXPECT_EQ(text_of({"vllm", "serve", "--model", "org/m", "--max-model-len", "4096"}), text_of(positional));
  EXPECT_EQ(text_of({"vllm", "serve", "--max-model-len", "4096", "--model=org/m"}), text_of(positional));
  EXPECT_EQ(text_of({"vllm", "serve", "org/m", "--model", "org/other", "--max-model-len", "4096"}),
            text_of(positional))
      << "the positional model wins";
  EXPECT_NE(text_of({"vllm", "serve", "org/other", "--max-model-len", "4096"}), text_of(positional));
  EXPECT_EQ(text_of({"sglang", "serve", "--model", "org/m", "--tp", "2"}),
            text_of({"sglang", "serve", "--model-path", "org/m", "--tp", "2"}));
}

TEST(ProfileKey, WhatDecidesMemoryChangesTheKey) {
  const ProfileKey base = vllm_key(kVllm);
  const std::string name = profile_file_name(base);
  auto differs = [&](const ProfileKey& key, const char* what) {
    EXPECT_NE(key_text(key), key_text(base)) << what;
    EXPECT_NE(profile_file_name(key), name) << what;
  };
  Args model = kVllm;
  model[2] = "meta-llama/Llama-3.1-70B";
  differs(vllm_key(model), "model");
  Args tp = kVllm;
  tp[4] = "4";
  differs(vllm_key(tp), "tensor-parallel-size");
  Args len = kVllm;
  len[6] = "16384";
  differs(vllm_key(len), "max-model-len");
  differs(vllm_key(with(kVllm, {"--dtype", "float16"})), "dtype");
  ProfileKey key = base;
  key.device_name = "NVIDIA H200";
  differs(key, "device name");
  key = base;
  key.device_total_bytes += 1;
  differs(key, "device total");
  key = base;
  key.rank = 1;
  differs(key, "rank");
  key = base;
  key.driver_version = 12090;
  differs(key, "driver");
  key = base;
  key.schema_version += 1;
  differs(key, "schema version");
}

// The engines' memory-relevant environment is part of the key where set; a start with none of it keeps
// the key text it had before the variables were listed.
TEST(ProfileKey, MemoryEnvironmentChangesTheKeyOnlyWhenSet) {
  const ProfileKey base = vllm_key(kVllm);
  EXPECT_EQ(key_text(base).find("env:"), std::string::npos) << key_text(base);
  ProfileKey expandable = base;
  expandable.environment = {"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"};
  EXPECT_NE(profile_file_name(expandable), profile_file_name(base));
  EXPECT_NE(key_text(expandable).find("; env: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"), std::string::npos)
      << key_text(expandable);
  ProfileKey runner = base;
  runner.environment = {"VLLM_USE_V2_MODEL_RUNNER=0"};
  EXPECT_NE(key_text(runner), key_text(expandable));
  ProfileKey spaced = base;
  spaced.environment = {"PYTORCH_CUDA_ALLOC_CONF=a b"};
  EXPECT_NE(key_text(spaced).find(R"("PYTORCH_CUDA_ALLOC_CONF=a b")"), std::string::npos) << key_text(spaced);
  const auto vllm = memory_environment_variables(EngineKind::vllm);
  EXPECT_NE(std::find(vllm.begin(), vllm.end(), "VLLM_USE_V2_MODEL_RUNNER"), vllm.end());
  const auto sglang = memory_environment_variables(EngineKind::sglang);
  EXPECT_NE(std::find(sglang.begin(), sglang.end(), "PYTORCH_CUDA_ALLOC_CONF"), sglang.end());
  EXPECT_TRUE(memory_environment_variables(EngineKind::other).empty());
}

// The engine's and PyTorch's builds, and the contents of a --config file, are part of the key where known.
TEST(ProfileKey, SoftwareBuildsAndConfigFileChangeTheKey) {
  const ProfileKey base = vllm_key(kVllm);
  EXPECT_EQ(key_text(base).find("software:"), std::string::npos) << "none loaded: the key it always had";
  ProfileKey built = base;
  built.software = {"torch/lib/libtorch_cuda.so 1a2b", "vllm/_C.abi3.so 3c4d"};
  EXPECT_NE(profile_file_name(built), profile_file_name(base));
  EXPECT_NE(key_text(built).find(R"(; software: "torch/lib/libtorch_cuda.so 1a2b" "vllm/_C.abi3.so 3c4d")"),
            std::string::npos)
      << key_text(built);
  ProfileKey rebuilt = built;
  rebuilt.software[1] = "vllm/_C.abi3.so 3c4e";
  EXPECT_NE(key_text(rebuilt), key_text(built));
  ProfileKey configured = base;
  configured.config = "engine.yaml fnv1a:0123456789abcdef";
  EXPECT_NE(key_text(configured).find(R"(; config: "engine.yaml fnv1a:0123456789abcdef")"), std::string::npos)
      << key_text(configured);
  ProfileKey edited = configured;
  edited.config = "engine.yaml fnv1a:0123456789abcdee";
  EXPECT_NE(profile_file_name(edited), profile_file_name(configured));
}

// Which loaded modules name the engine's build: its own extensions and PyTorch's CUDA library, by their
// path inside the package, never a compile cache's output.
TEST(ProfileKey, EngineModulesAreNamedFromTheirPackage) {
  EXPECT_EQ(engine_module_label(EngineKind::vllm, "/venv/lib/python3.12/site-packages/vllm/_C.abi3.so"),
            "vllm/_C.abi3.so");
  EXPECT_EQ(engine_module_label(EngineKind::vllm, "/opt/x/site-packages/vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so"),
            "vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so");
  EXPECT_EQ(engine_module_label(EngineKind::vllm, "/venv/site-packages/torch/lib/libtorch_cuda.so"),
            "torch/lib/libtorch_cuda.so");
  EXPECT_EQ(engine_module_label(EngineKind::sglang, "/venv/site-packages/sgl_kernel/sm90/common_ops.abi3.so"),
            "sgl_kernel/sm90/common_ops.abi3.so");
  EXPECT_EQ(engine_module_label(EngineKind::sglang, "/venv/site-packages/torch/lib/libtorch_cuda.so"),
            "torch/lib/libtorch_cuda.so");
  for (const char* path :
       {"/root/.cache/vllm/torch_compile_cache/abc/rank_0/vllm/x.so", "/tmp/torchinductor_root/vllm/compile_cache/k.so",
        "/venv/site-packages/vllm/a/b/c/d.so", "/venv/site-packages/vllm/_C.abi3.py",
        "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/venv/site-packages/sglang/x.so"})
    EXPECT_EQ(engine_module_label(EngineKind::vllm, path), std::nullopt) << path;
  EXPECT_EQ(engine_module_label(EngineKind::other, "/venv/site-packages/torch/lib/libtorch_cuda.so"), std::nullopt);
  EXPECT_EQ(engine_module_label(EngineKind::sglang, "/venv/site-packages/vllm/_C.abi3.so"), std::nullopt);
  EXPECT_EQ(config_file(Args{"vllm", "serve", "m", "--config", "a.yaml"}), "a.yaml");
  EXPECT_EQ(config_file(Args{"vllm", "serve", "m", "--config=b.yaml"}), "b.yaml");
  EXPECT_EQ(config_file(Args{"vllm", "serve", "m"}), std::nullopt);
}

TEST(ProfileKey, UnknownEngineKeepsEveryArgument) {
  const Args argv = {"./my_server", "--port", "1", "--gpu-memory-utilization", "0.5"};
  EXPECT_EQ(normalised_cmdline(argv), (Args{"my_server", "--port", "1", "--gpu-memory-utilization", "0.5"}));
  EXPECT_TRUE(flags_ignored_by_profiles(EngineKind::other).empty());
  EXPECT_EQ(profile_file_name(vllm_key(argv)).rfind("other-", 0), 0u);
}

TEST(ProfileKey, TextIsOneUnambiguousLine) {
  // "a b" as one argument must not read like "a" "b".
  EXPECT_NE(text_of({"vllm", "serve", "a b"}), text_of({"vllm", "serve", "a", "b"}));
  const std::string text = text_of({"vllm", "serve", "x\ny\"z\\", std::string("\xff;", 2)});
  EXPECT_EQ(text.find('\n'), std::string::npos) << text;
  EXPECT_NE(text.find(R"("x\x0ay\"z\\")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("\xff;")"), std::string::npos) << text;
}

TEST(ProfileKey, FileNameIsTheEngineTheHashAndTheRank) {
  ProfileKey key = vllm_key(kVllm);
  key.rank = 3;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a_64(key_text(key))));
  EXPECT_EQ(profile_file_name(key), std::string("vllm-") + hex + "-rank3.json");
}

TEST(ProfileKey, Fnv1aIsTheStandardFunction) {
  // Published FNV-1a 64 test vectors: the hash must not depend on the build.
  EXPECT_EQ(fnv1a_64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a_64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a_64("foobar"), 0x85944171f73967e8ull);
}

// ---- the profile text ----

const std::string kKey = key_text(vllm_key(kVllm));

Profile sample() {
  Profile p;
  p.key = kKey;
  p.kv_requested_bytes = 24'870'000'000;
  p.post_kv[static_cast<std::size_t>(Category::other)] = {276'000'000, 11'810'000'000};
  p.post_kv[static_cast<std::size_t>(Category::graph_pool)] = {2'470'000'000, 0};
  p.post_kv[static_cast<std::size_t>(Category::module)] = {430'000'000, 5};
  p.serving_peak_bytes = 3'300'000'000;
  p.margin_bytes = -547'000'000;
  p.sizing_shift_bytes = -123'000'000;
  p.memory_share = 0.95;
  p.headroom_bytes = 3'230'000'000;
  p.sizing_query = SizingQuery{4, "profiling", 21'000'000'000};
  p.measured_at = 1'760'000'000;
  p.written_at = 1'760'000'123;
  return p;
}

json sample_json() { return json::parse(to_json(sample())); }

std::string problem_of(std::string_view text, std::string_view key = kKey) {
  const ProfileRead read = read_profile(text, key);
  EXPECT_FALSE(read.profile.has_value()) << text.substr(0, 200);
  EXPECT_EQ(read.problem.find('\n'), std::string::npos) << read.problem;
  return read.problem;
}

std::string problem_of_json(const json& value) { return problem_of(value.dump()); }

TEST(ProfileText, RoundTrips) {
  const ProfileRead read = read_profile(to_json(sample()), kKey);
  ASSERT_TRUE(read.profile.has_value()) << read.problem;
  EXPECT_EQ(*read.profile, sample());
  EXPECT_TRUE(read.problem.empty());
}

TEST(ProfileText, RoundTripsWithoutServingPeakOrSizingQuery) {
  Profile p = sample();
  p.serving_peak_bytes.reset();
  p.sizing_query.reset();
  p.margin_bytes = 1;
  const ProfileRead read = read_profile(to_json(p), kKey);
  ASSERT_TRUE(read.profile.has_value()) << read.problem;
  EXPECT_EQ(*read.profile, p);
}

TEST(ProfileText, NamesEveryCategoryAndTheKey) {
  const json j = sample_json();
  EXPECT_EQ(j["format"], "kvremap profile");
  EXPECT_EQ(j["schema_version"], kProfileSchemaVersion);
  EXPECT_EQ(j["key"], kKey);
  EXPECT_EQ(j["margin_bytes"], -547'000'000);
  EXPECT_EQ(j["post_kv"]["other"]["transient_bytes"], 11'810'000'000ull);
  for (std::string_view name : {"kv", "graph_pool", "graph_exec", "module", "async_pool", "vmm", "other"})
    EXPECT_TRUE(j["post_kv"].contains(name)) << name;
}

TEST(ProfileText, TruncatedIsNotJson) {
  const std::string text = to_json(sample());
  EXPECT_EQ(problem_of(text.substr(0, text.size() / 2)).rfind("not JSON: ", 0), 0u);
  EXPECT_EQ(problem_of("").rfind("not JSON: ", 0), 0u);
}

TEST(ProfileText, NotAnObject) {
  EXPECT_EQ(problem_of("[1, 2]"), "not a JSON object but array");
  EXPECT_EQ(problem_of("42"), "not a JSON object but number");
}

TEST(ProfileText, ForeignJsonIsNotAProfile) {
  EXPECT_EQ(problem_of(R"({"traceEvents": []})"), "not a kvremap profile (no \"format\": \"kvremap profile\")");
  json j = sample_json();
  j["format"] = "something else";
  EXPECT_EQ(problem_of_json(j), "not a kvremap profile (no \"format\": \"kvremap profile\")");
}

TEST(ProfileText, OtherSchemaVersionIsRefused) {
  json j = sample_json();
  j["schema_version"] = kProfileSchemaVersion + 1;
  EXPECT_EQ(problem_of_json(j), "schema version 3, expected 2");
  j["schema_version"] = "2";
  EXPECT_EQ(problem_of_json(j), "field schema_version: a string, expected a non-negative integer");
  j.erase("schema_version");
  EXPECT_EQ(problem_of_json(j), "missing field schema_version");
}

TEST(ProfileText, TheShareIsAFractionOrNull) {
  json j = sample_json();
  j["memory_share"] = nullptr;
  Profile without = sample();
  without.memory_share.reset();
  ASSERT_TRUE(read_profile(j.dump(), kKey).profile);
  EXPECT_EQ(*read_profile(j.dump(), kKey).profile, without);
  j["memory_share"] = 1.5;
  EXPECT_EQ(problem_of_json(j), "field memory_share: 1.5 is not a share in (0, 1]");
  j["memory_share"] = "0.9";
  EXPECT_EQ(problem_of_json(j), "field memory_share: a string, expected a number or null");
}

TEST(ProfileText, KeyMismatchIsRefused) {
  EXPECT_EQ(problem_of(to_json(sample()), key_text(vllm_key(with(kVllm, {"--dtype", "half"})))),
            "written for another configuration (its key does not match)");
}

TEST(ProfileText, NegativeOrNonIntegerBytesAreRefused) {
  json j = sample_json();
  j["kv_requested_bytes"] = -1;
  EXPECT_EQ(problem_of_json(j), "field kv_requested_bytes: negative (-1)");
  j = sample_json();
  j["headroom_bytes"] = 1.5;
  EXPECT_EQ(problem_of_json(j), "field headroom_bytes: not an integer, expected a non-negative integer");
  j = sample_json();
  j["post_kv"]["graph_exec"]["resident_bytes"] = -7;
  EXPECT_EQ(problem_of_json(j), "field post_kv.graph_exec.resident_bytes: negative (-7)");
  j = sample_json();
  j["serving_peak_bytes"] = true;
  EXPECT_EQ(problem_of_json(j), "field serving_peak_bytes: a boolean, expected a non-negative integer");
  j = sample_json();
  j["margin_bytes"] = 9223372036854775808ull;
  EXPECT_EQ(problem_of_json(j), "field margin_bytes: 9223372036854775808 is out of range for a signed 64-bit integer");
}

TEST(ProfileText, MissingOrOutOfRangeFieldsAreRefused) {
  json j = sample_json();
  j["post_kv"].erase("vmm");
  EXPECT_EQ(problem_of_json(j), "missing field post_kv.vmm");
  j = sample_json();
  j["sizing_query"]["index"] = 4294967296ull;
  EXPECT_EQ(problem_of_json(j), "field sizing_query.index: 4294967296 is out of range (at most 4294967295)");
  j = sample_json();
  j["sizing_query"]["phase"] = "lunch";
  EXPECT_EQ(problem_of_json(j), "field sizing_query.phase: \"lunch\" is not a phase name");
  j = sample_json();
  j["post_kv"] = json::array();
  EXPECT_EQ(problem_of_json(j), "field post_kv: an array, expected an object");
  j = sample_json();
  j.erase("written_at");
  EXPECT_EQ(problem_of_json(j), "missing field written_at");
}

TEST(ProfileText, OversizedInputIsRefusedUnparsed) {
  // Valid JSON, so only the size check can refuse it.
  std::string text = to_json(sample());
  text.insert(text.size() - 2, ", \"padding\": \"" + std::string(2u << 20, 'x') + "\"");
  EXPECT_EQ(problem_of(text), "larger than 1 MiB: not a kvremap profile");
}

TEST(ProfileText, DeepNestingIsRefusedUnparsed) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(problem_of(deep), "nested deeper than 8 levels: not a kvremap profile");
  // Brackets inside strings are text, not nesting.
  json j = sample_json();
  j["note"] = std::string(100, '[');
  EXPECT_TRUE(read_profile(j.dump(), kKey).profile.has_value());
}

TEST(ProfileText, ProblemsAreOneLineOfPrintableText) {
  const std::string problem = problem_of(std::string("{\"a\": \"\n\x01\xff") + std::string(500, 'y'));
  EXPECT_EQ(problem.rfind("not JSON: ", 0), 0u);
  for (const char c : problem) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << problem;
  EXPECT_LE(problem.size(), 200u);
}

TEST(ProfileText, FuzzSeedIsAProfileForItsKey) {
  // tests/fuzz/profile_fuzz.cpp reads its corpus with this key: the seed must be a real, accepted profile.
  ProfileKey key;
  key.argv = {"vllm", "serve", "m", "--tensor-parallel-size", "2"};
  key.device_name = "NVIDIA H100";
  key.device_total_bytes = 85'520'809'984;
  key.driver_version = 12080;
  std::ifstream file(KVREMAP_SOURCE_DIR "/tests/fuzz/corpus/profile/valid");
  std::stringstream text;
  text << file.rdbuf();
  const ProfileRead read = read_profile(text.str(), key_text(key));
  EXPECT_TRUE(read.profile.has_value()) << read.problem;
}

}  // namespace

// ---- Bounds: figures no start on the device could have measured ---------------------------------

namespace {

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kGiB = 1ull << 30;
// The seed scenario's device (examples/vllm_like/scenarios/seed-maverick-h100-tp8.json): 79.19 GiB.
constexpr std::uint64_t kSeedTotal = 85'030'000'000;

// The seed start at 0.95, as its commit measures it: 23.16 GiB of KV in 96 tensors, a 0.51 GiB
// deficit, 3 GiB of headroom, autotuning, graph pools and modules kept resident after the KV burst.
Profile seed_profile() {
  Profile p;
  p.key = "k";
  p.kv_requested_bytes = 23 * kGiB + 164 * kMiB;
  p.kv_tensors = 96;
  p.granularity_bytes = 2 * kMiB;
  p.margin_bytes = -static_cast<std::int64_t>(522 * kMiB);
  p.headroom_bytes = 3 * kGiB;
  p.memory_share = 0.95;
  p.serving_peak_bytes = 3 * kGiB + 200 * kMiB;
  p.sizing_query = SizingQuery{3, "profiling", 30 * kGiB};
  p.post_kv[static_cast<std::size_t>(Category::other)] = {980 * kMiB, 10 * kGiB};
  p.post_kv[static_cast<std::size_t>(Category::graph_pool)] = {2355 * kMiB, 0};
  p.post_kv[static_cast<std::size_t>(Category::module)] = {410 * kMiB, 0};
  return p;
}

std::string bounds_problem(const Profile& p, std::uint64_t total = kSeedTotal) {
  return profile_out_of_bounds(p, total).value_or("");
}

}  // namespace

TEST(ProfileBounds, MeasuredProfilesAreWithinTheirDevice) {
  EXPECT_EQ(bounds_problem(seed_profile()), "");
  Profile second = seed_profile();  // sized from the first: its shift took the deficit away
  second.sizing_shift_bytes = 616 * static_cast<std::int64_t>(kMiB);
  second.kv_requested_bytes -= 616 * kMiB;
  second.margin_bytes = 94 * static_cast<std::int64_t>(kMiB);
  EXPECT_EQ(bounds_problem(second), "");
  Profile fit = seed_profile();  // at 0.9 under `fit`: more KV than stock, a negative shift, no deficit
  fit.memory_share = 0.9;
  fit.sizing_shift_bytes = -static_cast<std::int64_t>(4 * kGiB);
  fit.kv_requested_bytes = 27 * kGiB;
  fit.margin_bytes = 8 * static_cast<std::int64_t>(kMiB);
  EXPECT_EQ(bounds_problem(fit), "");
  Profile sglang = seed_profile();  // no share recorded
  sglang.memory_share.reset();
  EXPECT_EQ(bounds_problem(sglang), "");
}

TEST(ProfileBounds, AFigureLargerThanTheDeviceIsNamed) {
  Profile p = seed_profile();
  p.sizing_shift_bytes = std::int64_t{1} << 61;
  EXPECT_NE(bounds_problem(p).find("sizing_shift_bytes"), std::string::npos) << bounds_problem(p);
  p = seed_profile();
  p.sizing_shift_bytes = std::numeric_limits<std::int64_t>::min();
  EXPECT_NE(bounds_problem(p).find("sizing_shift_bytes"), std::string::npos) << bounds_problem(p);
  p = seed_profile();
  p.serving_peak_bytes = 100 * kGiB;
  EXPECT_NE(bounds_problem(p).find("serving_peak_bytes 100.00 GiB is more than the device's"), std::string::npos)
      << bounds_problem(p);
  EXPECT_EQ(bounds_problem(p, 128 * kGiB), "") << "the same peak on a larger device";
  p = seed_profile();
  p.headroom_bytes = 80 * kGiB;
  EXPECT_NE(bounds_problem(p).find("headroom_bytes"), std::string::npos);
  p = seed_profile();
  p.post_kv[static_cast<std::size_t>(Category::graph_pool)].transient_bytes = std::numeric_limits<std::uint64_t>::max();
  EXPECT_NE(bounds_problem(p).find("post_kv.graph_pool.transient_bytes"), std::string::npos) << bounds_problem(p);
}

TEST(ProfileBounds, AMarginNoStartCouldHaveMeasuredIsNamed) {
  Profile p = seed_profile();
  p.margin_bytes = -20 * static_cast<std::int64_t>(kGiB);  // would shrink the KV cache from 23 to 3 GiB
  EXPECT_NE(bounds_problem(p).find("margin_bytes -20.00 GiB is a larger deficit"), std::string::npos)
      << bounds_problem(p);
  // A deficit within what post-KV work kept resident, the headroom and the slack is a real one.
  p.margin_bytes = -static_cast<std::int64_t>(3 * kGiB + 3745 * kMiB + profile_bounds_slack(kSeedTotal) - kMiB);
  EXPECT_EQ(bounds_problem(p), "");
  p.margin_bytes -= 2 * static_cast<std::int64_t>(kMiB);
  EXPECT_NE(bounds_problem(p), "");
  // A negative shift told the engine of more memory: its deficit could be that much larger.
  p.sizing_shift_bytes = -static_cast<std::int64_t>(kGiB);
  p.memory_share = 1.0;
  EXPECT_EQ(bounds_problem(p), "");
  // With `fit`, a surplus the device cannot have had: more free memory at the commit than the device.
  p = seed_profile();
  p.margin_bytes = 70 * static_cast<std::int64_t>(kGiB);
  EXPECT_NE(bounds_problem(p).find("more free memory at the commit than the device's"), std::string::npos)
      << bounds_problem(p);
}

TEST(ProfileBounds, AShareThatCannotHoldTheKvCacheIsNamed) {
  Profile p = seed_profile();
  p.memory_share = 0.0001;
  EXPECT_NE(bounds_problem(p).find("memory_share 0.0001"), std::string::npos) << bounds_problem(p);
  p.memory_share = 0.28;  // 22.2 GiB of the device: less than the 23.16 GiB of KV it held
  EXPECT_NE(bounds_problem(p).find("memory_share"), std::string::npos);
  p.memory_share = 0.3;
  EXPECT_EQ(bounds_problem(p), "");
}

TEST(ProfileBounds, EveryFieldOutOfRangeIsNamedOnOneLine) {
  Profile p = seed_profile();
  p.sizing_shift_bytes = std::int64_t{1} << 61;
  p.serving_peak_bytes = 100 * kGiB;
  const std::string problem = bounds_problem(p);
  EXPECT_NE(problem.find("sizing_shift_bytes"), std::string::npos) << problem;
  EXPECT_NE(problem.find("serving_peak_bytes"), std::string::npos) << problem;
  EXPECT_EQ(problem.find('\n'), std::string::npos);
  EXPECT_EQ(problem.rfind("out of range for this device: ", 0), 0u) << problem;
}

// The model's argument as the key reads it, per engine: what the library resolves to a model identity.
TEST(ProfileKeyModel, TheModelArgumentIsFoundInEverySpellingOfEachEngine) {
  EXPECT_EQ(model_argument(Args{"/usr/bin/vllm", "serve", "/models/x", "--port", "8000"}), "/models/x");
  EXPECT_EQ(model_argument(Args{"vllm", "serve", "--model=/models/x"}), "/models/x");
  EXPECT_EQ(model_argument(Args{"python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "org/m"}), "org/m");
  EXPECT_EQ(model_argument(Args{"python3", "-m", "sglang.launch_server", "--model", "/models/y"}), "/models/y");
  EXPECT_EQ(model_argument(Args{"python3", "-m", "sglang.launch_server", "--model-path", "/models/y"}), "/models/y");
  EXPECT_EQ(model_argument(Args{"python3", "train.py", "--model", "/models/z"}), std::nullopt) << "not an engine";
  EXPECT_EQ(model_argument(Args{"vllm", "serve", "--port", "8000"}), std::nullopt);
}

// A model known by its config.json is one configuration wherever its directory is; another config.json, or the
// same path with no identity, is another.
TEST(ProfileKeyModel, AModelKnownByItsConfigMatchesUnderAnyPath) {
  ProfileKey a = vllm_key(Args{"vllm", "serve", "/models/llama", "--gpu-memory-utilization", "0.9"});
  ProfileKey b = vllm_key(Args{"vllm", "serve", "--model",
                               "/root/.cache/huggingface/hub/models--meta--llama/snapshots/0123", "--port", "9"});
  a.model_identity = b.model_identity = model_identity_text(R"({"architectures":["LlamaForCausalLM"]})");
  EXPECT_EQ(key_text(a), key_text(b));
  EXPECT_EQ(profile_file_name(a), profile_file_name(b));
  EXPECT_NE(key_text(a).find(R"(; model: "config.json fnv1a:)"), std::string::npos) << key_text(a);
  EXPECT_EQ(key_text(a).find("/models/llama"), std::string::npos) << "the path is not the model";

  ProfileKey other = a;
  other.model_identity = model_identity_text(R"({"architectures":["MixtralForCausalLM"]})");
  EXPECT_NE(key_text(a), key_text(other));
  ProfileKey by_path = a;
  by_path.model_identity.clear();
  EXPECT_NE(key_text(a), key_text(by_path));
  EXPECT_NE(key_text(by_path).find("/models/llama"), std::string::npos) << "without an identity the path is the model";
}
