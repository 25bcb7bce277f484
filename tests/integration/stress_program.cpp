// A stress and soak program: many threads allocating, freeing, capturing and launching with a fork and an exec in
// the middle, and long runs of allocation pairs; it prints its own accounting so tests can hold the trace to it.
// Usage: stress_program threads THREADS ROUNDS   every thread on its own stream; one forks midway, its child execs
//        stress_program child ROUNDS             the exec'd image: a small single-threaded run
//        stress_program pairs COUNT              back-to-back cudaMalloc/cudaFree pairs, RSS at every tenth
// With STRESS_TAG_KV=1, `threads` first allocates two KV tensors inside kvremap_tag_push("kv") (looked up with
// dlsym, so the program runs without the library too) and checks after the run that a launch wrote into them.
// Every process prints one line, "account image=I pid=P held_bytes=B allocations=A frees=F failures=X": device
// memory it still holds at exit and its successful allocation and free calls. Nothing else printed depends on
// timing or pids, so the output is the same with and without LD_PRELOAD=libkvremap.so (pids aside).
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

extern "C" __attribute__((visibility("default"))) void simcuda_kernel_touch(void** params) {
  auto* p = *static_cast<unsigned char**>(params[0]);
  p[0] = 1;
}

namespace {

constexpr std::size_t kKiB = 1 << 10;
constexpr std::size_t kMiB = 1 << 20;

// No simcuda-module-bytes comment: the module holds SIMCUDA_MODULE_BYTES, which the tests set to 0 so that
// everything live at exit is memory the program itself allocated.
const char* kPtx = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry touch(.param .u64 p)\n{\nret;\n}\n";

// This process's accounting. A forked child starts its own (its driver forgot the parent's memory).
struct Account {
  std::atomic<std::int64_t> held_bytes{0};
  std::atomic<std::uint64_t> allocations{0};
  std::atomic<std::uint64_t> frees{0};
  std::atomic<std::uint64_t> failures{0};
  void reset() {
    held_bytes = 0;
    allocations = 0;
    frees = 0;
    failures = 0;
  }
};
Account g_account;
const char* g_self = nullptr;

bool ok(bool succeeded) {
  if (!succeeded) ++g_account.failures;
  return succeeded;
}

void allocated(std::size_t bytes) {
  ++g_account.allocations;
  g_account.held_bytes += static_cast<std::int64_t>(bytes);
}
void freed(std::size_t bytes) {
  ++g_account.frees;
  g_account.held_bytes -= static_cast<std::int64_t>(bytes);
}

void print_account(const char* image) {
  std::printf("account image=%s pid=%d held_bytes=%lld allocations=%llu frees=%llu failures=%llu\n", image,
              static_cast<int>(getpid()), static_cast<long long>(g_account.held_bytes.load()),
              static_cast<unsigned long long>(g_account.allocations.load()),
              static_cast<unsigned long long>(g_account.frees.load()),
              static_cast<unsigned long long>(g_account.failures.load()));
  std::fflush(stdout);
}

// The allocation calls, each counted only when it succeeded.
void* runtime_alloc(std::size_t bytes) {
  void* p = nullptr;
  if (!ok(cudaMalloc(&p, bytes) == cudaSuccess)) return nullptr;
  allocated(bytes);
  return p;
}
void runtime_free(void* p, std::size_t bytes) {
  if (ok(cudaFree(p) == cudaSuccess)) freed(bytes);
}
void driver_pair(std::size_t bytes) {
  CUdeviceptr d = 0;
  if (!ok(cuMemAlloc_v2(&d, bytes) == CUDA_SUCCESS)) return;
  allocated(bytes);
  if (ok(cuMemFree_v2(d) == CUDA_SUCCESS)) freed(bytes);
}
// Stream-ordered: `hold` keeps the allocation until exit.
void async_alloc(cudaStream_t stream, std::size_t bytes, bool hold) {
  void* p = nullptr;
  if (!ok(cudaMallocAsync(&p, bytes, stream) == cudaSuccess)) return;
  allocated(bytes);
  if (!hold && ok(cudaFreeAsync(p, stream) == cudaSuccess)) freed(bytes);
}

cudaKernel_t load_touch_kernel() {
  cudaLibrary_t library = nullptr;
  cudaKernel_t kernel = nullptr;
  ok(cudaLibraryLoadData(&library, kPtx, nullptr, nullptr, 0, nullptr, nullptr, 0) == cudaSuccess &&
     cudaLibraryGetKernel(&kernel, library, "touch") == cudaSuccess);
  return kernel;
}

void launch_touch(cudaKernel_t kernel, void* target, cudaStream_t stream) {
  void* args[] = {&target};
  ok(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(1), dim3(1), args, 0, stream) == cudaSuccess);
}

// A capture as PyTorch makes one: a launch and an allocation inside the window (relaxed thread mode),
// then instantiate, replay, and tear down; the allocation made during the window is freed afterwards.
void capture_and_replay(cudaStream_t stream, cudaKernel_t kernel, void* target, std::size_t inside_bytes) {
  if (!ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess)) return;
  cudaStreamCaptureMode relaxed = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&relaxed);
  void* inside = runtime_alloc(inside_bytes);
  cudaThreadExchangeStreamCaptureMode(&relaxed);
  launch_touch(kernel, target, stream);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (ok(cudaStreamEndCapture(stream, &graph) == cudaSuccess) && ok(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess)) {
    ok(cudaGraphLaunch(exec, stream) == cudaSuccess && cudaStreamSynchronize(stream) == cudaSuccess);
    ok(cudaGraphExecDestroy(exec) == cudaSuccess);
  }
  if (graph) ok(cudaGraphDestroy(graph) == cudaSuccess);
  if (inside) runtime_free(inside, inside_bytes);
}

// One round of a worker's mix: sizes vary with thread and round; every 32nd allocation is kept until exit.
void round_of_work(int thread, int round, cudaStream_t stream, cudaKernel_t kernel, void* target) {
  const std::size_t bytes = (1 + (thread * 7 + round * 13) % 16) * 64 * kKiB;
  void* p = runtime_alloc(bytes);
  if (p && round % 32 != 0) runtime_free(p, bytes);
  if (round % 4 == 1) driver_pair(bytes / 2);
  if (round % 4 == 2) async_alloc(stream, bytes, round % 64 == 2);
  if (round % 3 == 0) launch_touch(kernel, target, stream);
  if (round % 10 == 5) capture_and_replay(stream, kernel, target, 128 * kKiB);
}

// The exec'd image: its own small run on one thread, its own trace.
int exec_child(int rounds) {
  cudaStream_t stream = nullptr;
  ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  const cudaKernel_t kernel = load_touch_kernel();
  void* target = runtime_alloc(64 * kKiB);
  for (int i = 0; i < rounds; ++i) round_of_work(1000, i, stream, kernel, target);
  ok(cudaStreamSynchronize(stream) == cudaSuccess);
  print_account("exec");
  return g_account.failures == 0 ? 0 : 1;
}

// In the forked child, on the forking thread alone: a few allocations of its own (three kept), then exec.
// A CUDA context does not survive fork (the runtime says cudaErrorInitializationError), so the child
// sets up the driver's primary context itself, after which both APIs work.
[[noreturn]] void forked_child(int child_rounds) {
  g_account.reset();
  CUdevice device = 0;
  CUcontext context = nullptr;
  ok(cuInit(0) == CUDA_SUCCESS && cuDeviceGet(&device, 0) == CUDA_SUCCESS &&
     cuDevicePrimaryCtxRetain(&context, device) == CUDA_SUCCESS && cuCtxSetCurrent(context) == CUDA_SUCCESS);
  for (std::size_t i = 0; i < 5; ++i) {
    void* p = runtime_alloc((i + 1) * kMiB);
    if (p && i % 2 == 1) runtime_free(p, (i + 1) * kMiB);
  }
  driver_pair(kMiB);
  print_account("forked");
  if (g_account.failures != 0) _exit(1);
  std::string rounds = std::to_string(child_rounds);
  char child[] = "child";
  char* const argv[] = {const_cast<char*>(g_self), child, rounds.data(), nullptr};
  execv(g_self, argv);
  std::perror("exec stress_program");
  _exit(1);
}

// Forks once the other threads have all reached the middle; they keep working meanwhile.
bool fork_and_exec_child(int child_rounds) {
  std::fflush(stdout);  // nothing of the parent's buffered output may be written twice
  const pid_t child = fork();
  if (child == 0) forked_child(child_rounds);
  int status = 0;
  return child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int threads(int count, int rounds) {
  using Tag = int (*)(const char*);
  using Call = int (*)();
  const bool tag_kv = std::getenv("STRESS_TAG_KV") != nullptr;
  auto push = reinterpret_cast<Tag>(dlsym(RTLD_DEFAULT, "kvremap_tag_push"));
  auto pop = reinterpret_cast<Call>(dlsym(RTLD_DEFAULT, "kvremap_tag_pop"));
  void* warm = runtime_alloc(kMiB);  // before the KV burst, as an engine's weights are
  unsigned char* kv[2] = {};
  if (tag_kv) {
    if (push) push("kv");
    for (auto& t : kv) t = static_cast<unsigned char*>(runtime_alloc(32 * kMiB));
    if (pop) pop();
  }
  const cudaKernel_t kernel = load_touch_kernel();
  std::printf("stress: %d threads x %d rounds%s\n", count, rounds, tag_kv ? ", tagged KV" : "");
  std::atomic<int> at_middle{0};
  std::atomic<bool> child_ok{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < count; ++t)
    workers.emplace_back([&, t] {
      ok(cudaSetDevice(0) == cudaSuccess);
      cudaStream_t stream = nullptr;
      ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
      void* target = runtime_alloc(64 * kKiB);  // the launches' target, held until exit
      for (int i = 0; i < rounds; ++i) {
        if (i == rounds / 2) {
          ++at_middle;
          if (t == 0) {
            while (at_middle.load() < count) std::this_thread::yield();
            child_ok = fork_and_exec_child(rounds / 4);
          }
        }
        round_of_work(t, i, stream, kernel, target);
      }
      ok(cudaStreamSynchronize(stream) == cudaSuccess);
    });
  for (auto& w : workers) w.join();
  std::printf("forked child and its exec: %s\n", child_ok ? "ok" : "FAILED");
  if (tag_kv && kv[1]) {
    // The workers' launches committed the KV cache; a launch into it must land there.
    cudaStream_t s = nullptr;
    unsigned char back = 0;
    ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    launch_touch(kernel, kv[1], s);
    ok(cudaStreamSynchronize(s) == cudaSuccess && cudaMemcpy(&back, kv[1], 1, cudaMemcpyDeviceToHost) == cudaSuccess);
    std::printf("launch into the KV cache: %s\n", back == 1 ? "ok" : "FAILED");
    if (back != 1) ++g_account.failures;
  }
  (void)warm;
  std::printf("stress: %s\n", g_account.failures == 0 ? "every call succeeded" : "FAILED");
  print_account("threads");
  return g_account.failures == 0 && child_ok ? 0 : 1;
}

// VmRSS and VmHWM in KiB, from /proc/self/status.
std::pair<long, long> resident_kib() {
  std::ifstream status("/proc/self/status");
  long rss = -1, hwm = -1;
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) rss = std::stol(line.substr(6));
    if (line.rfind("VmHWM:", 0) == 0) hwm = std::stol(line.substr(6));
  }
  return {rss, hwm};
}

// Back-to-back pairs on one thread in four sizes; at every tenth of the run, the resident memory so far.
int pairs(long count) {
  const std::size_t sizes[] = {64 * kKiB, 256 * kKiB, kMiB, 4 * kMiB};
  const long step = count >= 10 ? count / 10 : 1;
  for (long i = 1; i <= count; ++i) {
    const std::size_t bytes = sizes[i % 4];
    if (void* p = runtime_alloc(bytes)) runtime_free(p, bytes);
    if (i % step == 0) {
      const auto [rss, hwm] = resident_kib();
      std::printf("checkpoint pairs=%ld rss_kib=%ld hwm_kib=%ld\n", i, rss, hwm);
    }
  }
  print_account("pairs");
  return g_account.failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  g_self = argv[0];
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "threads" && argc == 4) return threads(std::atoi(argv[2]), std::atoi(argv[3]));
  if (mode == "child" && argc == 3) return exec_child(std::atoi(argv[2]));
  if (mode == "pairs" && argc == 3) return pairs(std::atol(argv[2]));
  std::fprintf(stderr, "usage: stress_program threads THREADS ROUNDS | child ROUNDS | pairs COUNT\n");
  return 2;
}
