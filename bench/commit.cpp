// The KV commit on the simulated driver: driver calls by kind and wall time to back 64 GiB, per chunk size.
// Usage: bench_commit [GiB]   (default 64). Target (issue 4): at most 3 * S / chunk + O(1) calls.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "interpose/kv/kv_arena.h"
#include "simcuda.h"

using kvremap::interpose::ArenaConfig;
using kvremap::interpose::ArenaDriver;
using kvremap::interpose::KvArena;

namespace {

constexpr unsigned long long kMiB = 1ULL << 20;
constexpr unsigned long long kGiB = 1ULL << 30;

const char* const kCalls[] = {"cuMemCreate", "cuMemMap",      "cuMemSetAccess",
                              "cuMemUnmap",  "cuMemsetD8_v2", "cuMemRelease"};

unsigned long long count(const char* name) { return simcuda_call_count(name); }

}  // namespace

int main(int argc, char** argv) {
  const unsigned long long gib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 64;
  if (gib == 0 || gib > 1024) {
    std::fprintf(stderr, "bench_commit: the size must be 1..1024 GiB\n");
    return 2;
  }
  const unsigned long long kv = gib * kGiB;
  std::printf("commit of %llu GiB of KV (one region), scratch 64 MiB, simulated driver\n", gib);
  std::printf("%10s %8s %8s %8s %8s %8s %8s %8s %10s %10s\n", "chunk", "create", "map", "access", "unmap", "memset",
              "release", "total", "3S/chunk", "wall ms");
  for (unsigned long long chunk : {64 * kMiB, 256 * kMiB, 512 * kMiB, 1 * kGiB, 2 * kGiB}) {
    const std::string settings = "SIMCUDA_DEVICE_MEMORY=" + std::to_string(2 * gib + 8) + "GiB SIMCUDA_CONTEXT_BYTES=0";
    if (simcuda_reset(settings.c_str()) != 0 || cuInit(0) != CUDA_SUCCESS) return 1;
    CUcontext ctx = nullptr;
    if (cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS) return 1;
    ArenaDriver d{cuMemAddressReserve, cuMemAddressFree, cuMemCreate,  cuMemRelease, cuMemMap,
                  cuMemUnmap,          cuMemSetAccess,   cuMemsetD8_v2};
    CUresult error = CUDA_SUCCESS;
    auto arena = KvArena::create(d, ArenaConfig{0, 2 * kv, chunk, 64 * kMiB, 2 * kMiB}, &error);
    CUdeviceptr base = 0;
    if (!arena || arena->allocate(kv, &base) != CUDA_SUCCESS || arena->defer(base) != CUDA_SUCCESS) {
      std::fprintf(stderr, "bench_commit: set-up failed (driver error %d)\n", static_cast<int>(error));
      return 1;
    }
    unsigned long long before[6];
    for (int i = 0; i < 6; ++i) before[i] = count(kCalls[i]);
    const auto start = std::chrono::steady_clock::now();
    if (arena->commit(base, kv) != CUDA_SUCCESS) return 1;
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    unsigned long long calls[6], total = 0;
    for (int i = 0; i < 6; ++i) total += calls[i] = count(kCalls[i]) - before[i];
    std::printf("%7llu MiB %8llu %8llu %8llu %8llu %8llu %8llu %8llu %10llu %10.1f\n", chunk / kMiB, calls[0], calls[1],
                calls[2], calls[3], calls[4], calls[5], total, 3 * kv / chunk, ms);
  }
  return 0;
}
