// Measures kvremap's pass-through overhead on the simulated driver and prints ratios from one run.
// The parent runs this program twice as children, without and with LD_PRELOAD=libkvremap.so, on
// the same workloads, and compares: cudaMalloc+cudaFree pairs (1 and N threads) and calls of a
// cuGetProcAddress-obtained driver function (cuLaunchKernel of an empty kernel).
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
};

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Median of `repeats` runs of `body`, in seconds.
template <typename Body>
double median_time(int repeats, Body&& body) {
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    const double start = now_s();
    body();
    times.push_back(now_s() - start);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void pairs(long n) {
  for (long i = 0; i < n; ++i) {
    void* p = nullptr;
    if (cudaMalloc(&p, 256 << 10) != cudaSuccess || cudaFree(p) != cudaSuccess) std::abort();
  }
}

int child(const Config& c) {
  cudaFree(nullptr);
  pairs(100);  // warm up: first-use resolution and trace file creation are not what is measured
  const double pair_s = median_time(c.repeats, [&] { pairs(c.pairs); });

  const double threaded_s = median_time(c.repeats, [&] {
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
  const double launch_s = median_time(c.repeats, [&] {
    for (long i = 0; i < c.launches; ++i)
      if (launch(f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) != CUDA_SUCCESS) std::abort();
  });
  std::printf("%.3f %.3f %.3f\n", pair_s / static_cast<double>(c.pairs) * 1e9,
              static_cast<double>(c.pairs) / threaded_s, launch_s / static_cast<double>(c.launches) * 1e9);
  return 0;
}

struct Result {
  double pair_ns, threaded_pairs_per_s, launch_ns;
};

bool run_child(const char* self, const Config& c, const char* preload, Result& out) {
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
  return n > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
         std::sscanf(buf, "%lf %lf %lf", &out.pair_ns, &out.threaded_pairs_per_s, &out.launch_ns) == 3;
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
  if (argc != 2 && argc != 6) {
    std::fprintf(stderr, "usage: overhead LIBKVREMAP.so [PAIRS LAUNCHES THREADS REPEATS]\n");
    return 2;
  }
  if (argc == 6) {
    c.pairs = std::atol(argv[2]);
    c.launches = std::atol(argv[3]);
    c.threads = std::atoi(argv[4]);
    c.repeats = std::atoi(argv[5]);
  }
  Result plain{}, traced{};
  if (!run_child(argv[0], c, nullptr, plain) || !run_child(argv[0], c, argv[1], traced)) {
    std::fprintf(stderr, "overhead: a measurement run failed\n");
    return 1;
  }
  std::printf("workload (simulated driver)                 without      with kvremap   overhead / ratio\n");
  std::printf("cudaMalloc+cudaFree pair, 1 thread       %9.0f ns   %9.0f ns   %+8.0f ns per pair\n", plain.pair_ns,
              traced.pair_ns, traced.pair_ns - plain.pair_ns);
  std::printf("cuGetProcAddress'd cuLaunchKernel call   %9.0f ns   %9.0f ns   %+8.0f ns per call\n", plain.launch_ns,
              traced.launch_ns, traced.launch_ns - plain.launch_ns);
  std::printf("pairs/s with %2d threads                  %9.0f      %9.0f      %8.2fx throughput\n", c.threads,
              plain.threaded_pairs_per_s, traced.threaded_pairs_per_s,
              traced.threaded_pairs_per_s / plain.threaded_pairs_per_s);
  return 0;
}
