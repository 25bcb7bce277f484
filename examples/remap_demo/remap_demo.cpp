// remap_demo: swaps the physical backing under a VMM address between graph replays, using only public CUDA APIs.
//
// This is the mechanism kvremap relies on (DESIGN.md §2 step 3/5): a CUDA graph captures device
// addresses, so re-backing a reserved range at the SAME address must keep the graph valid and make
// its replay write into the new memory. The same source runs on the simulated driver (tests/simcuda)
// and on a real GPU, where its timings feed docs/gpu-results.md.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "demo_kernels_ptx.h"
#include "demo_pattern.h"

namespace {

constexpr std::size_t kDefaultGranules = 4;
constexpr std::size_t kMaxGranules = 1u << 16;
constexpr unsigned int kBlockSize = 256;
constexpr unsigned int kEntryPointVersion = 12000;  // the ABI generation the PFN_*_v10020 typedefs match
constexpr std::uint32_t kSeed = 0x9e3779b9u;
constexpr std::uint32_t kAddend = 0x01010101u;
// Added to handle A after the first check, so A's contents differ from anything the graph writes:
// finding them intact at the end proves the post-remap replay did not touch A.
constexpr std::uint32_t kMarkA = 0x5a000000u;
constexpr std::size_t kLatencyRepetitions = 5;
constexpr std::size_t kLargeHandleBytes = std::size_t{1} << 30;

// Driver functions are resolved through the runtime rather than linked, exactly as an engine (and
// kvremap's interposer) sees them: the demo must not depend on libcuda being on the link line.
struct Driver {
  PFN_cuMemAddressReserve_v10020 cuMemAddressReserve = nullptr;
  PFN_cuMemAddressFree_v10020 cuMemAddressFree = nullptr;
  PFN_cuMemCreate_v10020 cuMemCreate = nullptr;
  PFN_cuMemRelease_v10020 cuMemRelease = nullptr;
  PFN_cuMemMap_v10020 cuMemMap = nullptr;
  PFN_cuMemUnmap_v10020 cuMemUnmap = nullptr;
  PFN_cuMemSetAccess_v10020 cuMemSetAccess = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 cuMemGetAllocationGranularity = nullptr;
  PFN_cuGetErrorName_v6000 cuGetErrorName = nullptr;  // optional: only improves error messages
};

// Global so the CUresult check can name errors without threading the table through every call.
Driver g_driver;

// "drv.cuMemMap(ptr, size, 0, h, 0)" -> "cuMemMap": the message names the API, not the expression.
std::string call_name(std::string_view expression) {
  expression = expression.substr(0, expression.find('('));
  if (const auto dot = expression.rfind('.'); dot != std::string_view::npos) expression.remove_prefix(dot + 1);
  return std::string(expression);
}

void check_cuda(cudaError_t error, const char* expression) {
  if (error == cudaSuccess) return;
  std::fprintf(stderr, "remap_demo: %s failed: %s\n", call_name(expression).c_str(), cudaGetErrorName(error));
  std::exit(1);
}

void check_cu(CUresult result, const char* expression) {
  if (result == CUDA_SUCCESS) return;
  const char* name = nullptr;
  if (g_driver.cuGetErrorName == nullptr || g_driver.cuGetErrorName(result, &name) != CUDA_SUCCESS) name = nullptr;
  std::fprintf(stderr, "remap_demo: %s failed: %s (CUresult %d)\n", call_name(expression).c_str(),
               name != nullptr ? name : "unknown", static_cast<int>(result));
  std::exit(1);
}

#define CHECK_CUDA(call) check_cuda((call), #call)
#define CHECK_CU(call) check_cu((call), #call)

void step_ok(const char* what) { std::printf("remap_demo: step %s ok\n", what); }

void* as_pointer(CUdeviceptr address) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)); }

std::string format_bytes(std::size_t bytes) {
  char text[32];
  if (bytes >= (std::size_t{1} << 30) && bytes % (std::size_t{1} << 30) == 0)
    std::snprintf(text, sizeof text, "%zu GiB", bytes >> 30);
  else if (bytes >= (std::size_t{1} << 20) && bytes % (std::size_t{1} << 20) == 0)
    std::snprintf(text, sizeof text, "%zu MiB", bytes >> 20);
  else if (bytes >= (std::size_t{1} << 10) && bytes % (std::size_t{1} << 10) == 0)
    std::snprintf(text, sizeof text, "%zu KiB", bytes >> 10);
  else
    std::snprintf(text, sizeof text, "%zu B", bytes);
  return text;
}

template <typename Fn>
bool resolve_entry_point(const char* symbol, Fn& function, bool required) {
  void* raw = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSuccess;
  const cudaError_t error =
      cudaGetDriverEntryPointByVersion(symbol, &raw, kEntryPointVersion, cudaEnableDefault, &status);
  if (error == cudaSuccess && status == cudaDriverEntryPointSuccess && raw != nullptr) {
    function = reinterpret_cast<Fn>(raw);
    return true;
  }
  if (!required) {
    // A failed lookup sets the runtime's last error; an optional symbol must not fail the final
    // cudaGetLastError check, so consume it here.
    (void)cudaGetLastError();
    return false;
  }
  if (error != cudaSuccess)
    std::fprintf(stderr, "remap_demo: cudaGetDriverEntryPointByVersion(%s) failed: %s\n", symbol,
                 cudaGetErrorName(error));
  else
    std::fprintf(stderr, "remap_demo: cudaGetDriverEntryPointByVersion(%s) failed: driver status %d\n", symbol,
                 static_cast<int>(status));
  std::exit(1);
}

void resolve_driver() {
  resolve_entry_point("cuMemAddressReserve", g_driver.cuMemAddressReserve, true);
  resolve_entry_point("cuMemAddressFree", g_driver.cuMemAddressFree, true);
  resolve_entry_point("cuMemCreate", g_driver.cuMemCreate, true);
  resolve_entry_point("cuMemRelease", g_driver.cuMemRelease, true);
  resolve_entry_point("cuMemMap", g_driver.cuMemMap, true);
  resolve_entry_point("cuMemUnmap", g_driver.cuMemUnmap, true);
  resolve_entry_point("cuMemSetAccess", g_driver.cuMemSetAccess, true);
  resolve_entry_point("cuMemGetAllocationGranularity", g_driver.cuMemGetAllocationGranularity, true);
  resolve_entry_point("cuGetErrorName", g_driver.cuGetErrorName, false);
}

CUmemAllocationProp device_pinned_prop(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
  return prop;
}

CUmemAccessDesc read_write_access(int device) {
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return access;
}

// Whole-handle map at offset 0 plus access: the only mapping shape VMM supports (DESIGN.md §2).
void map_read_write(CUdeviceptr address, std::size_t bytes, CUmemGenericAllocationHandle handle, int device) {
  const CUmemAccessDesc access = read_write_access(device);
  CHECK_CU(g_driver.cuMemMap(address, bytes, 0, handle, 0));
  CHECK_CU(g_driver.cuMemSetAccess(address, bytes, &access, 1));
}

void copy_to_host(std::vector<std::uint32_t>& host, CUdeviceptr address) {
  CHECK_CUDA(cudaMemcpy(host.data(), as_pointer(address), host.size() * sizeof(std::uint32_t), cudaMemcpyDeviceToHost));
}

template <typename Expected>
void verify(const char* what, const std::vector<std::uint32_t>& got, Expected expected) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    const std::uint32_t want = expected(static_cast<std::uint32_t>(i));
    if (got[i] != want) {
      std::fprintf(stderr, "remap_demo: %s: mismatch at index %zu: expected 0x%08x, got 0x%08x\n", what, i, want,
                   got[i]);
      std::exit(1);
    }
  }
}

std::uint32_t graph_result(std::uint32_t i) {
  return remap_demo::added_value(remap_demo::pattern_value(i, kSeed), kAddend);
}

std::uint32_t marked_result(std::uint32_t i) { return remap_demo::added_value(graph_result(i), kMarkA); }

void launch(cudaKernel_t kernel, CUdeviceptr dst, std::uint32_t n, std::uint32_t value, cudaStream_t stream) {
  // cudaLaunchKernel copies the argument values at launch (and capture records them), so pointers
  // to these locals are enough.
  void* dst_arg = as_pointer(dst);
  void* args[] = {&dst_arg, &n, &value};
  const dim3 grid((n + kBlockSize - 1) / kBlockSize);
  const dim3 block(kBlockSize);
  CHECK_CUDA(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), grid, block, args, 0, stream));
}

struct LatencyRow {
  const char* call;
  std::size_t bytes;
  std::vector<double> micros;
};

template <typename F>
double time_micros(F&& body) {
  const auto start = std::chrono::steady_clock::now();
  body();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

// One full VMM life cycle per repetition on a fresh range, so every sample is a cold call of that
// size, as kvremap's commit would make it.
std::vector<LatencyRow> measure_vmm_latency(std::size_t bytes, int device) {
  std::vector<LatencyRow> rows = {{"cuMemCreate", bytes, {}},
                                  {"cuMemMap", bytes, {}},
                                  {"cuMemSetAccess", bytes, {}},
                                  {"cuMemUnmap", bytes, {}},
                                  {"cuMemRelease", bytes, {}}};
  const CUmemAllocationProp prop = device_pinned_prop(device);
  const CUmemAccessDesc access = read_write_access(device);
  for (std::size_t rep = 0; rep < kLatencyRepetitions; ++rep) {
    CUdeviceptr address = 0;
    CUmemGenericAllocationHandle handle = 0;
    CHECK_CU(g_driver.cuMemAddressReserve(&address, bytes, 0, 0, 0));
    rows[0].micros.push_back(time_micros([&] { CHECK_CU(g_driver.cuMemCreate(&handle, bytes, &prop, 0)); }));
    rows[1].micros.push_back(time_micros([&] { CHECK_CU(g_driver.cuMemMap(address, bytes, 0, handle, 0)); }));
    rows[2].micros.push_back(time_micros([&] { CHECK_CU(g_driver.cuMemSetAccess(address, bytes, &access, 1)); }));
    rows[3].micros.push_back(time_micros([&] { CHECK_CU(g_driver.cuMemUnmap(address, bytes)); }));
    rows[4].micros.push_back(time_micros([&] { CHECK_CU(g_driver.cuMemRelease(handle)); }));
    CHECK_CU(g_driver.cuMemAddressFree(address, bytes));
  }
  return rows;
}

void print_latency_table(std::vector<LatencyRow> rows) {
  std::printf("remap_demo: VMM call latency, %zu repetitions, microseconds\n", kLatencyRepetitions);
  std::printf("  %-16s %12s %12s %12s %12s\n", "call", "handle size", "median", "min", "max");
  for (auto& row : rows) {
    std::sort(row.micros.begin(), row.micros.end());
    std::printf("  %-16s %12s %12.1f %12.1f %12.1f\n", row.call, format_bytes(row.bytes).c_str(),
                row.micros[row.micros.size() / 2], row.micros.front(), row.micros.back());
  }
}

// What docs/gpu-results.md records about a device's VMM support, besides the latencies: the
// recommended granularity and whether host-located handles can be created, mapped and used by the
// device. Reports only; an unsupported location is a finding, not a failure.
void report_vmm_facts(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  std::size_t minimum = 0, recommended = 0;
  CHECK_CU(g_driver.cuMemGetAllocationGranularity(&minimum, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CHECK_CU(g_driver.cuMemGetAllocationGranularity(&recommended, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  std::printf("remap_demo: device granularity minimum %zu, recommended %zu bytes\n", minimum, recommended);

  struct Location {
    const char* name;
    CUmemLocationType type;
    cudaDeviceAttr attribute;
  };
  const Location locations[] = {
      {"HOST", CU_MEM_LOCATION_TYPE_HOST,
       static_cast<cudaDeviceAttr>(CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)},
      {"HOST_NUMA", CU_MEM_LOCATION_TYPE_HOST_NUMA,
       static_cast<cudaDeviceAttr>(CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)},
  };
  for (const Location& where : locations) {
    int attribute = -1;
    cudaDeviceGetAttribute(&attribute, where.attribute, device);
    CUmemAllocationProp host{};
    host.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    host.location.type = where.type;
    host.location.id = 0;  // host NUMA node 0; ignored for HOST
    std::size_t granule = 0;
    CUresult r = g_driver.cuMemGetAllocationGranularity(&granule, &host, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    CUmemGenericAllocationHandle handle = 0;
    CUdeviceptr va = 0;
    bool mapped = false;
    if (r == CUDA_SUCCESS) r = g_driver.cuMemCreate(&handle, granule, &host, 0);
    const bool created = r == CUDA_SUCCESS;
    if (created) r = g_driver.cuMemAddressReserve(&va, granule, 0, 0, 0);
    if (created && r == CUDA_SUCCESS) {
      r = g_driver.cuMemMap(va, granule, 0, handle, 0);
      mapped = r == CUDA_SUCCESS;
    }
    bool usable = false;
    if (mapped) {
      CUmemAccessDesc access{};
      access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      access.location.id = device;
      access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      r = g_driver.cuMemSetAccess(va, granule, &access, 1);
      std::uint32_t back = 0;
      usable = r == CUDA_SUCCESS && cudaMemset(reinterpret_cast<void*>(va), 0x5a, granule) == cudaSuccess &&
               cudaMemcpy(&back, reinterpret_cast<void*>(va), sizeof back, cudaMemcpyDeviceToHost) == cudaSuccess &&
               back == 0x5a5a5a5au;
      g_driver.cuMemUnmap(va, granule);
    }
    if (va) g_driver.cuMemAddressFree(va, granule);
    if (created) g_driver.cuMemRelease(handle);
    const char* error = "none";
    if (r != CUDA_SUCCESS && g_driver.cuGetErrorName) g_driver.cuGetErrorName(r, &error);
    std::printf(
        "remap_demo: %s-located handles: attribute %d, granularity %zu, created %s, mapped %s, "
        "device read/write %s (last error %s)\n",
        where.name, attribute, granule, created ? "yes" : "no", mapped ? "yes" : "no", usable ? "yes" : "no", error);
    cudaGetLastError();  // a refused location is a finding; leave no sticky error for the checks after
  }
}

struct Options {
  std::size_t granules = kDefaultGranules;
  bool latency = false;
};

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: remap_demo [--granules N] [--latency] [--help]\n"
               "  Maps a VMM range, replays a CUDA graph into it, re-backs the range with a new handle\n"
               "  at the same address and checks the same graph writes into the new backing.\n"
               "  --granules N  size of the range in allocation granules (default %zu, at most %zu)\n"
               "  --latency     also time the VMM calls for a 1 GiB handle, and report the granularities\n"
               "                and whether host-located (HOST, HOST_NUMA) handles work\n"
               "  --help        show this text\n",
               kDefaultGranules, kMaxGranules);
}

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      print_usage(stdout);
      std::exit(0);
    } else if (arg == "--latency") {
      options.latency = true;
    } else if (arg == "--granules" && i + 1 < argc) {
      const char* text = argv[++i];
      char* end = nullptr;
      const unsigned long long value = std::strtoull(text, &end, 10);
      if (end == text || *end != '\0' || text[0] == '-' || value == 0 || value > kMaxGranules) {
        std::fprintf(stderr, "remap_demo: --granules: '%s' is not an integer in 1..%zu\n", text, kMaxGranules);
        std::exit(2);
      }
      options.granules = static_cast<std::size_t>(value);
    } else {
      std::fprintf(stderr, "remap_demo: unknown or incomplete argument '%s'\n", argv[i]);
      print_usage(stderr);
      std::exit(2);
    }
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  // Line-buffered even into a pipe (CTest, CI logs), so step lines and stderr errors keep their order.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const Options options = parse_options(argc, argv);

  // cudaFree(nullptr) creates the primary context: the driver VMM calls below need a current one
  // and, unlike runtime calls, do not create it themselves.
  int device = 0;
  int driver_version = 0;
  int runtime_version = 0;
  CHECK_CUDA(cudaSetDevice(0));
  CHECK_CUDA(cudaFree(nullptr));
  CHECK_CUDA(cudaGetDevice(&device));
  CHECK_CUDA(cudaDriverGetVersion(&driver_version));
  CHECK_CUDA(cudaRuntimeGetVersion(&runtime_version));
  std::printf("remap_demo: device %d, driver API %d, runtime %d\n", device, driver_version, runtime_version);
  step_ok("1 runtime initialised");

  resolve_driver();
  step_ok("2 driver VMM entry points resolved");

  // Granularity is a run-time property of the device (2 MiB is typical, not guaranteed).
  const CUmemAllocationProp prop = device_pinned_prop(device);
  std::size_t granularity = 0;
  CHECK_CU(g_driver.cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  const std::size_t bytes = options.granules * granularity;
  // Kernels index with 32-bit counts: keep the element count representable.
  if (granularity == 0 || bytes / sizeof(std::uint32_t) > UINT32_MAX) {
    std::fprintf(stderr, "remap_demo: %zu granules of %zu bytes do not fit the demo's 32-bit element count\n",
                 options.granules, granularity);
    return 1;
  }
  const auto count = static_cast<std::uint32_t>(bytes / sizeof(std::uint32_t));

  CUdeviceptr range = 0;
  CHECK_CU(g_driver.cuMemAddressReserve(&range, bytes, 0, 0, 0));
  CUmemGenericAllocationHandle handle_a = 0;
  CHECK_CU(g_driver.cuMemCreate(&handle_a, bytes, &prop, 0));
  map_read_write(range, bytes, handle_a, device);
  std::printf("remap_demo: granularity %zu bytes, range %s at 0x%llx backed by handle A\n", granularity,
              format_bytes(bytes).c_str(), static_cast<unsigned long long>(range));
  step_ok("3 VA range reserved, handle A mapped read/write");

  cudaLibrary_t library = nullptr;
  cudaKernel_t fill_pattern = nullptr;
  cudaKernel_t add_u32 = nullptr;
  CHECK_CUDA(cudaLibraryLoadData(&library, remap_demo::kDemoKernelsPtx, nullptr, nullptr, 0, nullptr, nullptr, 0));
  CHECK_CUDA(cudaLibraryGetKernel(&fill_pattern, library, "fill_pattern"));
  CHECK_CUDA(cudaLibraryGetKernel(&add_u32, library, "add_u32"));
  step_ok("4 kernels loaded from PTX");

  // Global capture mode, as PyTorch's graph capture uses by default: the strictest mode, so any
  // unsafe call the demo made during capture would be rejected rather than recorded.
  cudaStream_t stream = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t graph_exec = nullptr;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  launch(fill_pattern, range, count, kSeed, stream);
  launch(add_u32, range, count, kAddend, stream);
  CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  CHECK_CUDA(cudaGraphInstantiate(&graph_exec, graph, 0));
  step_ok("5 graph captured (fill_pattern, add_u32) and instantiated");

  std::vector<std::uint32_t> host(count);
  CHECK_CUDA(cudaGraphLaunch(graph_exec, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  copy_to_host(host, range);
  verify("graph launch into handle A", host, graph_result);
  step_ok("6 graph launch wrote the pattern into handle A");

  // Eager (uncaptured) launch: A now holds values the graph never produces.
  launch(add_u32, range, count, kMarkA, stream);
  CHECK_CUDA(cudaStreamSynchronize(stream));
  step_ok("7 handle A marked");

  // Nothing may still be running against A when it leaves the address: synchronise, then unmap.
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CU(g_driver.cuMemUnmap(range, bytes));
  CUmemGenericAllocationHandle handle_b = 0;
  CHECK_CU(g_driver.cuMemCreate(&handle_b, bytes, &prop, 0));
  map_read_write(range, bytes, handle_b, device);
  // cudaMemset runs on the legacy stream, which does not order against the non-blocking stream the
  // graph replays on: finish it before anything else touches the range.
  CHECK_CUDA(cudaMemset(as_pointer(range), 0, bytes));
  CHECK_CUDA(cudaDeviceSynchronize());
  copy_to_host(host, range);
  verify("range after remap to handle B and memset", host, [](std::uint32_t) { return std::uint32_t{0}; });
  step_ok("8 range re-backed by handle B at the same address, reads all zeros");

  CHECK_CUDA(cudaGraphLaunch(graph_exec, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  copy_to_host(host, range);
  verify("graph replay into handle B", host, graph_result);
  step_ok("9 graph captured before the remap replayed into handle B");

  CUdeviceptr range_a = 0;
  CHECK_CU(g_driver.cuMemAddressReserve(&range_a, bytes, 0, 0, 0));
  map_read_write(range_a, bytes, handle_a, device);
  copy_to_host(host, range_a);
  verify("handle A at its second address", host, marked_result);
  std::printf("remap_demo: handle A remapped at 0x%llx\n", static_cast<unsigned long long>(range_a));
  step_ok("10 handle A kept its own data, untouched by the replay");

  CHECK_CUDA(cudaGraphExecDestroy(graph_exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
  CHECK_CUDA(cudaStreamDestroy(stream));
  CHECK_CU(g_driver.cuMemUnmap(range_a, bytes));
  CHECK_CU(g_driver.cuMemUnmap(range, bytes));
  CHECK_CU(g_driver.cuMemRelease(handle_a));
  CHECK_CU(g_driver.cuMemRelease(handle_b));
  CHECK_CU(g_driver.cuMemAddressFree(range_a, bytes));
  CHECK_CU(g_driver.cuMemAddressFree(range, bytes));
  CHECK_CUDA(cudaLibraryUnload(library));
  step_ok("11 cleanup");

  std::vector<LatencyRow> latency = measure_vmm_latency(bytes, device);
  if (options.latency) {
    report_vmm_facts(device);
    std::vector<LatencyRow> large = measure_vmm_latency(kLargeHandleBytes, device);
    latency.insert(latency.end(), large.begin(), large.end());
  }
  print_latency_table(std::move(latency));
  step_ok("12 VMM latency measured");

  // Catches an error some call reported without failing it (e.g. an asynchronous launch failure).
  CHECK_CUDA(cudaGetLastError());
  std::printf("remap_demo: PASS\n");
  return 0;
}
