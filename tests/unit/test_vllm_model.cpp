// Unit tests for policy/vllm_model: vLLM's recognition words, titles, server lines, flag spellings, defaults, profile
// key.
#include "policy/vllm_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "policy/profile.h"

using namespace kvremap::policy;

namespace {

using Args = std::vector<std::string>;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

// vLLM's flags read from `vllm serve m` followed by `extra`.
EngineProfile served_with(Args extra) {
  Args argv = {"vllm", "serve", "m"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  EngineProfile p;
  p.kind = EngineKind::vllm;
  read_vllm_flags(argv, p);
  return p;
}

}  // namespace

TEST(VllmModel, RecognitionWordsAndProcessTitles) {
  for (const char* word :
       {"vllm", "/usr/local/bin/vllm", "vllm.entrypoints.openai.api_server", "vllm.entrypoints.cli.main"})
    EXPECT_TRUE(vllm_named_by(word)) << word;
  for (const char* word : {"org/vllm-tuned", "vllmx", "my-vllm", "sglang", "python3", ""})
    EXPECT_FALSE(vllm_named_by(word)) << word;
  // v1/engine/core.py:1288, v1/executor/multiproc_executor.py:1058,1086.
  for (const char* title : {"VLLM::EngineCore", "VLLM::Worker", "VLLM::Worker_TP0"})
    EXPECT_TRUE(vllm_titled(title)) << title;
  // Ray titles an actor's process after its class (`ray::RayWorkerWrapper`, vLLM's legacy Ray executor's
  // actor): a class any Ray program may name, and no flags. A Ray worker below vLLM reads vLLM's line from
  // the root its ancestor handed down (policy::adopts_root); vLLM's default Ray actors retitle themselves
  // `VLLM::Worker_TP0` besides (multiproc_executor.py:1058,1086, from ray_executor_v2.py:167).
  for (const char* title : {"vllm::worker", "VLLM:Worker", "sglang::scheduler_TP0", "ray::RayWorkerWrapper"})
    EXPECT_FALSE(vllm_titled(title)) << title;
}

TEST(VllmModel, ServerLinesAndOfflineLines) {
  for (const Args& argv : std::vector<Args>{{"vllm", "serve", "m"},
                                            {"/usr/bin/python3", "/usr/local/bin/vllm", "serve", "m"},
                                            {"python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"},
                                            {"python3", "-m", "vllm.entrypoints.api_server", "--model", "m"},
                                            {"python3", "-m", "vllm.entrypoints.cli.main", "serve", "m"}})
    EXPECT_TRUE(vllm_runs_server(argv)) << argv[1];
  for (const Args& argv : std::vector<Args>{{"vllm", "bench", "throughput", "--model", "m"},
                                            {"vllm", "chat"},
                                            {"python3", "offline.py", "serve"},
                                            {"serve", "vllm"},
                                            {"python3", "-u", "-X", "dev", "/usr/bin/vllm", "serve"}})
    EXPECT_FALSE(vllm_runs_server(argv)) << argv[0] << " " << argv[1];
}

// Where the server listens: --uds (host and port then ignored, entrypoints/openai/cli_args.py:261), else
// --port, 8000 by default (:248); a value that is no port is unknown (0), never a guess.
TEST(VllmModel, PortSocketAndTheirDefault) {
  EXPECT_EQ(kVllmDefaultPort, 8000);
  EXPECT_EQ(served_with({}).serving_port, 8000);
  EXPECT_EQ(served_with({"--port", "9001"}).serving_port, 9001);
  EXPECT_EQ(served_with({"--port=9002"}).serving_port, 9002);
  EXPECT_EQ(served_with({"--port", "9001", "--port", "9004"}).serving_port, 9004) << "the last one wins";
  EXPECT_EQ(served_with({"--port", "70000"}).serving_port, 0);
  const EngineProfile uds = served_with({"--uds", "/run/v.sock", "--port", "9001"});
  EXPECT_EQ(uds.serving_socket, "/run/v.sock");
  EXPECT_EQ(uds.serving_port, 0);
  EngineProfile offline;
  read_vllm_flags(Args{"vllm", "bench", "latency", "--port", "9001"}, offline);
  EXPECT_EQ(offline.serving_port, 0);
  EXPECT_EQ(offline.serving_socket, "");
}

// --enforce-eager (engine/arg_utils.py:875) in every spelling the parser takes, and its negations.
TEST(VllmModel, EnforceEagerSpellings) {
  for (const Args& extra : std::vector<Args>{{"--enforce-eager"},
                                             {"--enforce_eager"},
                                             {"--enforce-eager=true"},
                                             {"--enforce-eager", "1"},
                                             {"--enforce_eager=yes"}})
    EXPECT_EQ(served_with(extra).eager_reason, "--enforce-eager") << extra[0];
  for (const Args& extra : std::vector<Args>{{"--enforce-eager=false"},
                                             {"--enforce-eager", "false"},
                                             {"--no-enforce-eager"},
                                             {"--enforce-eager", "--no-enforce-eager"}})
    EXPECT_EQ(served_with(extra).eager_reason, "") << extra.back();
}

// cudagraph_mode NONE in each of the compilation-config spellings; the compilation mode other than
// VLLM_COMPILE (config/vllm.py:1425-1436); -O0 in each optimisation-level spelling; --config.
TEST(VllmModel, GraphFlagsInEachSpelling) {
  for (const Args& extra : std::vector<Args>{{"--compilation-config", R"({"cudagraph_mode": "NONE"})"},
                                             {"--compilation_config", R"({'cudagraph_mode': 'none'})"},
                                             {"-O.cudagraph_mode=NONE"},
                                             {"-cc.cudagraph_mode", "NONE"},
                                             {"--compilation-config.cudagraph_mode=NONE"}})
    EXPECT_EQ(served_with(extra).eager_reason, "cudagraph_mode NONE") << extra.back();
  EXPECT_EQ(served_with({"-cc.mode=none"}).eager_reason, "compilation mode NONE (cudagraph_mode NONE)");
  EXPECT_EQ(served_with({"-O.mode=0"}).eager_reason, "compilation mode 0 (cudagraph_mode NONE)");
  EXPECT_EQ(served_with({"-cc.mode=3"}).eager_reason, "");
  EXPECT_EQ(served_with({"-cc.mode", "VLLM_COMPILE"}).eager_reason, "");
  for (const Args& extra :
       std::vector<Args>{{"-O0"}, {"-O=0"}, {"-O", "0"}, {"--optimization-level", "0"}, {"--optimization-level=0"}})
    EXPECT_EQ(served_with(extra).eager_reason, "-O0") << extra.back();
  for (const Args& extra : std::vector<Args>{{"-O3"}, {"-O", "2"}, {"--optimization-level=1"}})
    EXPECT_EQ(served_with(extra).eager_reason, "") << extra.back();
  EXPECT_EQ(served_with({"--config", "serve.yaml"}).eager_reason, "--config (flags in a file kvremap does not read)");
  EXPECT_EQ(served_with({"--enforce-eager", "-O0"}).eager_reason, "--enforce-eager") << "the first reason is named";
  EXPECT_EQ(served_with({"--disable-cuda-graph"}).eager_reason, "") << "an SGLang flag";
}

// --kv-transfer-config (engine/arg_utils.py:1636), its JSON, its dotted keys, either spelling.
TEST(VllmModel, KvConnectorSpellings) {
  for (const Args& extra : std::vector<Args>{{"--kv-transfer-config", "{}"},
                                             {"--kv-transfer-config={}"},
                                             {"--kv_transfer_config", "{}"},
                                             {"--kv-transfer-config.kv_connector=NixlConnector"}})
    EXPECT_EQ(served_with(extra).kv_connector, "--kv-transfer-config") << extra[0];
  EXPECT_EQ(served_with({"--kv-events-config", "{}"}).kv_connector, "");
  EXPECT_EQ(served_with({"--disaggregation-mode", "prefill"}).kv_connector, "") << "an SGLang flag";
}

// --gpu-memory-utilization (default 0.92, config/cache.py:80), --kv-cache-memory-bytes and its prefix
// --kv-cache-memory, in either spelling; the share sizes the KV cache unless the size is given.
TEST(VllmModel, MemoryFlagsAndTheShareTheySize) {
  EXPECT_DOUBLE_EQ(kVllmDefaultUtilization, 0.92);
  EXPECT_EQ(served_with({}).gpu_memory_utilization, std::nullopt);
  EXPECT_EQ(vllm_memory_share(served_with({})), 0.92);
  EXPECT_EQ(served_with({"--gpu-memory-utilization", "0.8"}).gpu_memory_utilization, 0.8);
  EXPECT_EQ(served_with({"--gpu_memory_utilization=0.85"}).gpu_memory_utilization, 0.85);
  EXPECT_EQ(vllm_memory_share(served_with({"--gpu-memory-utilization", "0.8"})), 0.8);
  for (const Args& extra : std::vector<Args>{
           {"--kv-cache-memory", "2GiB"}, {"--kv-cache-memory-bytes=2147483648"}, {"--kv_cache_memory_bytes", "2G"}}) {
    const EngineProfile p = served_with(extra);
    EXPECT_EQ(p.kv_cache_memory, 2 * kGiB) << extra[0];
    EXPECT_EQ(vllm_memory_share(p), std::nullopt) << "the size is given";
    EXPECT_EQ(vllm_sizing_not_applicable(p),
              "the engine's KV cache size is given (--kv-cache-memory), not sized from a memory query");
    ASSERT_TRUE(vllm_nothing_deferred_reason(p));
    EXPECT_NE(vllm_nothing_deferred_reason(p)->find("gpu_worker.py:489-510"), std::string::npos);
  }
  EXPECT_EQ(vllm_sizing_not_applicable(served_with({})), std::nullopt);
  EXPECT_EQ(vllm_nothing_deferred_reason(served_with({})), std::nullopt);
  EngineProfile sglang;
  sglang.kind = EngineKind::sglang;
  sglang.kv_cache_memory = kGiB;
  EXPECT_EQ(vllm_memory_share(sglang), std::nullopt) << "not vLLM";
  EXPECT_EQ(vllm_sizing_not_applicable(sglang), std::nullopt);
  EXPECT_EQ(vllm_nothing_deferred_reason(sglang), std::nullopt);
}

// The next-start flags: the utilisation lowered by the shrink (from the default where not given), or the
// KV size for a start without kvremap; under kvremap never --kv-cache-memory, which defers nothing.
TEST(VllmModel, FlagsThatShrinkOrRepeatTheKvCache) {
  const KvShrink without{.shrink_bytes = 8 * kGiB, .kv_fit_bytes = 12 * kGiB, .device_total_bytes = 80 * kGiB};
  EXPECT_EQ(vllm_shrink_flags(without, 0.95, false), "--gpu-memory-utilization 0.85 or --kv-cache-memory 12884901888");
  EXPECT_EQ(vllm_shrink_flags(without, std::nullopt, false),
            "--gpu-memory-utilization 0.82 (from the default 0.92) or --kv-cache-memory 12884901888");
  EXPECT_EQ(vllm_shrink_flags(without, 0.95, true), "--kv-cache-memory 12884901888");
  KvShrink under = without;
  under.under_kvremap = true;
  EXPECT_EQ(vllm_shrink_flags(under, 0.95, false), "--gpu-memory-utilization 0.85");
  EXPECT_EQ(vllm_shrink_flags(under, 0.95, true).rfind("--gpu-memory-utilization in place of --kv-cache-memory", 0),
            0u);
  under.device_total_bytes = 0;
  EXPECT_EQ(vllm_shrink_flags(under, 0.95, false), "--gpu-memory-utilization lower");
  EXPECT_EQ(vllm_same_start_flags(20 * kGiB), "--kv-cache-memory 21474836480");
  // v1/worker/utils.py:444-464: less free at the first query than the share asks for is a refusal.
  EXPECT_TRUE(vllm_refuses_at_start(70 * kGiB, 72 * kGiB));
  EXPECT_FALSE(vllm_refuses_at_start(72 * kGiB, 72 * kGiB));
}

TEST(VllmModel, MemoryEnvironmentAndModulePackages) {
  const auto variables = vllm_memory_environment_variables();
  EXPECT_EQ(std::vector<std::string_view>(variables.begin(), variables.end()),
            (std::vector<std::string_view>{"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "VLLM_USE_V2_MODEL_RUNNER",
                                           "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", "VLLM_ATTENTION_BACKEND"}));
  const auto packages = vllm_module_packages();
  EXPECT_EQ(std::vector<std::string_view>(packages.begin(), packages.end()), std::vector<std::string_view>{"/vllm/"});
}

// The profile key drops where the server listens, what it logs and the share it asks for (each in the
// arity vLLM's parser gives it) and keeps every flag that changes memory.
TEST(VllmModel, ProfileKeyFlagsKeptAndDropped) {
  const auto ignored = vllm_flags_ignored_by_profiles();
  const auto takes = [&](std::string_view name) {
    const auto it = std::find_if(ignored.begin(), ignored.end(), [&](const FlagSpec& f) { return f.name == name; });
    return it == ignored.end() ? std::optional<Takes>() : it->takes;
  };
  EXPECT_EQ(takes("--port"), Takes::one_value);
  EXPECT_EQ(takes("--uds"), Takes::one_value);
  EXPECT_EQ(takes("--api-key"), Takes::values);
  EXPECT_EQ(takes("--served-model-name"), Takes::values);
  EXPECT_EQ(takes("--disable-log-stats"), Takes::nothing);
  EXPECT_EQ(takes("--gpu-memory-utilization"), Takes::one_value);
  EXPECT_EQ(takes("--kv-cache-memory"), Takes::one_value);
  EXPECT_EQ(takes("--kv-cache-memory-bytes"), Takes::one_value);
  EXPECT_EQ(takes("--seed"), Takes::one_value);
  for (const char* kept : {"--max-num-batched-tokens", "--tensor-parallel-size", "--max-model-len", "--enforce-eager",
                           "--mem-fraction-static", "--kv-transfer-config"})
    EXPECT_EQ(takes(kept), std::nullopt) << kept;
  EXPECT_EQ(normalised_cmdline(Args{"/usr/bin/vllm", "serve", "m", "--port", "9000", "--served-model-name", "a", "b",
                                    "--gpu_memory_utilization=0.9", "--no-disable-log-stats",
                                    "--max-num-batched-tokens=8192", "-tp", "8"}),
            (Args{"vllm", "serve", "m", "--max-num-batched-tokens", "8192", "-tp", "8"}));
}
