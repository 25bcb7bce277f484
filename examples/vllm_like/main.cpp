// vllm_like: a vLLM V1 / SGLang-like start-up on the public CUDA runtime API, driven by a scenario file.
//
// Reproduces the order that makes engines run out of memory after sizing their KV cache (DESIGN.md
// §1): measure, size the KV cache, then allocate what the measurement never saw. Exit statuses are
// listed in cuda_check.h and README.md.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cuda_check.h"
#include "engine.h"
#include "scenario.h"

namespace {

using namespace vllm_like;

struct Cli {
  std::string scenario;
  EngineOptions engine;
  bool print_env = false;
};

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "vllm_like: %s (see --help)\n", message.c_str());
  std::exit(kExitUsage);
}

void print_usage() {
  std::printf(
      "usage: vllm_like --scenario FILE [--gpu-memory-utilization U | --engine sglang --mem-fraction-static F]\n"
      "                 [--print-simcuda-env]\n"
      "  --scenario FILE              memory figures of one engine rank (see README.md)\n"
      "  --engine vllm|sglang         start-up sequence to follow (default vllm)\n"
      "  --gpu-memory-utilization U   vLLM: share of the device the engine may use, 0 < U <= 1 (default 0.9)\n"
      "  --mem-fraction-static F      SGLang: share for weights and KV pool, 0 < F < 1 (default 0.88)\n"
      "  --print-simcuda-env          print the SIMCUDA_* settings that model the scenario's device, and exit\n");
}

double fraction(const char* flag, const char* text, bool allow_one) {
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(value > 0) || value > 1 || (!allow_one && value == 1))
    usage_error(std::string(flag) + ": '" + text + "' is not a fraction in (0, " + (allow_one ? "1]" : "1)"));
  return value;
}

Cli parse_cli(int argc, char** argv) {
  Cli cli;
  bool util_given = false, fraction_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--help" || arg == "-h") {
      print_usage();
      std::exit(0);
    } else if (arg == "--print-simcuda-env") {
      cli.print_env = true;
    } else if (arg == "--scenario" && has_value) {
      cli.scenario = argv[++i];
    } else if (arg == "--gpu-memory-utilization" && has_value) {
      cli.engine.gpu_memory_utilization = fraction("--gpu-memory-utilization", argv[++i], true);
      util_given = true;
    } else if (arg == "--mem-fraction-static" && has_value) {
      cli.engine.mem_fraction_static = fraction("--mem-fraction-static", argv[++i], false);
      fraction_given = true;
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
  }
  if (cli.scenario.empty()) usage_error("--scenario FILE is required");
  if (cli.engine.kind == EngineKind::vllm && fraction_given) usage_error("--mem-fraction-static needs --engine sglang");
  if (cli.engine.kind == EngineKind::sglang && util_given) usage_error("--gpu-memory-utilization is a vLLM option");
  return cli;
}

// The simulator settings of the scenario's device. Graph execs are charged per instantiation, so the
// scenario's total is spread over its capture sizes; modules charge what their PTX comment says.
void print_simcuda_env(const Scenario& s) {
  std::printf("SIMCUDA_DEVICE_MEMORY=%" PRIu64 "\n", s.device_total);
  std::printf("SIMCUDA_CONTEXT_BYTES=%" PRIu64 "\n", s.context_bytes);
  std::printf("SIMCUDA_GRAPH_EXEC_BYTES=%" PRIu64 "\n", s.graph_exec_total / s.capture_sizes.size());
  std::printf("SIMCUDA_GRAPH_NODE_BYTES=0\n");
  std::printf("SIMCUDA_MODULE_BYTES=0\n");
}

}  // namespace

int main(int argc, char** argv) {
  // Line-buffered even into a pipe, so phase lines and the failure line on stderr keep their order.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const Cli cli = parse_cli(argc, argv);
  Scenario scenario;
  try {
    scenario = load_scenario(cli.scenario);
  } catch (const ScenarioError& e) {
    std::fprintf(stderr, "vllm_like: scenario %s\n", e.what());
    return kExitUsage;
  }
  if (cli.print_env) {
    print_simcuda_env(scenario);
    return 0;
  }
  std::printf("vllm_like: scenario %s, engine %s\n", scenario.name.c_str(),
              cli.engine.kind == EngineKind::vllm ? "vllm" : "sglang");
  Engine engine(scenario, cli.engine);
  try {
    engine.run();
  } catch (const EngineExit& e) {
    std::fprintf(stderr, "vllm_like: phase %s failed: %s\n", engine.phase().c_str(), e.what());
    return e.status;
  }
  return kExitStarted;
}
