// vLLM V1's start-up with --enable-sleep-mode on the simulator: weights and KV through CuMemAllocator, sleep, wake.
//
// Usage: vmm_sleep_engine [--share F] [--layers N] [--sleep-before-launch] [--sleep-level 1|2]
//                         [--activation-mib N] [--warm-up-attention] [--autotune-mib N]
// Replays vLLM's order (worker/gpu_worker.py): weights in the "weights" pool, a profiling forward, the
// "after profile" sizing query, the KV cache in the "kv_cache" pool (one tensor per layer), kernel
// autotuning, a CUDA graph capture, then serving, sleep(level=1) and wake_up. --sleep-before-launch is
// verl's order: sleep right after start-up, before any graph launch. --sleep-level 2 discards the weights
// too (gpu_worker.py sleep at 35d5cda, lines 114-136: offload_tags empty), and the wake is an RL loop's:
// wake_up(tags=["weights"]), the weights loaded again (Worker.reload_weights), then wake_up(tags=["kv_cache"]).
// Each wake creates and maps new memory of each allocation's own size at its own address
// (device_allocator/cumem.py at 010c211, wake_up lines 217-236). --activation-mib sizes each of the two
// activation tensors of the profiling forward (256 MiB by default). --warm-up-attention adds a compile warm-up
// right after the KV cache, before autotuning: the same activations live while a kernel takes a KV tensor's
// address (as Model Runner V2's warm-ups run with attention metadata), then freed. --autotune-mib sizes the
// autotuning workspace (2048 MiB by default). Prints one line per step and
// "FAILED: <what>" per failed check; exits with the number of failures, or 5 when autotuning runs out
// of memory (stock vLLM's failure at a high --gpu-memory-utilization).
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "examples/vllm_like/torch_fill.h"
#include "simcuda.h"

extern "C" {
int cumem_stub_malloc(std::size_t size, const char* tag, void** out);
int cumem_stub_free(void* ptr);
long long cumem_stub_sleep(int level);
int cumem_stub_wake(const char* tag);
int cumem_stub_state(void* ptr);
}

#define ENGINE_EXPORT extern "C" __attribute__((visibility("default")))
#define ENGINE_FILL_TWIN_(name) simcuda_kernel_##name
#define ENGINE_FILL_TWIN(name) ENGINE_FILL_TWIN_(name)

// Host twins of the module's kernels (the simulator runs `.entry NAME` by calling simcuda_kernel_NAME).
// PyTorch's int8 fill: the simulator's own fill, which drops the pages of a zero fill as cuMemsetD8 does.
ENGINE_EXPORT void
simcuda_kernel__ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIaEENS0_5ArrayIPcLi1EEEEEviT0_T1_(
    void** params) {
  const int n = *static_cast<int*>(params[0]);
  const auto value = *static_cast<unsigned char*>(params[1]);
  char* const data = *static_cast<char**>(params[2]);
  if (n > 0) simcuda_fill_device(reinterpret_cast<std::uintptr_t>(data), value, static_cast<unsigned long long>(n));
}

// One layer's step of the captured forward: writes `value` at `kv + offset` (as vLLM's
// reshape_and_cache, csrc/cache_kernels.cu, writes a new token's K/V into the layer's cache).
ENGINE_EXPORT void simcuda_kernel_kv_step(void** params) {
  char* const kv = *static_cast<char**>(params[0]);
  const auto offset = *static_cast<std::uint64_t*>(params[1]);
  const auto value = *static_cast<std::uint32_t*>(params[2]);
  std::memcpy(kv + offset, &value, sizeof value);
}

namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
constexpr std::uint64_t kWeightsBytes = kGiB;
constexpr std::uint64_t kGraphPoolBytes = 32 * kMiB;  // what the capture allocates from its private pool
constexpr std::uint64_t kSampleBytes = 1 * kMiB;      // each weights sample written and compared
constexpr int kWeightSamples = 16;
constexpr std::uint64_t kPatternBytes = 4096;  // written at the start and the end of every KV tensor
constexpr int kExitAutotuneOom = 5;

int failures = 0;

void check(bool ok, const std::string& what) {
  if (ok) return;
  std::printf("FAILED: %s\n", what.c_str());
  ++failures;
}

// A fatal step: the rest depends on it.
void require(bool ok, const std::string& what) {
  if (ok) return;
  std::printf("FAILED: %s\n", what.c_str());
  std::fflush(stdout);
  std::exit(failures + 1);
}

std::string mib(std::uint64_t bytes) { return std::to_string(bytes / kMiB) + " MiB"; }

struct Options {
  double share = 0.92;  // vLLM's default --gpu-memory-utilization (config/cache.py)
  int layers = 8;
  bool sleep_before_launch = false;
  int sleep_level = 1;
  std::uint64_t activation_bytes = 256 * kMiB;  // each of two tensors: the profiling forward's peak is twice it
  bool warm_up_attention = false;
  // More than a 16 GiB device leaves free at --share 0.95 (0.8 GiB), less than at 0.8 (3.2 GiB).
  std::uint64_t autotune_bytes = 2 * kGiB;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--share" && i + 1 < argc) {
      o.share = std::atof(argv[++i]);
    } else if (a == "--layers" && i + 1 < argc) {
      o.layers = std::atoi(argv[++i]);
    } else if (a == "--sleep-before-launch") {
      o.sleep_before_launch = true;
    } else if (a == "--sleep-level" && i + 1 < argc) {
      o.sleep_level = std::atoi(argv[++i]);
    } else if (a == "--activation-mib" && i + 1 < argc) {
      o.activation_bytes = std::strtoull(argv[++i], nullptr, 10) * kMiB;
    } else if (a == "--warm-up-attention") {
      o.warm_up_attention = true;
    } else if (a == "--autotune-mib" && i + 1 < argc) {
      o.autotune_bytes = std::strtoull(argv[++i], nullptr, 10) * kMiB;
    } else {
      std::fprintf(stderr,
                   "usage: vmm_sleep_engine [--share F] [--layers N] [--sleep-before-launch] [--sleep-level 1|2] "
                   "[--activation-mib N] [--warm-up-attention] [--autotune-mib N]\n");
      std::exit(2);
    }
  }
  if (o.share <= 0 || o.share > 1 || o.layers < 1 || (o.sleep_level != 1 && o.sleep_level != 2) ||
      o.activation_bytes == 0 || o.autotune_bytes == 0) {
    std::fprintf(stderr,
                 "vmm_sleep_engine: --share must be in (0, 1], --layers at least 1, --sleep-level 1 or 2 and "
                 "--activation-mib and --autotune-mib at least 1\n");
    std::exit(2);
  }
  return o;
}

std::string module_ptx() {
  return std::string(".version 8.0\n.target sm_90\n.address_size 64\n") + ".visible .entry " +
         vllm_like::kTorchFillKernel +
         "(.param .u32 n, .param .align 1 .b8 f[1], .param .align 8 .b8 data[8])\n{\nret;\n}\n"
         ".visible .entry kv_step(.param .u64 kv, .param .u64 offset, .param .u32 value)\n{\nret;\n}\n";
}

struct Kernels {
  cudaKernel_t fill = nullptr;
  cudaKernel_t step = nullptr;
};

Kernels load_kernels() {
  static const std::string ptx = module_ptx();
  cudaLibrary_t library = nullptr;
  Kernels k;
  require(cudaLibraryLoadData(&library, ptx.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0) == cudaSuccess &&
              cudaLibraryGetKernel(&k.fill, library, vllm_like::kTorchFillKernel) == cudaSuccess &&
              cudaLibraryGetKernel(&k.step, library, "kv_step") == cudaSuccess,
          "module load");
  return k;
}

// torch.zeros on a CUDA tensor: PyTorch's fill kernel, one launch per 32-bit element range (torch_fill.h).
bool torch_zeros(const Kernels& k, void* base, std::uint64_t bytes, cudaStream_t stream) {
  for (std::uint64_t at = 0; at < bytes; at += vllm_like::kTorchFillMaxElements) {
    int n = static_cast<int>(std::min(bytes - at, vllm_like::kTorchFillMaxElements));
    at::native::FillFunctor<signed char> zero{0};
    at::native::Array<char*, 1> data{{static_cast<char*>(base) + at}};
    void* args[] = {&n, &zero, &data};
    if (cudaLaunchKernel(reinterpret_cast<const void*>(k.fill), dim3(1), dim3(256), args, 0, stream) != cudaSuccess)
      return false;
  }
  return true;
}

bool kv_step(const Kernels& k, void* kv, std::uint64_t offset, std::uint32_t value, cudaStream_t stream) {
  void* args[] = {&kv, &offset, &value};
  return cudaLaunchKernel(reinterpret_cast<const void*>(k.step), dim3(1), dim3(1), args, 0, stream) == cudaSuccess;
}

std::uint64_t free_bytes(std::uint64_t* total = nullptr) {
  std::size_t f = 0, t = 0;
  require(cudaMemGetInfo(&f, &t) == cudaSuccess, "cudaMemGetInfo");
  if (total) *total = t;
  return f;
}

std::vector<unsigned char> pattern(std::uint64_t bytes, std::uint32_t seed) {
  std::vector<unsigned char> p(bytes);
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& b : p) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<unsigned char>(x >> 24);
  }
  return p;
}

// A distinct pattern written at both ends of every KV tensor, read back and compared.
bool kv_usable(const std::vector<void*>& kv, std::uint64_t tensor_bytes, std::uint32_t round) {
  bool ok = true;
  for (std::size_t i = 0; i < kv.size(); ++i) {
    for (const std::uint64_t at : {std::uint64_t{0}, tensor_bytes - kPatternBytes}) {
      const auto want = pattern(kPatternBytes, round * 1000 + static_cast<std::uint32_t>(i * 2 + (at != 0)));
      std::vector<unsigned char> got(kPatternBytes);
      char* const where = static_cast<char*>(kv[i]) + at;
      ok = ok && cudaMemcpy(where, want.data(), kPatternBytes, cudaMemcpyHostToDevice) == cudaSuccess &&
           cudaMemcpy(got.data(), where, kPatternBytes, cudaMemcpyDeviceToHost) == cudaSuccess && got == want;
    }
  }
  return ok;
}

std::uint64_t weights_sample_offset(int i) { return static_cast<std::uint64_t>(i) * (kWeightsBytes / kWeightSamples); }

bool weights_match(void* weights) {
  bool ok = true;
  for (int i = 0; i < kWeightSamples; ++i) {
    std::vector<unsigned char> got(kSampleBytes);
    ok = ok &&
         cudaMemcpy(got.data(), static_cast<char*>(weights) + weights_sample_offset(i), kSampleBytes,
                    cudaMemcpyDeviceToHost) == cudaSuccess &&
         got == pattern(kSampleBytes, 7000 + i);
  }
  return ok;
}

// The whole checkpoint copied in (load_model's copy_ per tensor), then the samples checked after the wake.
void load_weights(void* weights) {
  const std::vector<unsigned char> checkpoint(64 * kMiB, 0x3c);
  for (std::uint64_t at = 0; at < kWeightsBytes; at += checkpoint.size())
    require(cudaMemcpy(static_cast<char*>(weights) + at, checkpoint.data(), checkpoint.size(),
                       cudaMemcpyHostToDevice) == cudaSuccess,
            "checkpoint upload");
  for (int i = 0; i < kWeightSamples; ++i) {
    const auto p = pattern(kSampleBytes, 7000 + i);
    require(cudaMemcpy(static_cast<char*>(weights) + weights_sample_offset(i), p.data(), kSampleBytes,
                       cudaMemcpyHostToDevice) == cudaSuccess,
            "weights upload");
  }
}

// The value layer `i`'s captured kernel writes in the middle of its KV tensor.
std::uint32_t graph_value(std::size_t i) { return 0xC0DE0000u + static_cast<std::uint32_t>(i); }

struct Graph {
  cudaStream_t stream = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  void* pool = nullptr;
};

// A graph launch and its check: every layer's kernel wrote through the KV address captured in it,
// into whatever backs that address now.
void launch_graph(const Graph& g, const std::vector<void*>& kv, std::uint64_t tensor_bytes, const char* what) {
  bool ok = cudaGraphLaunch(g.exec, g.stream) == cudaSuccess && cudaStreamSynchronize(g.stream) == cudaSuccess;
  for (std::size_t i = 0; ok && i < kv.size(); ++i) {
    std::uint32_t got = 0;
    ok = cudaMemcpy(&got, static_cast<char*>(kv[i]) + tensor_bytes / 2, sizeof got, cudaMemcpyDeviceToHost) ==
             cudaSuccess &&
         got == graph_value(i);
  }
  check(ok, std::string(what) + ": the graph's kernels wrote into every KV tensor");
  if (ok) std::printf("%s: ok\n", what);
}

// Serving begins: the simulator's oracle now ends the process (status 86) if any work touches memory
// still backed by an aliased scratch handle.
void start_serving() {
  check(simcuda_mark_serving() == 0, "simcuda_mark_serving");
  std::printf("serving: oracle armed\n");
}

struct Allocations {
  void* weights = nullptr;
  std::vector<void*> kv;
  std::uint64_t tensor_bytes = 0;  // each KV tensor, a multiple of the 2 MiB granularity
};

// cumem.py sleep(level), then the wake: the freed memory, the kept reservations, the same addresses after
// waking, the KV usable and the weights restored (level 1: from the sleep's host copy; level 2: loaded again
// between the weights' wake and the KV cache's). `kv_on_device`: whether the KV counts in what the sleep must
// free (see --sleep-before-launch in main).
void sleep_and_wake(const Allocations& a, bool kv_on_device, int level) {
  const std::uint64_t kv_total = a.tensor_bytes * a.kv.size();
  const std::uint64_t before = free_bytes();
  const long long released = cumem_stub_sleep(level);
  check(released >= 0, "cumem_stub_sleep returned " + std::to_string(released));
  const std::uint64_t after = free_bytes();
  const std::uint64_t rose = after > before ? after - before : 0;
  std::printf("sleep freed %s (stub released %s; KV %s, weights %s)\n", mib(rose).c_str(),
              mib(released > 0 ? static_cast<std::uint64_t>(released) : 0).c_str(), mib(kv_total).c_str(),
              mib(kWeightsBytes).c_str());
  check(released == static_cast<long long>(kv_total + kWeightsBytes), "the stub released every allocation");
  const std::uint64_t expected = (kv_on_device ? kv_total : 0) + kWeightsBytes;
  check(rose >= expected, "sleep freed " + mib(rose) + ", less than the " + mib(expected) + " expected");
  bool kept = cumem_stub_state(a.weights) == 1;
  for (void* p : a.kv) kept = kept && cumem_stub_state(p) == 1;
  check(kept, "sleep: every VA reservation kept");
  if (kept) std::printf("sleep: VA reservations kept\n");

  if (level == 1) {
    check(cumem_stub_wake(nullptr) == 0, "cumem_stub_wake");
  } else {
    check(cumem_stub_wake("weights") == 0, "cumem_stub_wake(weights)");
    load_weights(a.weights);
    check(cumem_stub_wake("kv_cache") == 0, "cumem_stub_wake(kv_cache)");
  }
  // Mapped again from X to X + S: a mapping starts at X and one ends at X + S (an interposer may back
  // the range with several handles, so the driver may answer for a part of it at either end).
  const auto mapped_at = [&](void* p, std::uint64_t bytes) {
    const auto x = reinterpret_cast<CUdeviceptr>(p);
    CUdeviceptr first = 0, last = 0;
    std::size_t first_size = 0, last_size = 0;
    return cumem_stub_state(p) == 2 && cuMemGetAddressRange(&first, &first_size, x) == CUDA_SUCCESS && first == x &&
           cuMemGetAddressRange(&last, &last_size, x + bytes - 1) == CUDA_SUCCESS && last + last_size == x + bytes;
  };
  bool same = mapped_at(a.weights, kWeightsBytes);
  for (void* p : a.kv) same = same && mapped_at(p, a.tensor_bytes);
  check(same, "wake: every allocation mapped again at its address");
  if (same) std::printf("wake: same addresses\n");
  const bool usable = kv_usable(a.kv, a.tensor_bytes, 2);
  check(usable, "wake: KV usable");
  if (usable) std::printf("wake: KV usable\n");
  const bool restored = weights_match(a.weights);
  check(restored, "wake: weights restored");
  if (restored) std::printf("wake: weights restored\n");
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  require(cudaSetDevice(0) == cudaSuccess && cudaFree(nullptr) == cudaSuccess, "CUDA initialisation");
  // gpu_worker.py init_device: the first snapshot, and the start-up check that the share is free.
  std::uint64_t total = 0;
  const std::uint64_t initial_free = free_bytes(&total);
  require(static_cast<double>(initial_free) >= o.share * static_cast<double>(total),
          "free memory at start-up is less than the requested share");
  const Kernels k = load_kernels();

  // (a) The weights through CuMemAllocator's "weights" pool, written from the host (load_model).
  Allocations a;
  require(cumem_stub_malloc(kWeightsBytes, "weights", &a.weights) == 0, "weights allocation through the stub");
  load_weights(a.weights);
  std::printf("weights: %s through the stub\n", mib(kWeightsBytes).c_str());

  // (b) memory_profiling's "before profile" snapshot (gpu_worker.py determine_available_memory), then the
  // profiling forward (gpu_model_runner.py profile_run): activations from PyTorch's ordinary allocator, not
  // the sleep-mode pools, a few kernels, then freed.
  free_bytes();
  void* act[2] = {};
  for (void*& p : act) {
    require(cudaMalloc(&p, o.activation_bytes) == cudaSuccess, "profiling activations");
    require(torch_zeros(k, p, o.activation_bytes, nullptr), "profiling forward kernels");
  }
  require(kv_step(k, act[0], 0, 1, nullptr) && cudaDeviceSynchronize() == cudaSuccess, "profiling forward");
  for (void* p : act) require(cudaFree(p) == cudaSuccess, "profiling activations freed");
  std::printf("profile: %s of activations\n", mib(2 * o.activation_bytes).c_str());

  // (c) The sizing query right after the profile ("after profile", gpu_worker.py
  // determine_available_memory): KV = share x total - what is in use.
  const std::uint64_t after_profile = free_bytes();
  const double requested = o.share * static_cast<double>(total) - static_cast<double>(total - after_profile);
  require(requested > 0, "no memory left for the KV cache");
  const std::uint64_t per_layer = static_cast<std::uint64_t>(requested) / o.layers / (2 * kMiB) * (2 * kMiB);
  require(per_layer >= 2 * kPatternBytes + kMiB, "KV tensors too small");
  a.tensor_bytes = per_layer;
  // initialize_kv_cache: one tensor per layer in the "kv_cache" pool, torch.zeros.
  for (int i = 0; i < o.layers; ++i) {
    void* p = nullptr;
    require(cumem_stub_malloc(per_layer, "kv_cache", &p) == 0, "KV tensor " + std::to_string(i) + " through the stub");
    require(torch_zeros(k, p, per_layer, nullptr), "KV tensor zeroed");
    a.kv.push_back(p);
  }
  std::printf("kv tensors: %d of %llu bytes\n", o.layers, static_cast<unsigned long long>(per_layer));

  if (o.warm_up_attention) {
    // A compile warm-up with attention (compile_or_warm_up_model's dummy runs): its activations, and a kernel
    // that takes the first KV tensor's address, before autotuning.
    void* warm[2] = {};
    for (void*& p : warm) {
      const cudaError_t e = cudaMalloc(&p, o.activation_bytes);
      if (e == cudaErrorMemoryAllocation) {
        std::printf("out of memory in the warm-up\n");
        return kExitAutotuneOom;
      }
      require(e == cudaSuccess, "warm-up activations");
    }
    require(kv_step(k, a.kv[0], 0, 1, nullptr) && cudaDeviceSynchronize() == cudaSuccess, "warm-up attention");
    for (void* p : warm) require(cudaFree(p) == cudaSuccess, "warm-up activations freed");
    std::printf("warm-up: %s of activations, attention on the KV cache\n", mib(2 * o.activation_bytes).c_str());
  }

  // (d) Post-KV kernel autotuning (compile_or_warm_up_model): a large workspace, briefly.
  void* workspace = nullptr;
  const cudaError_t tuned = cudaMalloc(&workspace, o.autotune_bytes);
  if (tuned == cudaErrorMemoryAllocation) {
    std::printf("out of memory in autotuning\n");
    return kExitAutotuneOom;
  }
  require(tuned == cudaSuccess && kv_step(k, workspace, 0, 1, nullptr) && cudaDeviceSynchronize() == cudaSuccess &&
              cudaFree(workspace) == cudaSuccess,
          "autotuning");
  std::printf("autotuning: %s workspace\n", mib(o.autotune_bytes).c_str());

  // (e) CUDA graph capture on a side stream (torch.cuda.graph: global mode, the graph pool allocated by
  // a relaxed thread), one kernel per layer with its KV tensor's address as a parameter.
  Graph g;
  require(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking) == cudaSuccess, "side stream");
  require(cudaStreamBeginCapture(g.stream, cudaStreamCaptureModeGlobal) == cudaSuccess, "begin capture");
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  require(cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess &&
              cudaMalloc(&g.pool, kGraphPoolBytes) == cudaSuccess &&
              cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess,
          "graph pool allocation");
  for (std::size_t i = 0; i < a.kv.size(); ++i)
    require(kv_step(k, a.kv[i], per_layer / 2, graph_value(i), g.stream), "captured launch");
  require(cudaStreamEndCapture(g.stream, &g.graph) == cudaSuccess && g.graph, "end capture");
  require(cudaGraphInstantiate(&g.exec, g.graph, 0) == cudaSuccess, "instantiate");
  std::printf("graph captured: %zu kernels with KV addresses\n", a.kv.size());

  if (!o.sleep_before_launch) {
    // (f) Serving, then the RL loop's sleep and wake.
    start_serving();
    launch_graph(g, a.kv, per_layer, "graph launch");
    const bool usable = kv_usable(a.kv, per_layer, 1);
    check(usable, "KV usable");
    if (usable) std::printf("KV check: ok\n");
    sleep_and_wake(a, true, o.sleep_level);
    launch_graph(g, a.kv, per_layer, "graph launch after wake");
  } else {
    // verl's order: sleep right after start-up, before any graph launch. Only the weights are sure
    // to be device memory here: an interposer may still hold the KV on a scratch it frees at its commit.
    sleep_and_wake(a, false, o.sleep_level);
    start_serving();
    launch_graph(g, a.kv, per_layer, "graph launch after wake");
    const bool usable = kv_usable(a.kv, per_layer, 3);
    check(usable, "KV usable");
    if (usable) std::printf("KV check: ok\n");
  }

  bool freed = cudaGraphExecDestroy(g.exec) == cudaSuccess && cudaGraphDestroy(g.graph) == cudaSuccess &&
               cudaFree(g.pool) == cudaSuccess && cudaStreamDestroy(g.stream) == cudaSuccess;
  for (void* p : a.kv) freed = cumem_stub_free(p) == 0 && freed;
  freed = cumem_stub_free(a.weights) == 0 && freed;
  check(freed, "free everything");
  if (freed) std::printf("freed everything\n");
  std::printf("vmm_sleep_engine: %d failures\n", failures);
  return failures;
}
