// Unit tests for policy/sglang_model: SGLang's recognition words, titles, server lines, flag spellings, defaults,
// reserve, profile key.
#include "policy/sglang_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "policy/profile.h"

using namespace kvremap::policy;

namespace {

using Args = std::vector<std::string>;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

// SGLang's flags read from `python3 -m sglang.launch_server --model-path m` followed by `extra`.
EngineProfile launched_with(Args extra) {
  Args argv = {"python3", "-m", "sglang.launch_server", "--model-path", "m"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  EngineProfile p;
  p.kind = EngineKind::sglang;
  read_sglang_flags(argv, p);
  return p;
}

}  // namespace

TEST(SglangModel, RecognitionWordsAndProcessTitles) {
  for (const char* word : {"sglang", "/usr/local/bin/sglang", "sglang.launch_server", "sglang.bench_one_batch"})
    EXPECT_TRUE(sglang_named_by(word)) << word;
  for (const char* word : {"org/sglang-model", "sglangx", "vllm", "sgl_kernel", ""})
    EXPECT_FALSE(sglang_named_by(word)) << word;
  // managers/scheduler.py:4248.
  for (const char* title : {"sglang::scheduler_TP0", "sglang::scheduler_TP1"})
    EXPECT_TRUE(sglang_titled(title)) << title;
  for (const char* title : {"SGLANG::scheduler", "sglang:scheduler", "VLLM::Worker_TP0"})
    EXPECT_FALSE(sglang_titled(title)) << title;
}

TEST(SglangModel, ServerLinesAndOfflineLines) {
  for (const Args& argv : std::vector<Args>{{"python3", "-m", "sglang.launch_server", "--model-path", "m"},
                                            {"sglang", "serve", "--model-path", "m"},
                                            {"/usr/bin/python3", "/usr/local/bin/sglang", "serve"}})
    EXPECT_TRUE(sglang_runs_server(argv)) << argv[1];
  for (const Args& argv : std::vector<Args>{{"python3", "-m", "sglang.bench_offline_throughput", "--model-path", "m"},
                                            {"python3", "-m", "sglang.bench_one_batch"},
                                            {"python3", "script.py", "serve"},
                                            {"vllm", "serve", "m"}})
    EXPECT_FALSE(sglang_runs_server(argv)) << argv[1];
}

// --port, 30000 by default (server_args.py:974); an offline line listens nowhere.
TEST(SglangModel, PortAndItsDefault) {
  EXPECT_EQ(kSglangDefaultPort, 30000);
  EXPECT_EQ(launched_with({}).serving_port, 30000);
  EXPECT_EQ(launched_with({"--port", "31000"}).serving_port, 31000);
  EXPECT_EQ(launched_with({"--port=31001"}).serving_port, 31001);
  EXPECT_EQ(launched_with({"--port", "x"}).serving_port, 0);
  EXPECT_EQ(launched_with({"--uds", "/run/s.sock"}).serving_socket, "") << "a vLLM flag";
  EngineProfile offline;
  read_sglang_flags(Args{"python3", "-m", "sglang.bench_one_batch", "--port", "31000"}, offline);
  EXPECT_EQ(offline.serving_port, 0);
}

// Decode graphs off in any spelling (server_args.py:1431, 6201), --enable-mis (:3384), or a per-phase
// configuration not read; prefill graphs alone off leave decode capture.
TEST(SglangModel, GraphFlagsInEachSpelling) {
  for (const Args& extra :
       std::vector<Args>{{"--disable-cuda-graph"}, {"--disable_cuda_graph"}, {"--disable-cuda-graph=true"}})
    EXPECT_EQ(launched_with(extra).eager_reason, "--disable-cuda-graph") << extra[0];
  EXPECT_EQ(launched_with({"--disable_decode_cuda_graph"}).eager_reason, "--disable-decode-cuda-graph");
  for (const Args& extra :
       std::vector<Args>{{"--cuda-graph-backend-decode", "disabled"}, {"--cuda_graph_backend_decode=Disabled"}})
    EXPECT_EQ(launched_with(extra).eager_reason, "--cuda-graph-backend-decode=disabled") << extra[0];
  EXPECT_EQ(launched_with({"--enable-mis"}).eager_reason, "--enable-mis");
  EXPECT_EQ(launched_with({"--cuda-graph-config", "{}"}).eager_reason,
            "--cuda-graph-config (a per-phase configuration kvremap does not read)");
  for (const Args& extra : std::vector<Args>{{"--disable-cuda-graph=false"},
                                             {"--no-disable-cuda-graph"},
                                             {"--disable-prefill-cuda-graph"},
                                             {"--cuda-graph-backend-decode", "full"},
                                             {"--enforce-eager"}})
    EXPECT_EQ(launched_with(extra).eager_reason, "") << extra[0];
}

// --disaggregation-mode prefill|decode, "null" its default (server_args.py:2254-2257), either spelling.
TEST(SglangModel, DisaggregationModes) {
  EXPECT_EQ(launched_with({"--disaggregation-mode", "prefill"}).kv_connector, "--disaggregation-mode prefill");
  EXPECT_EQ(launched_with({"--disaggregation_mode=decode"}).kv_connector, "--disaggregation-mode decode");
  EXPECT_EQ(launched_with({"--disaggregation-mode", "null"}).kv_connector, "");
  EXPECT_EQ(launched_with({}).kv_connector, "");
  EXPECT_EQ(launched_with({"--kv-transfer-config", "{}"}).kv_connector, "") << "a vLLM flag";
}

// --mem-fraction-static, --chunked-prefill-size (a Python int, -1 turns chunking off) and
// --max-prefill-tokens (human_readable_int, utils/common.py:2816).
TEST(SglangModel, MemoryFlagsInEachFormat) {
  EXPECT_EQ(launched_with({"--mem-fraction-static", "0.85"}).mem_fraction_static, 0.85);
  EXPECT_EQ(launched_with({"--mem_fraction_static=0.8"}).mem_fraction_static, 0.8);
  EXPECT_EQ(launched_with({}).mem_fraction_static, std::nullopt);
  EXPECT_EQ(launched_with({"--chunked-prefill-size", "-1"}).chunked_prefill_size, -1);
  EXPECT_EQ(launched_with({"--chunked-prefill-size=4096"}).chunked_prefill_size, 4096);
  EXPECT_EQ(launched_with({"--chunked-prefill-size", "x"}).chunked_prefill_size, std::nullopt);
  for (const auto& [text, tokens] : std::vector<std::pair<std::string, std::uint64_t>>{
           {"16384", 16384}, {"16k", 16000}, {"16Ki", 16384}, {"2M", 2000000}, {"1Mi", 1 << 20}})
    EXPECT_EQ(launched_with({"--max-prefill-tokens", text}).max_prefill_tokens, tokens) << text;
  for (const char* text : {"25.6k", "16K", "16kb", ""})
    EXPECT_EQ(launched_with({"--max-prefill-tokens", text}).max_prefill_tokens, std::nullopt) << text;
  EXPECT_EQ(launched_with({"--gpu-memory-utilization", "0.9"}).gpu_memory_utilization, std::nullopt) << "a vLLM flag";
}

// The reserve beside weights and KV: (1 - share) x total with the flag, else what was free at the sizing
// query less the KV pool (model_runner_kv_cache_mixin.py:104-117).
TEST(SglangModel, ReserveWithAndWithoutTheShare) {
  EXPECT_EQ(sglang_reserve_bytes(launched_with({"--mem-fraction-static", "0.75"}), 80 * kGiB, 60 * kGiB, 50 * kGiB),
            20 * kGiB);
  EXPECT_EQ(sglang_reserve_bytes(launched_with({}), 80 * kGiB, 60 * kGiB, 50 * kGiB), 10 * kGiB);
  EXPECT_EQ(sglang_reserve_bytes(launched_with({}), 80 * kGiB, 40 * kGiB, 50 * kGiB), 0u);
  EXPECT_EQ(kSglangReserveSource, "SGLang's activation reserve");
  EXPECT_EQ(sglang_prefill_estimate_source("--chunked-prefill-size 8192"),
            "SGLang's prefill estimate (1.5 MiB per token of --chunked-prefill-size 8192)");
}

// The next-start flags: --mem-fraction-static lowered by the shrink to two decimals (by how much, where
// the share is not known), or moved by a sizing shift to four decimals towards less KV.
TEST(SglangModel, FlagsThatShrinkOrRepeatTheKvCache) {
  const KvShrink shrink{.shrink_bytes = 8 * kGiB, .device_total_bytes = 80 * kGiB};
  EXPECT_EQ(sglang_shrink_flags(shrink, 0.9), "--mem-fraction-static 0.80");
  EXPECT_EQ(sglang_shrink_flags(shrink, std::nullopt), "--mem-fraction-static 0.10 lower");
  EXPECT_EQ(sglang_shrink_flags(KvShrink{.shrink_bytes = 8 * kGiB}, 0.9), "--mem-fraction-static lower");
  const EngineProfile shared = launched_with({"--mem-fraction-static", "0.9"});
  EXPECT_EQ(sglang_same_start_flags(shared, static_cast<std::int64_t>(kGiB), 80 * kGiB),
            "--mem-fraction-static 0.8875");
  EXPECT_EQ(sglang_same_start_flags(shared, -static_cast<std::int64_t>(kGiB), 80 * kGiB),
            "--mem-fraction-static 0.9125");
  EXPECT_EQ(sglang_same_start_flags(shared, static_cast<std::int64_t>(80 * kGiB), 80 * kGiB), "") << "nothing left";
  EXPECT_EQ(sglang_same_start_flags(launched_with({}), static_cast<std::int64_t>(kGiB), 80 * kGiB), "");
  EXPECT_EQ(sglang_same_start_flags(shared, static_cast<std::int64_t>(kGiB), 0), "");
}

TEST(SglangModel, MemoryEnvironmentAndModulePackages) {
  const auto variables = sglang_memory_environment_variables();
  EXPECT_EQ(std::vector<std::string_view>(variables.begin(), variables.end()),
            (std::vector<std::string_view>{"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF",
                                           "SGLANG_MOONCAKE_CUSTOM_MEM_POOL"}));
  const auto packages = sglang_module_packages();
  EXPECT_EQ(std::vector<std::string_view>(packages.begin(), packages.end()),
            (std::vector<std::string_view>{"/sgl_kernel/", "/sglang/"}));
}

// The profile key drops where the server listens, what it logs, its share and random ports, each in
// the arity SGLang's parser gives it, and keeps every flag that changes memory.
TEST(SglangModel, ProfileKeyFlagsKeptAndDropped) {
  const auto ignored = sglang_flags_ignored_by_profiles();
  const auto takes = [&](std::string_view name) {
    const auto it = std::find_if(ignored.begin(), ignored.end(), [&](const FlagSpec& f) { return f.name == name; });
    return it == ignored.end() ? std::optional<Takes>() : it->takes;
  };
  EXPECT_EQ(takes("--port"), Takes::one_value);
  EXPECT_EQ(takes("--api-key"), Takes::one_value) << "one key, unlike vLLM's list";
  EXPECT_EQ(takes("--mem-fraction-static"), Takes::one_value);
  EXPECT_EQ(takes("--nccl-port"), Takes::one_value);
  EXPECT_EQ(takes("--dist-init-addr"), Takes::one_value);
  EXPECT_EQ(takes("--log-requests"), Takes::nothing);
  EXPECT_EQ(takes("--enable-metrics"), Takes::nothing);
  for (const char* kept : {"--chunked-prefill-size", "--max-prefill-tokens", "--tp-size", "--context-length",
                           "--disable-cuda-graph", "--gpu-memory-utilization", "--seed"})
    EXPECT_EQ(takes(kept), std::nullopt) << kept;
  EXPECT_EQ(normalised_cmdline(Args{"python3", "-m", "sglang.launch_server", "--model-path", "m", "--port", "31000",
                                    "--mem_fraction_static=0.85", "--nccl-port", "41234", "--enable-metrics",
                                    "--chunked-prefill-size", "4096", "--tp-size=2"}),
            (Args{"python3", "-m", "sglang.launch_server", "--model-path", "m", "--chunked-prefill-size", "4096",
                  "--tp-size", "2"}));
}
