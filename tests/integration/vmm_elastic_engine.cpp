// Engines that map their own KV cache with the driver's VMM API, replayed on the simulated driver.
// Usage: vmm_elastic_engine kvcached|extensible|expandable
//   kvcached    kvcached's elastic KV: per tensor a reservation with an address hint, one zero page mapped
//               over every page, pages mapped and unmapped while serving (kvcached csrc/ftensor.cpp:26-47,
//               100-118, 160-176; csrc/page.cpp:10-25; csrc/allocator.cpp:138-153; constants.hpp:18).
//   extensible  vLLM's extensible KV (PRs #47363, #50779, #56492): the capacity reserved, one block per
//               segment mapped, graphs captured, then extend_kv_cache maps the rest; driver calls by dlsym
//               on libcuda.so.1, as its ctypes.CDLL does.
//   expandable  PyTorch's CUDACachingAllocator with expandable_segments:True (ExpandableSegment in
//               c10/cuda/CUDACachingAllocator.cpp): per stream and pool one reservation of
//               segment × ceil(1.125 × total memory / segment), pages of 20 MiB (large pool) or 2 MiB (small
//               pool) created with POSIX_FD and mapped one by one, one cuMemSetAccess per mapped range; the
//               driver's functions through cudaGetDriverEntryPointByVersion (c10/cuda/driver_api.cpp). A
//               graph-pool segment during capture, an ncclMemAlloc-like buffer (nccl src/allocator.cc:38-93)
//               with access for every device, and one plain cudaMalloc of 64 MiB (a library's workspace).
// Each mode: weights, a profiling forward, the sizing memory query, the KV cache by the engine's own VMM
// path, activation and autotune buffers of 64 MiB and more after it, a captured graph that takes KV
// addresses, serving (graph replays) and a KV write/read-back check. Prints "<check>: ok" or
// "<check>: FAILED" per check and the VMM bytes it created ("vmm created bytes N", "vmm peak bytes N",
// "graph pool created bytes N"); the exit status is the number of failed checks.
// EXPANDABLE_ADDRESS_SPACE_ABOVE_START=<GiB>: before CUDA starts, RLIMIT_AS is set to the address space
// in use then plus that much.
#define CUDA_ENABLE_DEPRECATED 1
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

// The simulated driver runs a kernel by calling simcuda_kernel_<name>: `touch` writes 1 at its pointer.
extern "C" __attribute__((visibility("default"))) void simcuda_kernel_touch(void** params) {
  auto* p = *static_cast<unsigned char**>(params[0]);
  p[0] = 1;
}

namespace {

const char* kPtx =
    ".version 8.0\n.target sm_90\n.address_size 64\n// simcuda-module-bytes: 2MiB\n"
    ".visible .entry touch(.param .u64 p)\n{\nret;\n}\n";

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", what.c_str(), ok ? "ok" : "FAILED");
  if (!ok) ++failures;
}

// The VMM functions, resolved by the route the engine uses.
struct Vmm {
  decltype(&cuMemAddressReserve) reserve = nullptr;
  decltype(&cuMemAddressFree) address_free = nullptr;
  decltype(&cuMemCreate) create = nullptr;
  decltype(&cuMemRelease) release = nullptr;
  decltype(&cuMemMap) map = nullptr;
  decltype(&cuMemUnmap) unmap = nullptr;
  decltype(&cuMemSetAccess) set_access = nullptr;
  decltype(&cuMemGetAllocationGranularity) granularity = nullptr;
  bool complete() const {
    return reserve && address_free && create && release && map && unmap && set_access && granularity;
  }

  // What the program created, to compare with what a trace reports.
  std::uint64_t created = 0;         // outside captures: the trace's `vmm` category
  std::uint64_t graph_pool = 0;      // during a capture: the trace's `graph_pool` category
  std::uint64_t live = 0, peak = 0;  // `vmm` bytes live, and their peak
  bool capturing = false;
  std::map<CUmemGenericAllocationHandle, bool> made_in_capture;

  CUmemGenericAllocationHandle make(std::uint64_t bytes, bool posix_fd = false, bool rdma = false) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.requestedHandleTypes = posix_fd ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
    prop.allocFlags.gpuDirectRDMACapable = rdma ? 1 : 0;
    CUmemGenericAllocationHandle h = 0;
    if (create(&h, bytes, &prop, 0) != CUDA_SUCCESS) return 0;
    made_in_capture[h] = capturing;
    if (capturing) {
      graph_pool += bytes;
    } else {
      created += bytes;
      live += bytes;
      peak = std::max(peak, live);
    }
    return h;
  }
  bool drop(CUmemGenericAllocationHandle h, std::uint64_t bytes) {
    if (release(h) != CUDA_SUCCESS) return false;
    if (!made_in_capture[h]) live -= bytes;
    made_in_capture.erase(h);
    return true;
  }
  // Read and write access for `devices` devices over a mapped range.
  bool access(CUdeviceptr va, std::uint64_t bytes, int devices = 1) {
    std::vector<CUmemAccessDesc> desc(static_cast<std::size_t>(devices));
    for (int d = 0; d < devices; ++d) {
      desc[static_cast<std::size_t>(d)].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      desc[static_cast<std::size_t>(d)].location.id = d;
      desc[static_cast<std::size_t>(d)].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    }
    return set_access(va, bytes, desc.data(), desc.size()) == CUDA_SUCCESS;
  }
  void print_totals() const {
    std::printf("vmm created bytes %llu\nvmm peak bytes %llu\ngraph pool created bytes %llu\n",
                static_cast<unsigned long long>(created), static_cast<unsigned long long>(peak),
                static_cast<unsigned long long>(graph_pool));
  }
};

Vmm direct_vmm() {
  Vmm v;
  v.reserve = &cuMemAddressReserve;
  v.address_free = &cuMemAddressFree;
  v.create = &cuMemCreate;
  v.release = &cuMemRelease;
  v.map = &cuMemMap;
  v.unmap = &cuMemUnmap;
  v.set_access = &cuMemSetAccess;
  v.granularity = &cuMemGetAllocationGranularity;
  return v;
}

// ctypes.CDLL("libcuda.so.1") and its attribute lookups: dlsym on the driver's handle.
Vmm dlsym_vmm() {
  Vmm v;
  void* driver = dlopen("libcuda.so.1", RTLD_NOW);
  if (!driver) return v;
  v.reserve = reinterpret_cast<decltype(v.reserve)>(dlsym(driver, "cuMemAddressReserve"));
  v.address_free = reinterpret_cast<decltype(v.address_free)>(dlsym(driver, "cuMemAddressFree"));
  v.create = reinterpret_cast<decltype(v.create)>(dlsym(driver, "cuMemCreate"));
  v.release = reinterpret_cast<decltype(v.release)>(dlsym(driver, "cuMemRelease"));
  v.map = reinterpret_cast<decltype(v.map)>(dlsym(driver, "cuMemMap"));
  v.unmap = reinterpret_cast<decltype(v.unmap)>(dlsym(driver, "cuMemUnmap"));
  v.set_access = reinterpret_cast<decltype(v.set_access)>(dlsym(driver, "cuMemSetAccess"));
  v.granularity = reinterpret_cast<decltype(v.granularity)>(dlsym(driver, "cuMemGetAllocationGranularity"));
  return v;
}

// PyTorch's DriverAPI: every function from cudaGetDriverEntryPointByVersion.
Vmm entry_point_vmm() {
  Vmm v;
  const auto get = [](const char* name, auto& out) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult status{};
    if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &status) == cudaSuccess)
      out = reinterpret_cast<std::remove_reference_t<decltype(out)>>(fn);
  };
  get("cuMemAddressReserve", v.reserve);
  get("cuMemAddressFree", v.address_free);
  get("cuMemCreate", v.create);
  get("cuMemRelease", v.release);
  get("cuMemMap", v.map);
  get("cuMemUnmap", v.unmap);
  get("cuMemSetAccess", v.set_access);
  get("cuMemGetAllocationGranularity", v.granularity);
  return v;
}

// The model's forward: launches of the `touch` kernel on a buffer of its own.
struct Forward {
  cudaKernel_t kernel = nullptr;
  void* buffer = nullptr;
  bool load() {
    cudaLibrary_t library = nullptr;
    return cudaLibraryLoadData(&library, kPtx, nullptr, nullptr, 0, nullptr, nullptr, 0) == cudaSuccess &&
           cudaLibraryGetKernel(&kernel, library, "touch") == cudaSuccess && cudaMalloc(&buffer, kMiB) == cudaSuccess;
  }
  bool launch_on(void* target, cudaStream_t stream = nullptr) const {
    void* args[] = {&target};
    return cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(1), dim3(1), args, 0, stream) == cudaSuccess;
  }
  bool run(int launches) const {
    for (int i = 0; i < launches; ++i)
      if (!launch_on(buffer)) return false;
    return true;
  }
};

bool write_bytes(std::uint64_t at, const std::vector<unsigned char>& bytes) {
  return cudaMemcpy(reinterpret_cast<void*>(at), bytes.data(), bytes.size(), cudaMemcpyHostToDevice) == cudaSuccess;
}
std::vector<unsigned char> read_bytes(std::uint64_t at, std::size_t n) {
  std::vector<unsigned char> out(n, 0xee);
  if (cudaMemcpy(out.data(), reinterpret_cast<void*>(at), n, cudaMemcpyDeviceToHost) != cudaSuccess)
    out.assign(n, 0xee);
  return out;
}
std::vector<unsigned char> pattern(unsigned char seed) {
  std::vector<unsigned char> p(4096);
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<unsigned char>(seed + i * 13);
  return p;
}
bool reads_zero(std::uint64_t at) {
  const std::vector<unsigned char> back = read_bytes(at, 4096);
  return std::all_of(back.begin(), back.end(), [](unsigned char b) { return b == 0; });
}

// Weights copied in by a plain cudaMalloc engine (vLLM's model loader), the profiling forward and the
// sizing query ("after profile").
void plain_start_up(const Forward& forward) {
  std::size_t free_bytes = 0, total = 0;
  check(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess, "baseline memory query");
  void* weights = nullptr;
  check(cudaMalloc(&weights, 256 * kMiB) == cudaSuccess, "weights");
  const std::vector<unsigned char> checkpoint(64 * kMiB, 1);
  check(cudaMemcpy(weights, checkpoint.data(), checkpoint.size(), cudaMemcpyHostToDevice) == cudaSuccess,
        "weights copied in");
  check(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess, "memory query before profiling");
  check(forward.run(100), "profiling forward");
  check(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess, "sizing memory query after profiling");
}

// Activation and autotune buffers of 64 MiB and more after the KV cache, each written by the forward that
// follows it (a few launches: the KV window is still open for them); they must keep what was written.
void activations_after_kv(const Forward& forward) {
  std::vector<unsigned char*> buffers;
  for (const std::uint64_t mib : {64, 64, 64, 64, 128, 256}) {
    unsigned char* a = nullptr;
    const std::uint64_t bytes = mib * kMiB;
    check(cudaMalloc(reinterpret_cast<void**>(&a), bytes) == cudaSuccess,
          "activation buffer " + std::to_string(mib) + " MiB");
    check(cudaMemset(a, 0x5a, 4096) == cudaSuccess && cudaMemset(a + bytes - 4096, 0x5a, 4096) == cudaSuccess &&
              forward.run(4),
          "written by the forward");
    buffers.push_back(a);
  }
  check(forward.run(100), "autotuning forward");
  bool kept = true;
  for (unsigned char* a : buffers) kept = kept && read_bytes(reinterpret_cast<std::uint64_t>(a), 1)[0] == 0x5a;
  check(kept, "every activation buffer kept what the forward wrote");
  for (unsigned char* a : buffers) cudaFree(a);
}

// A graph that writes at two KV addresses (a kernel and a memset), captured on its own stream.
struct KvGraph {
  cudaStream_t stream = nullptr;
  cudaGraphExec_t exec = nullptr;
  bool capture(Vmm& vmm, const Forward& forward, std::uint64_t kernel_target, std::uint64_t memset_target,
               void (*inside)(Vmm&) = nullptr) {
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return false;
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return false;
    vmm.capturing = true;
    if (inside) inside(vmm);
    const bool recorded = forward.launch_on(reinterpret_cast<void*>(kernel_target), stream) &&
                          cudaMemsetAsync(reinterpret_cast<void*>(memset_target), 0x40, 4096, stream) == cudaSuccess;
    vmm.capturing = false;
    cudaGraph_t graph = nullptr;
    return cudaStreamEndCapture(stream, &graph) == cudaSuccess && recorded && graph &&
           cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
  }
  bool replay() const {
    return cudaGraphLaunch(exec, stream) == cudaSuccess && cudaStreamSynchronize(stream) == cudaSuccess;
  }
};

// ---- kvcached ----

constexpr std::uint64_t kPage = 2 * kMiB;           // kvcached's page (constants.hpp)
constexpr std::uint64_t kHint = 0x1f0000000000ULL;  // kvcached's reservation hint
constexpr int kLayers = 4;
constexpr std::uint64_t kTensorBytes = 256 * kMiB;

// One KV tensor: its reservation and, per page, the real handle mapped there (0: the zero page).
struct FTensor {
  CUdeviceptr base = 0;
  std::vector<CUmemGenericAllocationHandle> pages = std::vector<CUmemGenericAllocationHandle>(kTensorBytes / kPage);
};

int kvcached() {
  Vmm vmm = direct_vmm();
  Forward forward;
  check(forward.load(), "model kernels loaded");
  plain_start_up(forward);
  // The zero page, one handle mapped over every page of every tensor (allocator.cpp:138-153).
  const CUmemGenericAllocationHandle zero = vmm.make(kPage);
  check(zero != 0, "the zero page");
  FTensor tensors[kLayers];
  for (int l = 0; l < kLayers; ++l) {
    FTensor& t = tensors[l];
    check(vmm.reserve(&t.base, kTensorBytes, kPage, kHint + l * kTensorBytes, 0) == CUDA_SUCCESS,
          "KV tensor reservation with kvcached's hint");
    bool mapped = true;
    for (std::uint64_t off = 0; off < kTensorBytes; off += kPage)
      mapped = mapped && vmm.map(t.base + off, kPage, 0, zero, 0) == CUDA_SUCCESS;
    check(mapped && vmm.access(t.base, kTensorBytes), "the zero page mapped over the tensor");
  }
  // kvcached's map (ftensor.cpp:100-118, page.cpp:10-25): the zero page unmapped there, a real page
  // created, mapped and made accessible. unmap maps the zero page back.
  const auto map_page = [&](FTensor& t, std::size_t i) {
    const CUdeviceptr at = t.base + i * kPage;
    if (vmm.unmap(at, kPage) != CUDA_SUCCESS) return false;
    const CUmemGenericAllocationHandle h = vmm.make(kPage);
    if (!h || vmm.map(at, kPage, 0, h, 0) != CUDA_SUCCESS || !vmm.access(at, kPage)) return false;
    t.pages[i] = h;
    return true;
  };
  const auto unmap_page = [&](FTensor& t, std::size_t i) {
    const CUdeviceptr at = t.base + i * kPage;
    const bool ok = vmm.unmap(at, kPage) == CUDA_SUCCESS && vmm.drop(t.pages[i], kPage) &&
                    vmm.map(at, kPage, 0, zero, 0) == CUDA_SUCCESS && vmm.access(at, kPage);
    t.pages[i] = 0;
    return ok;
  };
  // The first block of every layer, for the warm-up and the capture.
  bool first = true;
  for (FTensor& t : tensors) first = first && map_page(t, 0);
  check(first, "the first page of every layer mapped");
  activations_after_kv(forward);
  KvGraph graph;
  check(graph.capture(vmm, forward, tensors[0].base, tensors[1].base + 8192), "graph captured on KV addresses");
  // Serving: each step maps the next page of every layer, writes and reads it back, replays the graph,
  // and gives the page before it back to the zero page.
  bool served = true;
  for (std::size_t step = 1; step <= 4; ++step) {
    for (FTensor& t : tensors) served = served && map_page(t, step);
    for (int l = 0; l < kLayers; ++l) {
      const std::vector<unsigned char> p = pattern(static_cast<unsigned char>(step * 16 + l));
      const std::uint64_t at = tensors[l].base + step * kPage + 4096;
      served = served && write_bytes(at, p) && read_bytes(at, p.size()) == p;
    }
    served = served && graph.replay();
    if (step > 1)
      for (FTensor& t : tensors) served = served && unmap_page(t, step - 1);
  }
  check(served, "serving mapped and unmapped pages, wrote and read them back and replayed the graph");
  check(read_bytes(tensors[0].base, 1)[0] == 1 && read_bytes(tensors[1].base + 8192, 1)[0] == 0x40,
        "the graph wrote into the KV cache");
  const std::vector<unsigned char> last = pattern(4 * 16 + 3);
  check(read_bytes(tensors[3].base + 4 * kPage + 4096, last.size()) == last,
        "the KV cache reads back what serving wrote");
  check(reads_zero(tensors[2].base + 2 * kPage) && reads_zero(tensors[2].base + 100 * kPage),
        "a page given back, and one never mapped, read zeros");
  // Teardown: every page unmapped, the handles released, the reservations freed.
  bool freed = true;
  for (FTensor& t : tensors) {
    freed = freed && vmm.unmap(t.base, kTensorBytes) == CUDA_SUCCESS;
    for (CUmemGenericAllocationHandle& h : t.pages)
      if (h) freed = freed && vmm.drop(h, kPage);
    freed = freed && vmm.address_free(t.base, kTensorBytes) == CUDA_SUCCESS;
  }
  check(freed && vmm.drop(zero, kPage), "KV cache freed");
  vmm.print_totals();
  return failures;
}

// ---- vLLM extensible KV ----

int extensible() {
  Vmm vmm = dlsym_vmm();
  check(vmm.complete(), "driver functions by dlsym on libcuda.so.1");
  if (!vmm.complete()) return failures;
  Forward forward;
  check(forward.load(), "model kernels loaded");
  plain_start_up(forward);
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  std::size_t granule = 0;
  check(vmm.granularity(&granule, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS && granule > 0,
        "granularity");
  const std::uint64_t block = std::max<std::uint64_t>(granule, 2 * kMiB);
  // The capacity reserved per segment (one per layer), one block committed in each.
  CUdeviceptr segments[kLayers] = {};
  CUmemGenericAllocationHandle first_block[kLayers] = {}, rest[kLayers] = {};
  bool committed = true;
  for (int l = 0; l < kLayers; ++l) {
    committed = committed && vmm.reserve(&segments[l], kTensorBytes, 0, 0, 0) == CUDA_SUCCESS;
    first_block[l] = vmm.make(block);
    committed = committed && first_block[l] && vmm.map(segments[l], block, 0, first_block[l], 0) == CUDA_SUCCESS &&
                vmm.access(segments[l], block);
  }
  check(committed, "capacity reserved, one block committed per segment");
  activations_after_kv(forward);
  KvGraph graph;
  check(graph.capture(vmm, forward, segments[0], segments[1] + 8192), "graph captured on KV addresses");
  // extend_kv_cache: the rest of every segment mapped once the graphs are captured.
  bool extended = true;
  for (int l = 0; l < kLayers; ++l) {
    rest[l] = vmm.make(kTensorBytes - block);
    extended = extended && rest[l] &&
               vmm.map(segments[l] + block, kTensorBytes - block, 0, rest[l], 0) == CUDA_SUCCESS &&
               vmm.access(segments[l] + block, kTensorBytes - block);
  }
  check(extended, "the KV cache extended after capture");
  bool served = true;
  for (int step = 0; step < 4; ++step) {
    for (int l = 0; l < kLayers; ++l) {
      const std::vector<unsigned char> p = pattern(static_cast<unsigned char>(step * 16 + l));
      const std::uint64_t at = segments[l] + block + static_cast<std::uint64_t>(step) * 16 * kMiB;
      served = served && write_bytes(at, p) && read_bytes(at, p.size()) == p;
    }
    served = served && graph.replay();
  }
  check(served, "serving wrote and read back the extended KV cache and replayed the graph");
  check(read_bytes(segments[0], 1)[0] == 1 && read_bytes(segments[1] + 8192, 1)[0] == 0x40,
        "the graph wrote into the KV cache");
  check(reads_zero(segments[2] + kTensorBytes - 4096), "KV never written reads zeros");
  bool freed = true;
  for (int l = 0; l < kLayers; ++l)
    freed = freed && vmm.unmap(segments[l], block) == CUDA_SUCCESS &&
            vmm.unmap(segments[l] + block, kTensorBytes - block) == CUDA_SUCCESS && vmm.drop(first_block[l], block) &&
            vmm.drop(rest[l], kTensorBytes - block) && vmm.address_free(segments[l], kTensorBytes) == CUDA_SUCCESS;
  check(freed, "KV cache freed");
  vmm.print_totals();
  return failures;
}

// ---- PyTorch expandable segments ----

// One ExpandableSegment: a reservation of 1.125 × the device's memory in pages of `page` bytes.
struct Segment {
  Vmm* vmm = nullptr;
  std::uint64_t page = 0;
  CUdeviceptr base = 0;
  std::uint64_t reserved = 0;
  std::vector<CUmemGenericAllocationHandle> handles;
  int peers = 1;  // devices given access to every mapped range

  bool reserve(Vmm& v, std::uint64_t page_bytes, std::uint64_t total_memory) {
    vmm = &v;
    page = page_bytes;
    // segment_size_ * ceil(1.125 × totalGlobalMem / segment_size_), as the constructor reserves.
    const std::uint64_t wanted = total_memory + total_memory / 8;
    reserved = page * ((wanted + page - 1) / page);
    handles.assign(reserved / page, 0);
    return vmm->reserve(&base, reserved, 0, 0, 0) == CUDA_SUCCESS;
  }
  // map(): a POSIX_FD handle per page and a cuMemMap per page, then one cuMemSetAccess for the range.
  bool map(std::uint64_t offset, std::uint64_t bytes) {
    const std::uint64_t first = offset / page, end = (offset + bytes + page - 1) / page;
    for (std::uint64_t i = first; i < end; ++i) {
      if (handles[i]) continue;
      handles[i] = vmm->make(page, true);
      if (!handles[i] || vmm->map(base + i * page, page, 0, handles[i], 0) != CUDA_SUCCESS) return false;
    }
    return vmm->access(base + first * page, (end - first) * page, peers);
  }
  // unmapHandles(): synchronise, then unmap and release page by page.
  bool unmap(std::uint64_t offset, std::uint64_t bytes) {
    if (cudaDeviceSynchronize() != cudaSuccess) return false;
    const std::uint64_t first = offset / page, end = (offset + bytes + page - 1) / page;
    for (std::uint64_t i = first; i < end; ++i) {
      if (!handles[i]) continue;
      if (vmm->unmap(base + i * page, page) != CUDA_SUCCESS || !vmm->drop(handles[i], page)) return false;
      handles[i] = 0;
    }
    return true;
  }
  bool free_all() { return unmap(0, reserved) && vmm->address_free(base, reserved) == CUDA_SUCCESS; }
};

// The address space in use now (/proc/self/status VmSize), in bytes; 0 when unreadable.
std::uint64_t address_space_in_use() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmSize:", 0) == 0) return std::strtoull(line.c_str() + 7, nullptr, 10) * 1024;
  return 0;
}

bool limit_address_space() {
  const char* above = std::getenv("EXPANDABLE_ADDRESS_SPACE_ABOVE_START");
  if (!above) return true;
  char* end = nullptr;
  const double gib = std::strtod(above, &end);
  const std::uint64_t in_use = address_space_in_use();
  if (end == above || *end != '\0' || gib <= 0 || in_use == 0) {
    std::fprintf(stderr, "EXPANDABLE_ADDRESS_SPACE_ABOVE_START=%s: expected a positive number of GiB\n", above);
    return false;
  }
  rlimit limit{};
  limit.rlim_cur = limit.rlim_max = in_use + static_cast<rlim_t>(gib * static_cast<double>(kGiB));
  const bool set = setrlimit(RLIMIT_AS, &limit) == 0;
  std::printf("address space limited to %llu MiB (%llu MiB in use at start)\n",
              static_cast<unsigned long long>(limit.rlim_cur / kMiB), static_cast<unsigned long long>(in_use / kMiB));
  return set;
}

int expandable() {
  check(limit_address_space(), "address space limit set");
  if (failures) return failures;
  Vmm vmm = entry_point_vmm();
  check(vmm.complete(), "driver functions by cudaGetDriverEntryPointByVersion");
  if (!vmm.complete()) return failures;
  int devices = 0;
  check(cudaGetDeviceCount(&devices) == cudaSuccess, "device count");
  std::size_t free_bytes = 0, total = 0;
  check(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess, "baseline memory query");
  Forward forward;
  check(forward.load(), "model kernels loaded");
  // The default stream's two segments: large pool (20 MiB pages) and small pool (2 MiB pages).
  Segment large, small;
  check(large.reserve(vmm, 20 * kMiB, total) && small.reserve(vmm, 2 * kMiB, total),
        "the default stream's large- and small-pool segments reserved");
  // Weights: 256 MiB of tensors at the start of the large segment, copied in.
  constexpr std::uint64_t kWeights = 256 * kMiB;
  check(large.map(0, kWeights), "weights mapped");
  const std::vector<unsigned char> checkpoint(64 * kMiB, 1);
  check(cudaMemcpy(reinterpret_cast<void*>(large.base), checkpoint.data(), checkpoint.size(), cudaMemcpyHostToDevice) ==
            cudaSuccess,
        "weights copied in");
  check(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess, "memory query before profiling");
  // The profiling forward's small activations, then torch.cuda.empty_cache() gives their pages back.
  check(small.map(0, 6 * kMiB) && forward.run(100) && small.unmap(0, 6 * kMiB), "profiling forward");
  check(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess, "sizing memory query after profiling");
  // The KV cache: four tensors back to back right after the weights, in 20 MiB pages appended to the
  // large segment; a tensor's first and last page are shared with its neighbours (the first with the weights).
  constexpr std::uint64_t kKvTensor = 1270 * kMiB;
  constexpr int kKvTensors = 4;
  check(large.map(kWeights, kKvTensors * kKvTensor), "KV tensors mapped in 20 MiB pages");
  std::uint64_t kv[kKvTensors];
  for (int t = 0; t < kKvTensors; ++t) kv[t] = large.base + kWeights + static_cast<std::uint64_t>(t) * kKvTensor;
  // An ncclMemAlloc-like buffer: RECOMMENDED granularity, POSIX_FD (and RDMA where supported), access for
  // every device.
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  std::size_t granule = 0;
  check(vmm.granularity(&granule, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) == CUDA_SUCCESS && granule > 0,
        "NCCL granularity");
  int rdma = 0;
  cuDeviceGetAttribute(&rdma, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, 0);
  constexpr std::uint64_t kNcclBytes = 32 * kMiB;
  CUdeviceptr nccl = 0;
  const CUmemGenericAllocationHandle nccl_handle = vmm.make(kNcclBytes, true, rdma == 1);
  check(nccl_handle && vmm.reserve(&nccl, kNcclBytes, granule, 0, 0) == CUDA_SUCCESS &&
            vmm.map(nccl, kNcclBytes, 0, nccl_handle, 0) == CUDA_SUCCESS && vmm.access(nccl, kNcclBytes, devices),
        "NCCL buffer with access for " + std::to_string(devices) + " devices");
  // A library's own plain cudaMalloc of 64 MiB (a workspace outside PyTorch's allocator).
  unsigned char* workspace = nullptr;
  check(cudaMalloc(reinterpret_cast<void**>(&workspace), 64 * kMiB) == cudaSuccess &&
            cudaMemset(workspace, 0x33, 4096) == cudaSuccess,
        "plain cudaMalloc 64 MiB");
  // Activations of the compile warm-up and autotuning, in the large segment after the KV cache.
  const std::uint64_t activations = kWeights + kKvTensors * kKvTensor;
  check(large.map(activations, 4 * 64 * kMiB) && forward.run(100), "activations mapped after the KV cache");
  // The capture: a graph pool gets a segment of its own, mapped during the capture.
  static Segment pool;
  pool.page = 20 * kMiB;
  const auto graph_pool = [](Vmm& v) {
    std::size_t f = 0, t = 0;
    cudaMemGetInfo(&f, &t);
    if (!pool.reserve(v, 20 * kMiB, t) || !pool.map(0, 20 * kMiB)) pool.base = 0;
  };
  KvGraph graph;
  check(graph.capture(vmm, forward, kv[0] + 4096, kv[3] + 8192, graph_pool) && pool.base != 0,
        "graph captured on KV addresses, with a graph-pool segment");
  bool served = true;
  for (int step = 0; step < 4; ++step) {
    for (int t = 0; t < kKvTensors; ++t) {
      const std::vector<unsigned char> p = pattern(static_cast<unsigned char>(step * 16 + t));
      const std::uint64_t at = kv[t] + kKvTensor - 8192 - static_cast<std::uint64_t>(step) * 4096;
      served = served && write_bytes(at, p) && read_bytes(at, p.size()) == p;
    }
    served = served && graph.replay();
  }
  check(served, "serving wrote and read back the KV cache and replayed the graph");
  check(read_bytes(kv[0] + 4096, 1)[0] == 1 && read_bytes(kv[3] + 8192, 1)[0] == 0x40,
        "the graph wrote into the KV cache");
  check(reads_zero(kv[1] + kKvTensor / 2) && read_bytes(large.base, 1)[0] == 1 &&
            read_bytes(reinterpret_cast<std::uint64_t>(workspace), 1)[0] == 0x33,
        "KV never written reads zeros; the weights and the workspace kept their bytes");
  check(cudaFree(workspace) == cudaSuccess && pool.free_all() && large.free_all() && small.free_all() &&
            vmm.unmap(nccl, kNcclBytes) == CUDA_SUCCESS && vmm.drop(nccl_handle, kNcclBytes) &&
            vmm.address_free(nccl, kNcclBytes) == CUDA_SUCCESS,
        "segments freed");
  vmm.print_totals();
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "kvcached") return kvcached();
  if (mode == "extensible") return extensible();
  if (mode == "expandable") return expandable();
  std::fprintf(stderr, "usage: vmm_elastic_engine kvcached|extensible|expandable (got '%s')\n", mode.c_str());
  return 2;
}
