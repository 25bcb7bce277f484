// Unit tests for policy/engine over real vLLM and SGLang command lines.
#include "policy/engine.h"

#include <gtest/gtest.h>

#include "policy/profile.h"
#include "policy/redact.h"

#include <string>
#include <vector>

using namespace kvremap::policy;

namespace {
EngineProfile of(std::vector<std::string> argv) { return profile_engine(argv); }
}  // namespace

TEST(Engine, RecognisesVllmInEveryFormItIsStarted) {
  for (const auto& argv :
       std::vector<std::vector<std::string>>{{"/usr/local/bin/vllm", "serve", "meta-llama/Llama-3.1-8B"},
                                             {"vllm", "serve", "m"},
                                             {"/usr/bin/python3", "/usr/local/bin/vllm", "serve", "m"},
                                             {"python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"}}) {
    const EngineProfile p = of(argv);
    EXPECT_EQ(p.kind, EngineKind::vllm) << argv[0];
    EXPECT_TRUE(p.graphs_expected) << argv[0];
    EXPECT_EQ(p.eager_reason, "");
  }
}

TEST(Engine, RecognisesSglang) {
  for (const auto& argv : std::vector<std::vector<std::string>>{
           {"python3", "-m", "sglang.launch_server", "--model-path", "m"}, {"sglang", "serve", "--model-path", "m"}}) {
    EXPECT_EQ(of(argv).kind, EngineKind::sglang) << argv[1];
    EXPECT_TRUE(of(argv).graphs_expected);
  }
}

TEST(Engine, AModelNameLaterOnTheLineDoesNotNameTheEngine) {
  const EngineProfile p = of({"python3", "serve.py", "--model", "org/model", "--tokenizer", "vllm"});
  EXPECT_EQ(p.kind, EngineKind::other);
  EXPECT_FALSE(p.graphs_expected);
  EXPECT_EQ(p.eager_reason, "not a recognised engine (vLLM, SGLang)");
}

// vLLM's --kv-transfer-config (engine/arg_utils.py:1636), also as dotted keys and with underscores;
// SGLang's --disaggregation-mode prefill|decode, "null" being its default (server_args.py:2254-2257).
TEST(Engine, KvConnectorsAndDisaggregationOfEachEngine) {
  const std::string json = R"({"kv_connector":"NixlConnector","kv_role":"kv_both"})";
  for (const auto& argv : std::vector<std::vector<std::string>>{
           {"vllm", "serve", "m", "--kv-transfer-config", json},
           {"vllm", "serve", "m", "--kv-transfer-config=" + json},
           {"vllm", "serve", "m", "--kv_transfer_config", json},
           {"vllm", "serve", "m", "--kv-transfer-config.kv_connector=LMCacheConnectorV1"},
           {"vllm", "serve", "m", "--kv_transfer_config.kv_connector", "NixlConnector"}}) {
    SCOPED_TRACE(argv[3]);
    EXPECT_EQ(of(argv).kv_connector, "--kv-transfer-config");
    EXPECT_TRUE(of(argv).graphs_expected) << "a connector says nothing of graphs";
  }
  EXPECT_EQ(of({"vllm", "serve", "m", "--kv-events-config", json}).kv_connector, "") << "events are not a connector";
  EXPECT_EQ(of({"vllm", "serve", "m"}).kv_connector, "");
  EXPECT_EQ(of({"python3", "-m", "sglang.launch_server", "--disaggregation-mode", "prefill"}).kv_connector,
            "--disaggregation-mode prefill");
  EXPECT_EQ(of({"python3", "-m", "sglang.launch_server", "--disaggregation_mode=decode"}).kv_connector,
            "--disaggregation-mode decode");
  EXPECT_EQ(of({"python3", "-m", "sglang.launch_server", "--disaggregation-mode", "null"}).kv_connector, "");
  EXPECT_EQ(of({"python3", "-m", "sglang.launch_server", "--kv-transfer-config", json}).kv_connector, "")
      << "a vLLM flag on an SGLang line";
  EXPECT_EQ(of({"myserver", "--kv-transfer-config", json}).kv_connector, "") << "not a recognised engine";
}

// Where each engine's server listens: vLLM --port (default 8000) or --uds, SGLang --port (default 30000);
// a port that is not one is unknown (0), never a guess.
TEST(Engine, ServingPortsOfEachEngine) {
  EXPECT_EQ(of({"vllm", "serve", "m"}).serving_port, 8000);
  EXPECT_EQ(of({"vllm", "serve", "m", "--port", "9001"}).serving_port, 9001);
  EXPECT_EQ(of({"vllm", "serve", "m", "--port=9002"}).serving_port, 9002);
  EXPECT_EQ(of({"vllm", "serve", "m", "--uds", "/run/v.sock"}).serving_port, 0);
  EXPECT_EQ(of({"vllm", "serve", "m", "--uds", "/run/v.sock"}).serving_socket, "/run/v.sock");
  for (const char* bad : {"0", "65536", "-1", "80x", ""})
    EXPECT_EQ(of({"vllm", "serve", "m", "--port", bad}).serving_port, 0) << bad;
  EXPECT_EQ(of({"python3", "-m", "sglang.launch_server", "--model-path", "m"}).serving_port, 30000);
  EXPECT_EQ(of({"python3", "-m", "sglang.launch_server", "--port", "31000"}).serving_port, 31000);
  EXPECT_EQ(of({"myserver", "--port", "8000"}).serving_port, 0) << "not a recognised engine";
  EXPECT_EQ(of({"VLLM::EngineCore", "", ""}).serving_port, 0) << "a title names no flags";
  EXPECT_EQ(of({"python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"}).serving_port, 8000);
  EXPECT_EQ(of({"python3", "-m", "vllm.entrypoints.cli.main", "serve", "m", "--port", "9003"}).serving_port, 9003);
  EXPECT_EQ(of({"sglang", "serve", "--model-path", "m"}).serving_port, 30000);
}

// Offline start-ups listen on no serving port, whatever --port says: nothing ends their start-up but
// their own work (commit_trigger.h).
TEST(Engine, OfflineStartUpsHaveNoServingPort) {
  for (const std::vector<std::string>& line : std::vector<std::vector<std::string>>{
           {"vllm", "bench", "throughput", "--model", "m", "--port", "8000"},
           {"/usr/bin/vllm", "chat"},
           {"python3", "-m", "sglang.bench_offline_throughput", "--model-path", "m", "--port", "30000"},
           {"python3", "-m", "sglang.bench_one_batch", "--model-path", "m"}}) {
    const kvremap::policy::EngineProfile p = of(line);
    EXPECT_NE(p.kind, kvremap::policy::EngineKind::other) << line[0] << " " << line[1];
    EXPECT_EQ(p.serving_port, 0) << line[0] << " " << line[1];
    EXPECT_EQ(p.serving_socket, "") << line[0] << " " << line[1];
  }
  const kvremap::policy::EngineProfile script = kvremap::policy::with_kind(
      std::vector<std::string>{"python3", "offline.py", "--port", "8000"}, kvremap::policy::EngineKind::vllm);
  EXPECT_TRUE(script.graphs_expected) << "a script named as vLLM by KVREMAP_ENGINE";
  EXPECT_EQ(script.serving_port, 0) << "but no server";
}

TEST(Engine, EagerFlagsOfEachEngine) {
  EXPECT_EQ(of({"vllm", "serve", "m", "--enforce-eager"}).eager_reason, "--enforce-eager");
  EXPECT_TRUE(of({"vllm", "serve", "m", "--enforce-eager=false"}).graphs_expected);
  EXPECT_TRUE(of({"vllm", "serve", "m", "--no-enforce-eager"}).graphs_expected);
  EXPECT_EQ(of({"vllm", "serve", "m", "--compilation-config", R"({"cudagraph_mode": "NONE"})"}).eager_reason,
            "cudagraph_mode NONE");
  EXPECT_EQ(of({"vllm", "serve", "m", "-O.cudagraph_mode=NONE"}).eager_reason, "cudagraph_mode NONE");
  EXPECT_EQ(of({"vllm", "serve", "m", "-cc.cudagraph_mode", "none"}).eager_reason, "cudagraph_mode NONE");
  EXPECT_TRUE(of({"vllm", "serve", "m", "-O.cudagraph_mode=FULL_AND_PIECEWISE"}).graphs_expected);
  EXPECT_EQ(of({"vllm", "serve", "m", "-O0"}).eager_reason, "-O0");
  EXPECT_EQ(of({"vllm", "serve", "m", "-O", "0"}).eager_reason, "-O0");
  EXPECT_TRUE(of({"vllm", "serve", "m", "-O3"}).graphs_expected);
  EXPECT_EQ(of({"python3", "-m", "sglang.launch_server", "--disable-cuda-graph"}).eager_reason, "--disable-cuda-graph");
  EXPECT_TRUE(of({"vllm", "serve", "m", "--disable-cuda-graph"}).graphs_expected) << "not a vLLM flag";
}

// vLLM (main 2026-08): underscore spellings (utils/argparse_utils.py:314-334), a compilation mode other
// than VLLM_COMPILE (config/vllm.py:1425-1436), flags in a --config file (not read, so not trusted).
TEST(Engine, VllmSpellingsCompilationModesAndConfigFiles) {
  EXPECT_EQ(of({"vllm", "serve", "m", "--enforce_eager"}).eager_reason, "--enforce-eager");
  EXPECT_EQ(of({"vllm", "serve", "m", "--gpu_memory_utilization=0.8"}).gpu_memory_utilization, 0.8);
  for (const std::vector<std::string>& argv : std::vector<std::vector<std::string>>{
           {"vllm", "serve", "m", "-cc.mode=none"},
           {"vllm", "serve", "m", "-cc.mode", "NONE"},
           {"vllm", "serve", "m", "-O.mode=0"},
           {"vllm", "serve", "m", "--compilation-config.mode=stock_torch_compile"},
           {"vllm", "serve", "m", "--compilation-config", R"({"mode": 2, "cudagraph_mode": "FULL"})"},
           {"vllm", "serve", "m", "--compilation_config", R"({'mode': 'DYNAMO_TRACE_ONCE'})"}}) {
    const EngineProfile p = of(argv);
    EXPECT_FALSE(p.graphs_expected) << argv.back();
    EXPECT_TRUE(p.eager_reason.starts_with("compilation mode ")) << p.eager_reason;
  }
  for (const std::vector<std::string>& argv : std::vector<std::vector<std::string>>{
           {"vllm", "serve", "m", "-cc.mode=VLLM_COMPILE"},
           {"vllm", "serve", "m", "--compilation-config", R"({"mode": 3, "cudagraph_mode": "FULL_AND_PIECEWISE"})"},
           {"vllm", "serve", "m", "-cc.cudagraph_mode=FULL"},
           {"vllm", "serve", "m", "--model", "org/mode-none"}}) {
    EXPECT_TRUE(of(argv).graphs_expected) << argv.back() << ": " << of(argv).eager_reason;
  }
  EXPECT_EQ(of({"vllm", "serve", "--config", "serve.yaml"}).eager_reason,
            "--config (flags in a file kvremap does not read)");
  EXPECT_FALSE(of({"vllm", "serve", "--config=serve.yaml"}).graphs_expected);
}

// SGLang (main 2026-08, server_args.py): decode graphs off by any spelling, or a per-phase configuration
// kvremap does not read, means no capture can be relied on; prefill graphs alone off leave decode capture.
TEST(Engine, SglangPerPhaseGraphFlags) {
  const std::vector<std::string> launch = {"python3", "-m", "sglang.launch_server", "--model-path", "m"};
  const auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = launch;
    argv.insert(argv.end(), extra.begin(), extra.end());
    return of(argv);
  };
  EXPECT_EQ(with({"--disable-decode-cuda-graph"}).eager_reason, "--disable-decode-cuda-graph");
  EXPECT_EQ(with({"--cuda-graph-backend-decode", "disabled"}).eager_reason, "--cuda-graph-backend-decode=disabled");
  EXPECT_EQ(with({"--cuda-graph-backend-decode=DISABLED"}).eager_reason, "--cuda-graph-backend-decode=disabled");
  EXPECT_FALSE(with({"--cuda-graph-config", R"({"decode": {"backend": "disabled"}})"}).graphs_expected);
  EXPECT_EQ(with({"--enable-mis"}).eager_reason, "--enable-mis");
  EXPECT_TRUE(with({"--disable-prefill-cuda-graph"}).graphs_expected);
  EXPECT_TRUE(with({"--disable-piecewise-cuda-graph"}).graphs_expected);
  EXPECT_TRUE(with({"--cuda-graph-backend-decode", "full"}).graphs_expected);
}

TEST(Engine, MemoryFlagsForTheHints) {
  const EngineProfile v = of({"vllm", "serve", "m", "--gpu-memory-utilization=0.95", "--kv-cache-memory", "20GiB"});
  ASSERT_TRUE(v.gpu_memory_utilization);
  EXPECT_DOUBLE_EQ(*v.gpu_memory_utilization, 0.95);
  ASSERT_TRUE(v.kv_cache_memory);
  EXPECT_EQ(*v.kv_cache_memory, 20ULL << 30);
  EXPECT_EQ(of({"vllm", "serve", "m", "--kv-cache-memory-bytes=1073741824"}).kv_cache_memory, 1ULL << 30);
  const EngineProfile s = of({"python3", "-m", "sglang.launch_server", "--mem-fraction-static", "0.85"});
  ASSERT_TRUE(s.mem_fraction_static);
  EXPECT_DOUBLE_EQ(*s.mem_fraction_static, 0.85);
  EXPECT_FALSE(s.gpu_memory_utilization);
}

TEST(Engine, KindOverrideReadsThatEnginesFlags) {
  const std::vector<std::string> argv = {"./my_engine", "--enforce-eager", "--gpu-memory-utilization", "0.9"};
  EXPECT_EQ(profile_engine(argv).kind, EngineKind::other);
  const EngineProfile p = with_kind(argv, EngineKind::vllm);
  EXPECT_EQ(p.kind, EngineKind::vllm);
  EXPECT_EQ(p.eager_reason, "--enforce-eager");
  EXPECT_TRUE(with_kind(std::vector<std::string>{"./my_engine"}, EngineKind::sglang).graphs_expected);
}

TEST(Engine, MultiprocessingChildrenAndCmdlineSplitting) {
  const auto argv =
      split_cmdline(std::string("python3\0-c\0from multiprocessing.spawn import spawn_main; "
                                "spawn_main(tracker_fd=5, pipe_handle=7)\0--multiprocessing-fork\0",
                                120));
  ASSERT_EQ(argv.size(), 4u);
  EXPECT_EQ(argv[3], "--multiprocessing-fork");
  EXPECT_TRUE(is_multiprocessing_child(argv));
  EXPECT_FALSE(is_multiprocessing_child(std::vector<std::string>{"vllm", "serve", "m"}));
  EXPECT_EQ(split_cmdline(std::string_view("a\0\0b", 4)), (std::vector<std::string>{"a", "", "b"}));
}

// The profile key of the engine's command line holds no secret: vLLM's --hf-token (which its ignored
// flags do not cover), any secret flag of an unrecognised engine, nor a URL's password; it does not
// depend on them either, so a rotated token keeps its profile.
TEST(Engine, ProfileKeyHoldsNoSecret) {
  const std::vector<std::string> secrets = {"hf_secret1", "sk-secret2", "dbpw3", "urlpw4", "envtok5"};
  for (const std::vector<std::string>& argv : std::vector<std::vector<std::string>>{
           {"vllm", "serve", "meta/llama", "--hf-token", "hf_secret1", "--api-key", "sk-secret2"},
           {"/opt/engine", "--model", "m", "--db-password=dbpw3", "--hf_token", "hf_secret1", "--API-KEY=sk-secret2"},
           {"python3", "-m", "sglang.launch_server", "--model-path", "https://u:urlpw4@host/m", "--api-key",
            "sk-secret2"},
           {"/opt/engine", "HF_TOKEN=envtok5", "--client-secret", "sk-secret2"}}) {
    ProfileKey key;
    key.argv = argv;
    const std::string text = key_text(key);
    for (const std::string& secret : secrets) EXPECT_EQ(text.find(secret), std::string::npos) << text;
    EXPECT_EQ(text.find(kRedacted), std::string::npos) << "dropped, not redacted: " << text;
  }
  ProfileKey one, other;
  one.argv = {"vllm", "serve", "m", "--hf-token", "hf_a", "--max-num-batched-tokens", "8192"};
  other.argv = {"vllm", "serve", "m", "--hf-token=hf_b", "--max-num-batched-tokens", "8192"};
  EXPECT_EQ(key_text(one), key_text(other));
  EXPECT_EQ(profile_file_name(one), profile_file_name(other));
  EXPECT_NE(key_text(one).find("--max-num-batched-tokens 8192"), std::string::npos) << key_text(one);
}

// What setproctitle leaves in /proc/<pid>/cmdline (tested with python3-setproctitle): the title, then
// the rest of the argument area as NULs.
TEST(Engine, ProcessTitlesNameTheEngineButNotItsFlags) {
  for (const auto& [raw, kind] :
       {std::pair<std::string, EngineKind>{std::string("VLLM::Worker_TP0\0\0\0\0", 20), EngineKind::vllm},
        {std::string("VLLM::EngineCore\0\0", 18), EngineKind::vllm},
        {"VLLM::Worker", EngineKind::vllm},
        {std::string("sglang::scheduler_TP0\0", 22), EngineKind::sglang}}) {
    const std::vector<std::string> argv = split_cmdline(raw);
    SCOPED_TRACE(argv.front());
    ASSERT_EQ(title_kind(argv), kind);
    const EngineProfile p = of(argv);
    EXPECT_EQ(p.kind, kind);
    EXPECT_FALSE(p.graphs_expected) << "no flag says whether the engine captures graphs";
    EXPECT_EQ(p.eager_reason, "only the process title " + argv.front() + " was readable, none of the engine's flags");
    // Named by KVREMAP_ENGINE, the title still carries no flags.
    EXPECT_FALSE(with_kind(argv, kind).graphs_expected);
  }
  // Not titles: a title word with arguments after it, other prefixes, Ray's actor title (a class name; a Ray
  // worker below vLLM reads vLLM's line from its root, test_engine_root.cpp).
  for (const std::vector<std::string>& argv : std::vector<std::vector<std::string>>{
           {"VLLM::Worker", "--enforce-eager"}, {"vllm::worker"}, {"ray::RayWorkerWrapper"}, {"python3"}, {}}) {
    EXPECT_EQ(title_kind(argv), std::nullopt) << (argv.empty() ? "" : argv.front());
  }
}
