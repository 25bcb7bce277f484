// vllm_like: a vLLM V1 / SGLang-like start-up on the public CUDA runtime API, driven by a scenario file.
//
// Reproduces the order that makes engines run out of memory after sizing their KV cache (DESIGN.md
// §1): measure, size the KV cache, then allocate what the measurement never saw. Exit statuses are
// listed in cuda_check.h and README.md.
#include <dlfcn.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cuda_check.h"
#include "engine.h"
#include "keep_serving.h"
#include "process_tree.h"
#include "rank_launcher.h"
#include "scenario.h"

namespace {

using namespace vllm_like;

struct Cli {
  std::string scenario;
  EngineOptions engine;
  bool print_env = false;
  int ranks = 0;                         // > 0: launch this many engine processes instead of running one
  bool keep_serving = false;             // VLLM_LIKE_KEEP_SERVING=1: serve until SIGTERM or SIGINT
  std::vector<std::string> engine_args;  // the command line without --ranks, for the launched ranks
};

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "vllm_like: %s (see --help)\n", message.c_str());
  std::exit(kExitUsage);
}

void print_usage() {
  std::printf(
      "usage: vllm_like [serve [MODEL]] --scenario FILE [vLLM options | --engine sglang SGLang options]\n"
      "                 [--device N | --ranks N] [--print-simcuda-env]\n"
      "  --scenario FILE              memory figures of one engine rank (see README.md)\n"
      "  --engine vllm|sglang         start-up sequence to follow (default vllm)\n"
      "vLLM:\n"
      "  --port N                     where the server listens (both engines); the replica opens no port\n"
      "  [serve] MODEL, --model NAME  the model's name (vllm serve MODEL): only kvremap's profile key reads it\n"
      "  --gpu-memory-utilization U   share of the device the engine may use, 0 < U <= 1 (default 0.92)\n"
      "  --kv-cache-memory SIZE       KV cache size as given (\"20GiB\" or bytes); profiling still runs\n"
      "  --enforce-eager              no CUDA-graph capture; serving runs eager forwards only\n"
      "  --config FILE                flags in a YAML file, as vLLM's; the replica reads none of them\n"
      "  --graphs-dropped             not a vLLM flag: the engine drops its graphs on its own, as vLLM sets\n"
      "                               cudagraph_mode NONE when its attention backend cannot capture\n"
      "                               (config/compilation.py:1433-1438); nothing on the line says eager\n"
      "  --kv-transfer-config JSON    a KV connector: each KV tensor is registered by CUDA IPC right\n"
      "                               after its allocation (LMCache's multi-process adapter)\n"
      "  -cc.cudagraph_mode=MODE      FULL_AND_PIECEWISE (default), FULL, PIECEWISE or NONE; Model Runner V2\n"
      "                               (VLLM_USE_V2_MODEL_RUNNER=1): PIECEWISE graphs on graph_capture()'s\n"
      "                               stream, FULL graphs warmed up there and captured on PyTorch's\n"
      "                               default capture stream\n"
      "  --first-request graph-replays|eager-prefill\n"
      "                               first serving step: graph replays (default) or an eager prefill\n"
      "                               longer than the largest captured size\n"
      "SGLang:\n"
      "  --mem-fraction-static F      share for weights and KV pool, 0 < F < 1 (default 0.88)\n"
      "  --disable-cuda-graph         no CUDA-graph capture; prefill and decode run eagerly\n"
      "  --context-length N           the model's context length (default 32768): req_to_token's columns\n"
      "  --mamba-layers N             not an SGLang flag: the model's linear-attention layers, whose state\n"
      "                               pool comes before the other layers' KV cache (hybrid Mamba/GDN models)\n"
      "  --speculative-algorithm EAGLE\n"
      "                               a draft model's weights after the target's, its KV pool after the target's\n"
      "  --max-running-requests N     requests served at once (default 2048): req_to_token's rows\n"
      "  --chunked-prefill-size N     prefill chunk in tokens (-1: off), as SGLang takes it; the replica's\n"
      "                               prefill activations come from the scenario (serving.activation_peak)\n"
      "Both:\n"
      "  --kv-layout per-layer|one-allocation|k-then-v\n"
      "                               one KV tensor per layer (default; vLLM up to 0.28, SGLang's pools) or\n"
      "                               every layer in one allocation (vLLM 0.29 and later, SGLang's\n"
      "                               --enable-unified-memory)\n"
      "  --device N                   CUDA device to use (default 0); also the rank\n"
      "  --ranks N                    launch N engine processes, rank r on device r, wait for all; exits\n"
      "                               with the lowest failing rank's status\n"
      "  --print-simcuda-env          print the SIMCUDA_* settings that model the scenario's device, and exit\n"
      "Environment:\n"
      "  VLLM_LIKE_KEEP_SERVING=1     after its requests, serve on until SIGTERM or SIGINT, then exit 0 (a\n"
      "                               server's life; the front process and the rank launcher pass them on).\n"
      "                               Not a flag: the command line stays the one kvremap's profile key reads\n");
}

double fraction(const char* flag, const char* text, bool allow_one) {
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(value > 0) || value > 1 || (!allow_one && value == 1))
    usage_error(std::string(flag) + ": '" + text + "' is not a fraction in (0, " + (allow_one ? "1]" : "1)"));
  return value;
}

long count(const char* flag, const char* text, long minimum, long maximum = 1024) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || value < minimum || value > maximum)
    usage_error(std::string(flag) + ": '" + text + "' is not an integer in [" + std::to_string(minimum) + ", " +
                std::to_string(maximum) + "]");
  return value;
}

std::uint64_t size_argument(const char* flag, const char* text) {
  std::uint64_t bytes = 0;
  try {
    bytes = parse_size(text);
  } catch (const ScenarioError& e) {
    usage_error(std::string(flag) + ": " + e.what());
  }
  if (bytes == 0) usage_error(std::string(flag) + ": must be more than 0 bytes");
  return bytes;
}

// Options of one engine given to the other: each named, so the line says which flag to drop.
void check_combinations(const Cli& cli, const std::vector<std::string>& vllm_only,
                        const std::vector<std::string>& sglang_only, bool first_request_given, bool device_given) {
  if (cli.engine.kind == EngineKind::sglang && !vllm_only.empty())
    usage_error(vllm_only.front() + " is a vLLM option, not for --engine sglang");
  if (cli.engine.kind == EngineKind::vllm && !sglang_only.empty())
    usage_error(sglang_only.front() + " needs --engine sglang");
  if (cli.engine.kind == EngineKind::vllm && !cli.engine.cuda_graphs && first_request_given)
    usage_error("--first-request chooses between graph replays and an eager prefill; --enforce-eager has no graphs");
  if (cli.ranks > 0 && device_given) usage_error("--ranks gives rank r device r; drop --device");
  // A server that drops its graphs is safe only through its serving port opening, which the replica
  // does not model (tests/integration/engine_tree.py does).
  if (!cli.engine_args.empty() && cli.engine_args.front() == "serve" &&
      std::find(vllm_only.begin(), vllm_only.end(), "--graphs-dropped") != vllm_only.end())
    usage_error("--graphs-dropped is an offline start-up here: the replica opens no serving port; drop serve");
}

Cli parse_cli(int argc, char** argv) {
  Cli cli;
  std::vector<std::string> vllm_only, sglang_only;
  bool first_request_given = false, device_given = false, cudagraph_mode_given = false;
  // vLLM picks its model runner from VLLM_USE_V2_MODEL_RUNNER (envs.py:2023-2025 at 017e9f4; unset means V2 in
  // vLLM, V1's start-up in the replica).
  if (const char* v2 = std::getenv("VLLM_USE_V2_MODEL_RUNNER")) {
    const std::string_view value = v2;
    if (value == "1" || value == "true" || value == "True")
      cli.engine.model_runner_v2 = true;
    else if (value != "0" && value != "false" && value != "False")
      usage_error("VLLM_USE_V2_MODEL_RUNNER: '" + std::string(value) + "' is not 1 or 0");
  }
  // `serve` first, as `vllm serve` and `sglang serve` start the engine's server (the replica opens no
  // port: its serving steps run in the process, as they would behind one).
  int first_option = argc > 1 && std::string_view(argv[1]) == "serve" ? 2 : 1;
  if (first_option == 2) cli.engine_args.emplace_back("serve");
  // `vllm serve MODEL`: the model, as vLLM takes it positionally (entrypoints/cli/serve.py); the replica's
  // model is its scenario, so the name only reaches kvremap's profile key (as --model does).
  if (first_option == 2 && argc > 2 && argv[2][0] != '-') {
    cli.engine_args.emplace_back(argv[first_option++]);
    vllm_only.emplace_back("a positional MODEL");
  }
  for (int i = first_option; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--ranks" && has_value) {
      cli.ranks = static_cast<int>(count("--ranks", argv[++i], 1));
      continue;
    }
    const int first = i;
    if (arg == "--help" || arg == "-h") {
      print_usage();
      std::exit(0);
    } else if (arg == "--print-simcuda-env") {
      cli.print_env = true;
    } else if (arg == "--scenario" && has_value) {
      cli.scenario = argv[++i];
    } else if (arg == "--gpu-memory-utilization" && has_value) {
      cli.engine.gpu_memory_utilization = fraction("--gpu-memory-utilization", argv[++i], true);
      vllm_only.emplace_back(arg);
    } else if (arg == "--port" && has_value) {
      // Where the engine's server listens (both engines): kvremap reads it to know the serving port; the
      // replica opens none (tests/integration/engine_tree.py does).
      count("--port", argv[++i], 1, 65535);
    } else if (arg == "--model" && has_value) {
      ++i;  // the model's name: kvremap keys profiles by it; the replica's model is its scenario
      vllm_only.emplace_back(arg);
    } else if (arg == "--kv-cache-memory" && has_value) {
      cli.engine.kv_cache_memory = size_argument("--kv-cache-memory", argv[++i]);
      vllm_only.emplace_back(arg);
    } else if (arg == "--kv-transfer-config" && has_value) {
      cli.engine.kv_connector = argv[++i];
      vllm_only.emplace_back(arg);
    } else if (arg == "--enforce-eager") {
      cli.engine.cuda_graphs = false;
      vllm_only.emplace_back(arg);
    } else if (arg == "--config" && has_value) {
      ++i;  // flags in a YAML file, as vLLM's --config: the replica reads none of them
      vllm_only.emplace_back(arg);
    } else if (arg.starts_with("-cc.cudagraph_mode=")) {
      // vLLM's dotted --compilation-config key (utils/argparse_utils.py); the replica models it for Model
      // Runner V2 only.
      const std::string_view mode = arg.substr(std::string_view("-cc.cudagraph_mode=").size());
      if (mode == "FULL_AND_PIECEWISE")
        cli.engine.cudagraph_mode = CudagraphMode::full_and_piecewise;
      else if (mode == "FULL")
        cli.engine.cudagraph_mode = CudagraphMode::full;
      else if (mode == "PIECEWISE")
        cli.engine.cudagraph_mode = CudagraphMode::piecewise;
      else if (mode == "NONE")
        cli.engine.cuda_graphs = false;
      else
        usage_error("-cc.cudagraph_mode: '" + std::string(mode) +
                    "' is not FULL_AND_PIECEWISE, FULL, PIECEWISE or NONE");
      vllm_only.emplace_back("-cc.cudagraph_mode");
      cudagraph_mode_given = true;
    } else if (arg == "--graphs-dropped") {
      cli.engine.cuda_graphs = false;
      vllm_only.emplace_back(arg);
    } else if (arg == "--first-request" && has_value) {
      const std::string_view kind = argv[++i];
      if (kind == "graph-replays")
        cli.engine.first_request = FirstRequest::graph_replays;
      else if (kind == "eager-prefill")
        cli.engine.first_request = FirstRequest::eager_prefill;
      else
        usage_error("--first-request: '" + std::string(kind) + "' is not graph-replays or eager-prefill");
      vllm_only.emplace_back(arg);
      first_request_given = true;
    } else if (arg == "--mem-fraction-static" && has_value) {
      cli.engine.mem_fraction_static = fraction("--mem-fraction-static", argv[++i], false);
      sglang_only.emplace_back(arg);
    } else if (arg == "--chunked-prefill-size" && has_value) {
      const char* tokens = argv[++i];
      char* end = nullptr;
      const long value = std::strtol(tokens, &end, 10);
      if (end == tokens || *end != '\0' || value < -1)
        usage_error(std::string("--chunked-prefill-size: '") + tokens + "' is not a token count or -1");
      sglang_only.emplace_back(arg);
    } else if (arg == "--context-length" && has_value) {
      cli.engine.context_length = static_cast<std::uint64_t>(count("--context-length", argv[++i], 1, 1l << 24));
      sglang_only.emplace_back(arg);
    } else if (arg == "--max-running-requests" && has_value) {
      cli.engine.max_running_requests =
          static_cast<std::uint64_t>(count("--max-running-requests", argv[++i], 1, 1l << 20));
      sglang_only.emplace_back(arg);
    } else if (arg == "--mamba-layers" && has_value) {
      cli.engine.mamba_layers = static_cast<std::size_t>(count("--mamba-layers", argv[++i], 1, 4096));
      sglang_only.emplace_back(arg);
    } else if (arg == "--speculative-algorithm" && has_value) {
      if (std::string_view(argv[++i]) != "EAGLE")
        usage_error(std::string("--speculative-algorithm: '") + argv[i] + "' is not modelled (EAGLE is)");
      cli.engine.speculative = true;
      sglang_only.emplace_back(arg);
    } else if (arg == "--disable-cuda-graph") {
      cli.engine.cuda_graphs = false;
      sglang_only.emplace_back(arg);
    } else if (arg == "--kv-layout" && has_value) {
      const std::string_view layout = argv[++i];
      if (layout == "per-layer")
        cli.engine.kv_layout = vllm_like::KvLayout::per_layer;
      else if (layout == "one-allocation")
        cli.engine.kv_layout = vllm_like::KvLayout::one_allocation;
      else if (layout == "k-then-v")
        cli.engine.kv_layout = vllm_like::KvLayout::k_then_v;
      else
        usage_error("--kv-layout: '" + std::string(layout) + "' is not per-layer, one-allocation or k-then-v");
    } else if (arg == "--device" && has_value) {
      cli.engine.device = static_cast<int>(count("--device", argv[++i], 0));
      device_given = true;
    } else if (arg == "--engine" && has_value) {
      const std::string_view kind = argv[++i];
      if (kind == "vllm")
        cli.engine.kind = EngineKind::vllm;
      else if (kind == "sglang")
        cli.engine.kind = EngineKind::sglang;
      else
        usage_error("--engine: '" + std::string(kind) + "' is not vllm or sglang");
    } else {
      usage_error("unknown or incomplete argument '" + std::string(arg) + "'");
    }
    for (int j = first; j <= i; ++j) cli.engine_args.emplace_back(argv[j]);
  }
  if (cli.scenario.empty()) usage_error("--scenario FILE is required");
  if (const char* keep = std::getenv("VLLM_LIKE_KEEP_SERVING")) {
    const std::string_view value = keep;
    if (value != "0" && value != "1") usage_error("VLLM_LIKE_KEEP_SERVING: '" + std::string(value) + "' is not 1 or 0");
    cli.keep_serving = value == "1";
  }
  if (cudagraph_mode_given && !cli.engine.model_runner_v2 && cli.engine.cuda_graphs)
    usage_error("-cc.cudagraph_mode is modelled for Model Runner V2: set VLLM_USE_V2_MODEL_RUNNER=1");
  check_combinations(cli, vllm_only, sglang_only, first_request_given, device_given);
  return cli;
}

// The simulator settings of the scenario's device. Graph execs are charged per instantiation, so the
// scenario's total is spread over its capture sizes; modules charge what their PTX comment says.
void print_simcuda_env(const Scenario& s, const Cli& cli) {
  std::printf("SIMCUDA_DEVICE_MEMORY=%" PRIu64 "\n", s.device_total);
  std::printf("SIMCUDA_CONTEXT_BYTES=%" PRIu64 "\n", s.context_bytes);
  std::printf("SIMCUDA_GRAPH_EXEC_BYTES=%" PRIu64 "\n", s.graph_exec_total / s.capture_sizes.size());
  std::printf("SIMCUDA_GRAPH_NODE_BYTES=0\n");
  std::printf("SIMCUDA_MODULE_BYTES=0\n");
  // One simulated device per rank (the launcher's ranks are separate processes, each its own simulator).
  const int devices = cli.ranks > 0 ? cli.ranks : cli.engine.device + 1;
  if (devices > 1) std::printf("SIMCUDA_DEVICE_COUNT=%d\n", devices);
}

// `serve` runs the engine in a process of its own, as the engines' servers do; the title it takes.
std::string engine_process_title(const Cli& cli) {
  if (cli.engine.kind == EngineKind::sglang) return "sglang::scheduler_TP" + std::to_string(cli.engine.device);
  return "VLLM::EngineCore";  // TP=1 runs its worker in the engine core (config/parallel.py:954-956, "uni")
}

StartMethod engine_start_method(const Cli& cli) {
  if (cli.engine.kind == EngineKind::sglang) return StartMethod::spawn;
  const char* method = std::getenv("VLLM_WORKER_MULTIPROC_METHOD");
  if (method == nullptr || std::string_view(method) == "fork") return StartMethod::fork;
  if (std::string_view(method) == "spawn") return StartMethod::spawn;
  usage_error(std::string("VLLM_WORKER_MULTIPROC_METHOD: '") + method + "' is not fork or spawn");
}

}  // namespace

int main(int argc, char** argv) {
  // Line-buffered even into a pipe, so phase lines and the failure line on stderr keep their order.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  // A spawned engine process: its line is the multiprocessing bootstrap, its arguments come through a pipe.
  const std::optional<std::vector<std::string>> spawned = spawned_engine_arguments(argc, argv);
  std::vector<std::string> spawned_args;
  std::vector<char*> spawned_argv;
  if (spawned) {
    spawned_args.push_back(argv[0]);
    spawned_args.insert(spawned_args.end(), spawned->begin(), spawned->end());
    for (std::string& a : spawned_args) spawned_argv.push_back(a.data());
    spawned_argv.push_back(nullptr);
  }
  const Cli cli =
      spawned ? parse_cli(static_cast<int>(spawned_args.size()), spawned_argv.data()) : parse_cli(argc, argv);
  Scenario scenario;
  try {
    scenario = load_scenario(cli.scenario);
  } catch (const ScenarioError& e) {
    std::fprintf(stderr, "vllm_like: scenario %s\n", e.what());
    return kExitUsage;
  }
  if (cli.engine.mamba_layers >= scenario.num_layers) {
    std::fprintf(stderr,
                 "vllm_like: --mamba-layers %zu: the scenario's model has %zu layers; at least one must be "
                 "full attention\n",
                 cli.engine.mamba_layers, scenario.num_layers);
    return kExitUsage;
  }
  if (cli.print_env) {
    print_simcuda_env(scenario, cli);
    return 0;
  }
  if (cli.keep_serving) block_stop_signals();
  if (cli.ranks > 0) return launch_ranks(argv[0], cli.ranks, cli.engine_args, cli.keep_serving);
  // `serve`: this is the front process (vLLM's API server, SGLang's launch_server), which starts the engine
  // process and waits; the engine process renames itself before any CUDA call.
  bool engine_process = spawned.has_value();
  if (!engine_process && !cli.engine_args.empty() && cli.engine_args.front() == "serve") {
    if (const std::optional<int> status =
            start_engine_process(engine_start_method(cli), cli.engine_args, cli.keep_serving))
      return *status;
    engine_process = true;  // the forked child
  }
  if (engine_process) set_process_title(argc, argv, engine_process_title(cli));
  // The engine's native extensions, loaded as `import vllm` loads vllm/_C.abi3.so, before any CUDA call:
  // VLLM_LIKE_EXTENSIONS, colon-separated paths (tests give builds that differ only in their build id).
  if (const char* extensions = std::getenv("VLLM_LIKE_EXTENSIONS")) {
    const std::string list = extensions;
    for (std::size_t at = 0; at < list.size();) {
      const std::size_t end = std::min(list.find(':', at), list.size());
      const std::string path = list.substr(at, end - at);
      if (!path.empty() && !dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
        std::fprintf(stderr, "vllm_like: VLLM_LIKE_EXTENSIONS: cannot load %s: %s\n", path.c_str(), dlerror());
        return kExitUsage;
      }
      at = end + 1;
    }
  }
  std::printf("vllm_like: scenario %s, engine %s, device %d\n", scenario.name.c_str(),
              cli.engine.kind == EngineKind::vllm ? "vllm" : "sglang", cli.engine.device);
  Engine engine(scenario, cli.engine);
  try {
    engine.run();
  } catch (const EngineExit& e) {
    std::fprintf(stderr, "vllm_like: phase %s failed: %s\n", engine.phase().c_str(), e.what());
    return e.status;
  }
  if (cli.keep_serving) {
    std::printf("vllm_like: serving until SIGTERM or SIGINT\n");
    const int signal = wait_for_stop_signal();
    std::printf("vllm_like: shutting down on signal %d\n", signal);
  }
  return kExitStarted;
}
