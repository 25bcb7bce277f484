// Measures kvremap's pass-through overhead on the simulated driver and prints ratios from one run.
// The parent runs this program as children, alternately without and with LD_PRELOAD=libkvremap.so,
// on the same workloads, and compares: cudaMalloc+cudaFree pairs (1 and N threads) and calls of a
// cuGetProcAddress-obtained driver function (cuLaunchKernel of an empty kernel). The single-thread
// pair is measured twice: with the simulated driver's mmap/munmap per pair (the system calls a real
// driver makes, which also evict the hooks' code and data from the caches) and without them.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <link.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

extern "C" __attribute__((visibility("default"))) void simcuda_kernel_empty(void**) {}

namespace {

const char* kPtx = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry empty()\n{\nret;\n}\n";

struct Config {
  long pairs = 20000;
  long launches = 200000;
  int threads = 16;
  int repeats = 5;
  int rounds = 5;  // child runs of each kind, alternated so both see the same machine load
};

constexpr long kBatchPairs = 100;

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Fastest of `repeats` runs of `body`, in seconds: on a shared machine other load only ever adds
// time, so the minimum is the estimate of the code's own cost least disturbed by it.
template <typename Body>
double best_time(int repeats, Body&& body) {
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const double start = now_s();
    body();
    best = std::min(best, now_s() - start);
  }
  return best;
}

void pairs(long n);

// The fastest batch of `batch` pairs among `total` pairs, in seconds per pair. The machine's noise
// comes and goes within milliseconds (the same batch varies from 3.3 to 6 µs per pair); a short
// batch that ran undisturbed measures the code, a long run measures the noise as well.
double fastest_batch_per_pair(long total, long batch) {
  double best = 1e300;
  for (long done = 0; done < total; done += batch) {
    const double start = now_s();
    pairs(batch);
    best = std::min(best, (now_s() - start) / static_cast<double>(batch));
  }
  return best;
}

template <typename Allocate, typename Release>
void pairs_through(long n, Allocate allocate, Release release) {
  for (long i = 0; i < n; ++i) {
    void* p = nullptr;
    if (allocate(&p, 256 << 10) != cudaSuccess || release(p) != cudaSuccess) std::abort();
  }
}

void pairs(long n) { pairs_through(n, cudaMalloc, cudaFree); }

using MallocFn = cudaError_t (*)(void**, size_t);
using FreeFn = cudaError_t (*)(void*);

// The real simulated cudaMalloc and cudaFree, out of LD_PRELOAD's reach: a second copy of the
// runtime (and, through it, of the driver) loaded into a link namespace of its own, where preloaded
// libraries are not loaded. False when it cannot be loaded.
bool load_direct_runtime(MallocFn* direct_malloc, FreeFn* direct_free) {
  void* loaded = dlopen("libcudart.so.13", RTLD_LAZY | RTLD_NOLOAD);
  link_map* map = nullptr;
  if (!loaded || dlinfo(loaded, RTLD_DI_LINKMAP, &map) != 0 || !map) return false;
  void* copy = dlmopen(LM_ID_NEWLM, map->l_name, RTLD_NOW | RTLD_LOCAL);
  if (!copy) return false;
  *direct_malloc = reinterpret_cast<MallocFn>(dlsym(copy, "cudaMalloc"));
  *direct_free = reinterpret_cast<FreeFn>(dlsym(copy, "cudaFree"));
  return *direct_malloc && *direct_free && (*direct_free)(nullptr) == cudaSuccess;
}

double batch_per_pair_ns(MallocFn allocate, FreeFn release) {
  const double start = now_s();
  pairs_through(kBatchPairs, allocate, release);
  return (now_s() - start) / static_cast<double>(kBatchPairs) * 1e9;
}

// The median over `rounds` of: a 100-pair batch through the process's cudaMalloc/cudaFree (kvremap's
// hooks when preloaded) minus one through the direct copy, run back to back in alternating order.
// Both batches of a round see the same moment of the machine's noise, which comes and goes over
// seconds and dominates comparisons between processes. Without kvremap it compares two copies of
// the simulator: the control, near 0. NaN when the copy cannot be loaded.
double paired_overhead_ns(long rounds) {
  MallocFn direct_malloc = nullptr;
  FreeFn direct_free = nullptr;
  if (!load_direct_runtime(&direct_malloc, &direct_free)) return std::nan("");
  std::vector<double> diffs;
  for (long r = 0; r < rounds; ++r) {
    double hooked = 0, direct = 0;
    if (r % 2 == 0) {
      hooked = batch_per_pair_ns(cudaMalloc, cudaFree);
      direct = batch_per_pair_ns(direct_malloc, direct_free);
    } else {
      direct = batch_per_pair_ns(direct_malloc, direct_free);
      hooked = batch_per_pair_ns(cudaMalloc, cudaFree);
    }
    diffs.push_back(hooked - direct);
  }
  std::nth_element(diffs.begin(), diffs.begin() + static_cast<long>(diffs.size() / 2), diffs.end());
  return diffs[diffs.size() / 2];
}

int child(const Config& c) {
  cudaFree(nullptr);
  pairs(100);  // warm up: first-use resolution and trace file creation are not what is measured
  const double pair_s = fastest_batch_per_pair(c.pairs * c.repeats, kBatchPairs) * static_cast<double>(c.pairs);
  // Only when the parent asks (children with the driver's system calls): bench/instructions.sh runs
  // this child alone and counts its instructions per pair of the loop above.
  const char* paired_wanted = std::getenv("OVERHEAD_BENCH_PAIRED");
  const double paired_ns = paired_wanted && std::strcmp(paired_wanted, "1") == 0
                               ? paired_overhead_ns(std::max(1L, c.pairs * c.repeats / (2 * kBatchPairs)))
                               : std::nan("");

  const double threaded_s = best_time(c.repeats, [&] {
    std::vector<std::thread> workers;
    for (int t = 0; t < c.threads; ++t)
      workers.emplace_back([&] {
        cudaSetDevice(0);
        pairs(c.pairs / c.threads);
      });
    for (auto& w : workers) w.join();
  });

  using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                CUstream, void**, void**);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  cudaLibrary_t library = nullptr;
  cudaKernel_t kernel = nullptr;
  if (cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fn, 12000, cudaEnableDefault, &status) != cudaSuccess ||
      cudaLibraryLoadData(&library, kPtx, nullptr, nullptr, 0, nullptr, nullptr, 0) != cudaSuccess ||
      cudaLibraryGetKernel(&kernel, library, "empty") != cudaSuccess)
    return 1;
  auto launch = reinterpret_cast<LaunchFn>(fn);
  auto f = reinterpret_cast<CUfunction>(kernel);
  const double launch_s = best_time(c.repeats, [&] {
    for (long i = 0; i < c.launches; ++i)
      if (launch(f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) != CUDA_SUCCESS) std::abort();
  });
  std::printf("%.3f %.3f %.3f %.3f\n", pair_s / static_cast<double>(c.pairs) * 1e9,
              static_cast<double>(c.pairs) / threaded_s, launch_s / static_cast<double>(c.launches) * 1e9, paired_ns);
  return 0;
}

struct Result {
  double pair_ns, threaded_pairs_per_s, launch_ns;
  double paired_ns;  // in-process hooked − direct median; NaN for children without system calls
};

// Where the traced children write their traces: a scratch directory emptied after every child (a
// run writes gigabytes of allocation events), unless the caller chose KVREMAP_TRACE_DIR to keep them.
struct TraceScratch {
  std::filesystem::path dir;
  bool owned = false;
  TraceScratch() {
    if (const char* chosen = std::getenv("KVREMAP_TRACE_DIR")) {
      dir = chosen;
      return;
    }
    std::string pattern = (std::filesystem::temp_directory_path() / "kvremap-bench-XXXXXX").string();
    if (mkdtemp(pattern.data())) {
      dir = pattern;
      owned = true;
      setenv("KVREMAP_TRACE_DIR", pattern.c_str(), 1);
    }
  }
  void empty() const {
    std::error_code ec;
    if (owned)
      for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) std::filesystem::remove(entry.path(), ec);
  }
  ~TraceScratch() {
    std::error_code ec;
    if (owned) std::filesystem::remove_all(dir, ec);
  }
};

// `backed`: the simulated driver maps host memory behind each allocation (an mmap and a munmap per
// pair, like the system calls of a real driver) or hands out bare addresses (SIMCUDA_HOST_BACKING=0),
// so the pair is the hooks' and the simulator's own work with warm caches.
bool run_child(const char* self, const Config& c, const char* preload, bool backed, Result& out) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    if (preload) {
      setenv("LD_PRELOAD", preload, 1);
    } else {
      unsetenv("LD_PRELOAD");
    }
    setenv("OVERHEAD_BENCH_CHILD", "1", 1);
    setenv("SIMCUDA_HOST_BACKING", backed ? "1" : "0", 1);
    setenv("OVERHEAD_BENCH_PAIRED", backed ? "1" : "0", 1);
    const std::string args[] = {std::to_string(c.pairs), std::to_string(c.launches), std::to_string(c.threads),
                                std::to_string(c.repeats)};
    execl(self, self, args[0].c_str(), args[1].c_str(), args[2].c_str(), args[3].c_str(), nullptr);
    _exit(127);
  }
  close(fds[1]);
  char buf[256] = {};
  const ssize_t n = read(fds[0], buf, sizeof buf - 1);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return false;
  return std::sscanf(buf, "%lf %lf %lf %lf", &out.pair_ns, &out.threaded_pairs_per_s, &out.launch_ns, &out.paired_ns) ==
         4;
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  if (argc >= 5) {
    c.pairs = std::atol(argv[1]);
    c.launches = std::atol(argv[2]);
    c.threads = std::atoi(argv[3]);
    c.repeats = std::atoi(argv[4]);
  }
  if (std::getenv("OVERHEAD_BENCH_CHILD")) return child(c);
  if (argc != 2 && argc != 6 && argc != 7) {
    std::fprintf(stderr, "usage: overhead LIBKVREMAP.so [PAIRS LAUNCHES THREADS REPEATS [ROUNDS]]\n");
    return 2;
  }
  if (argc >= 6) {
    c.pairs = std::atol(argv[2]);
    c.launches = std::atol(argv[3]);
    c.threads = std::atoi(argv[4]);
    c.repeats = std::atoi(argv[5]);
    if (argc == 7) c.rounds = std::atoi(argv[6]);
  }
  if (c.pairs < c.threads || c.launches < 1 || c.threads < 1 || c.repeats < 1 || c.rounds < 1) {
    std::fprintf(stderr, "overhead: PAIRS >= THREADS >= 1 and LAUNCHES, REPEATS, ROUNDS >= 1 are required\n");
    return 2;
  }
  // Alternating rounds: without, with, without, with, ... Each figure is the best over all rounds
  // (load only slows a run down), and the spread of the per-round differences is printed as well.
  const TraceScratch traces;
  Result best_plain{1e300, 0, 1e300, 0}, best_traced{1e300, 0, 1e300, 0};
  double best_warm_plain = 1e300, best_warm_traced = 1e300;
  std::vector<double> pair_diffs, launch_diffs, ratios, warm_diffs, paired, paired_control;
  for (int round = 0; round < c.rounds; ++round) {
    Result plain{}, traced{}, warm_plain{}, warm_traced{};
    const bool ran = run_child(argv[0], c, nullptr, true, plain) && run_child(argv[0], c, argv[1], true, traced) &&
                     run_child(argv[0], c, nullptr, false, warm_plain) &&
                     run_child(argv[0], c, argv[1], false, warm_traced);
    traces.empty();
    if (!ran) {
      std::fprintf(stderr, "overhead: a measurement run failed\n");
      return 1;
    }
    best_plain.pair_ns = std::min(best_plain.pair_ns, plain.pair_ns);
    best_plain.launch_ns = std::min(best_plain.launch_ns, plain.launch_ns);
    best_plain.threaded_pairs_per_s = std::max(best_plain.threaded_pairs_per_s, plain.threaded_pairs_per_s);
    best_traced.pair_ns = std::min(best_traced.pair_ns, traced.pair_ns);
    best_traced.launch_ns = std::min(best_traced.launch_ns, traced.launch_ns);
    best_traced.threaded_pairs_per_s = std::max(best_traced.threaded_pairs_per_s, traced.threaded_pairs_per_s);
    pair_diffs.push_back(traced.pair_ns - plain.pair_ns);
    best_warm_plain = std::min(best_warm_plain, warm_plain.pair_ns);
    best_warm_traced = std::min(best_warm_traced, warm_traced.pair_ns);
    warm_diffs.push_back(warm_traced.pair_ns - warm_plain.pair_ns);
    if (!std::isnan(traced.paired_ns)) paired.push_back(traced.paired_ns);
    if (!std::isnan(plain.paired_ns)) paired_control.push_back(plain.paired_ns);
    launch_diffs.push_back(traced.launch_ns - plain.launch_ns);
    ratios.push_back(traced.threaded_pairs_per_s / plain.threaded_pairs_per_s);
  }
  // The quartiles of the per-round figures: how much the machine's own noise moves one round.
  const auto quartile = [](std::vector<double> v, int q) {
    std::sort(v.begin(), v.end());
    return v[(v.size() - 1) * static_cast<std::size_t>(q) / 4];
  };
  // And their mean with its 95% confidence interval (normal approximation over the rounds).
  const auto mean_ci = [](const std::vector<double>& v) {
    double sum = 0, squares = 0;
    for (double x : v) sum += x;
    const double mean = sum / static_cast<double>(v.size());
    for (double x : v) squares += (x - mean) * (x - mean);
    const double sd = v.size() > 1 ? std::sqrt(squares / static_cast<double>(v.size() - 1)) : 0;
    return std::pair<double, double>{mean, 1.96 * sd / std::sqrt(static_cast<double>(v.size()))};
  };
  std::printf("%d alternating rounds; best of all rounds, then the per-round figures' median [quartiles]\n", c.rounds);
  std::printf("workload (simulated driver)                 without      with kvremap   overhead / ratio\n");
  std::printf(
      "cudaMalloc+cudaFree pair, 1 thread       %9.0f ns   %9.0f ns   %+8.0f ns per pair  (%+.0f [%+.0f, %+.0f])\n",
      best_plain.pair_ns, best_traced.pair_ns, best_traced.pair_ns - best_plain.pair_ns, quartile(pair_diffs, 2),
      quartile(pair_diffs, 1), quartile(pair_diffs, 3));
  std::printf(
      "the same pair, driver without syscalls   %9.0f ns   %9.0f ns   %+8.0f ns per pair  (%+.0f [%+.0f, %+.0f])\n",
      best_warm_plain, best_warm_traced, best_warm_traced - best_warm_plain, quartile(warm_diffs, 2),
      quartile(warm_diffs, 1), quartile(warm_diffs, 3));
  if (!paired.empty() && !paired_control.empty()) {
    std::printf(
        "the same pair in one process, hooked vs direct                  %+8.0f ns per pair  (%+.0f [%+.0f, %+.0f])\n",
        *std::min_element(paired.begin(), paired.end()), quartile(paired, 2), quartile(paired, 1), quartile(paired, 3));
  } else {
    std::printf("the same pair in one process: the direct copy of the runtime could not be loaded\n");
  }
  std::printf(
      "cuGetProcAddress'd cuLaunchKernel call   %9.0f ns   %9.0f ns   %+8.0f ns per call  (%+.0f [%+.0f, %+.0f])\n",
      best_plain.launch_ns, best_traced.launch_ns, best_traced.launch_ns - best_plain.launch_ns,
      quartile(launch_diffs, 2), quartile(launch_diffs, 1), quartile(launch_diffs, 3));
  std::printf(
      "pairs/s with %2d threads                  %9.0f      %9.0f      %8.2fx throughput  (%.2fx [%.2fx, %.2fx])\n",
      c.threads, best_plain.threaded_pairs_per_s, best_traced.threaded_pairs_per_s,
      best_traced.threaded_pairs_per_s / best_plain.threaded_pairs_per_s, quartile(ratios, 2), quartile(ratios, 1),
      quartile(ratios, 3));
  const auto [pair_mean, pair_ci] = mean_ci(pair_diffs);
  const auto [launch_mean, launch_ci] = mean_ci(launch_diffs);
  const auto [ratio_mean, ratio_ci] = mean_ci(ratios);
  const auto [warm_mean, warm_ci] = mean_ci(warm_diffs);
  if (!paired.empty() && !paired_control.empty()) {
    const auto [paired_mean, paired_ci] = mean_ci(paired);
    const auto [control_mean, control_ci] = mean_ci(paired_control);
    std::printf(
        "in one process, 95%% confidence: hooked vs direct %+.1f ± %.1f ns per pair; control (no kvremap) %+.1f ± "
        "%.1f\n",
        paired_mean, paired_ci, control_mean, control_ci);
  }
  std::printf(
      "mean of the rounds, 95%% confidence: pair %+.0f ± %.0f ns (without syscalls %+.0f ± %.0f), call %+.1f ± %.1f "
      "ns, "
      "%d threads %.3fx ± %.3f\n",
      pair_mean, pair_ci, warm_mean, warm_ci, launch_mean, launch_ci, c.threads, ratio_mean, ratio_ci);
  return 0;
}
