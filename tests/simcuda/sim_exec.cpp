// Simulated execution: streams, stream capture with CUDA's mode rules, graphs, modules and kernel launches.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <regex>
#include <sstream>

#include "policy/units.h"
#include "sim_state.h"

namespace simcuda {
namespace {

thread_local CUstreamCaptureMode t_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
thread_local std::vector<std::pair<std::uint64_t, Stream*>> t_per_thread_streams;  // (generation, stream) per device

Stream* per_thread_stream(State& s, int device) {
  auto& slots = t_per_thread_streams;
  if (slots.size() <= static_cast<std::size_t>(device))
    slots.resize(static_cast<std::size_t>(device) + 1, {0, nullptr});
  auto& slot = slots[static_cast<std::size_t>(device)];
  if (slot.first != s.generation || !slot.second) {
    auto stream = std::make_unique<Stream>();
    stream->per_thread = true;
    stream->device = device;
    slot = {s.generation, stream.get()};
    s.streams.insert(stream.get());
    s.owned_streams.push_back(std::move(stream));
  }
  return slot.second;
}

bool is_blocking(const Stream* st) { return !(st->flags & CU_STREAM_NON_BLOCKING); }

// Takes the raw value: a caller's out-of-range mode is an int to reject, never an enum to load.
bool valid_mode(int mode) {
  return mode == CU_STREAM_CAPTURE_MODE_GLOBAL || mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL ||
         mode == CU_STREAM_CAPTURE_MODE_RELAXED;
}

// Work on the legacy stream waits for every blocking stream; if one is capturing, that would join
// uncaptured work into the capture, which CUDA refuses and which breaks the capture.
CUresult check_legacy_implicit(State& s, const Stream* target, bool invalidate) {
  if (!target->legacy) return CUDA_SUCCESS;
  bool conflict = false;
  for (Stream* st : s.streams) {
    if (st->capture && is_blocking(st) && st->device == target->device) {
      if (invalidate) st->capture->invalidated = true;
      conflict = true;
    }
  }
  return conflict ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : CUDA_SUCCESS;
}

std::uint64_t exec_charge(const State& s, std::size_t nodes) {
  return s.config.graph_exec_bytes + s.config.graph_node_bytes * nodes;
}

// The flags cuGraphInstantiateWithFlags/WithParams document; none changes the simulation.
constexpr unsigned long long kInstantiateFlags =
    CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
    CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;

CUresult instantiate(CUgraphExec* exec, CUgraph graph, unsigned long long flags = 0) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  int device = 0;
  if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
  if (!exec || (flags & ~kInstantiateFlags) != 0) return CUDA_ERROR_INVALID_VALUE;
  auto* g = reinterpret_cast<Graph*>(graph);
  if (!s.graphs.count(g)) return CUDA_ERROR_INVALID_VALUE;
  const std::uint64_t charge = exec_charge(s, g->nodes.size());
  if (!charge_device(s, device, charge)) return CUDA_ERROR_OUT_OF_MEMORY;
  auto* e = new GraphExec;
  e->nodes.assign(g->nodes.begin(), g->nodes.end());
  e->device = device;
  e->charged = charge;
  s.execs.insert(e);
  *exec = reinterpret_cast<CUgraphExec>(e);
  return CUDA_SUCCESS;
}

CUresult launch_graph(CUgraphExec exec, CUstream stream, bool per_thread) {
  std::vector<Work> to_run;
  {
    std::lock_guard<std::mutex> guard(lock());
    State& s = state();
    int device = 0;
    if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
    auto* e = reinterpret_cast<GraphExec*>(exec);
    if (!s.execs.count(e)) return CUDA_ERROR_INVALID_VALUE;
    // Checked before any node, so an unknown stream fails the same way for an empty graph.
    if (!resolve_stream(s, stream, per_thread)) return CUDA_ERROR_INVALID_HANDLE;
    for (const Work& node : e->nodes) {
      Work copy = node;
      bool run_now = false;
      if (CUresult r = submit_work(s, stream, per_thread, false, copy, run_now); r != CUDA_SUCCESS) return r;
      if (run_now) to_run.push_back(std::move(copy));
    }
  }
  for (const Work& w : to_run) run_work(w);
  return CUDA_SUCCESS;
}

// ---- PTX: the entry names and their parameter sizes ----

std::size_t ptx_type_size(const std::string& type) {
  if (type == "u64" || type == "s64" || type == "b64" || type == "f64") return 8;
  if (type == "u32" || type == "s32" || type == "b32" || type == "f32") return 4;
  if (type == "u16" || type == "s16" || type == "b16" || type == "f16") return 2;
  if (type == "u8" || type == "s8" || type == "b8") return 1;
  return 0;
}

struct ParsedEntry {
  std::string name;
  std::vector<std::size_t> sizes;
  std::vector<std::size_t> offsets;  // each parameter at its alignment (`.align N`, else its type's size)
};

struct ParsedModule {
  std::vector<ParsedEntry> entries;
  std::optional<std::uint64_t> bytes;
};

bool parse_ptx(const char* image, ParsedModule& out) {
  if (!image) return false;
  const std::string text(image, strnlen(image, 64u << 20));
  if (text.find(".entry") == std::string::npos) return false;
  static const std::regex entry_re(R"(\.entry\s+([A-Za-z_$][\w$]*)\s*\(([^)]*)\))");
  static const std::regex param_re(R"(\.param\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+[\w$]+(?:\[(\d+)\])?)");
  static const std::regex bytes_re(R"(//\s*simcuda-module-bytes:\s*(\S+))");
  for (std::sregex_iterator it(text.begin(), text.end(), entry_re), end; it != end; ++it) {
    ParsedEntry entry;
    entry.name = (*it)[1];
    const std::string params = (*it)[2];
    std::size_t next = 0;
    for (std::sregex_iterator p(params.begin(), params.end(), param_re); p != end; ++p) {
      const std::size_t element = ptx_type_size((*p)[2]);
      if (element == 0) return false;
      const std::size_t align = (*p)[1].matched ? static_cast<std::size_t>(std::stoul((*p)[1])) : element;
      if (align == 0 || (align & (align - 1)) != 0) return false;
      std::size_t size = element;
      if ((*p)[3].matched) size *= static_cast<std::size_t>(std::stoul((*p)[3]));
      next = (next + align - 1) / align * align;
      entry.offsets.push_back(next);
      entry.sizes.push_back(size);
      next += size;
    }
    out.entries.push_back(std::move(entry));
  }
  std::smatch m;
  if (std::regex_search(text, m, bytes_re)) {
    out.bytes = kvremap::policy::parse_size(m[1].str());
    if (!out.bytes) return false;
  }
  return !out.entries.empty();
}

CUresult load_module(Module** out, const void* image, bool library) {
  ParsedModule parsed;
  if (!out || !image) return CUDA_ERROR_INVALID_VALUE;
  if (!parse_ptx(static_cast<const char*>(image), parsed)) return CUDA_ERROR_INVALID_IMAGE;
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  int device = 0;
  if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) {
    // A library is context-independent; without a current context it is charged to device 0.
    if (!library || r != CUDA_ERROR_INVALID_CONTEXT) return r;
    device = 0;
  }
  const std::uint64_t charge = parsed.bytes.value_or(s.config.module_bytes);
  if (!charge_device(s, device, charge)) return CUDA_ERROR_OUT_OF_MEMORY;
  auto* m = new Module;
  m->device = device;
  m->charged = charge;
  m->library = library;
  for (ParsedEntry& entry : parsed.entries) {
    auto f = std::make_unique<Function>();
    f->name = std::move(entry.name);
    f->param_sizes = std::move(entry.sizes);
    f->param_offsets = std::move(entry.offsets);
    f->module = m;
    s.functions.insert(f.get());
    m->functions.push_back(std::move(f));
  }
  s.modules.insert(m);
  *out = m;
  return CUDA_SUCCESS;
}

CUresult unload_module(Module* m, bool library) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!s.modules.count(m) || m->library != library) return CUDA_ERROR_INVALID_HANDLE;
  uncharge_device(s, m->device, m->charged);
  for (auto& f : m->functions) s.functions.erase(f.get());
  s.modules.erase(m);
  delete m;
  return CUDA_SUCCESS;
}

CUresult get_function(Function** out, Module* m, const char* name, bool library) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!out || !name) return CUDA_ERROR_INVALID_VALUE;
  if (!s.modules.count(m) || m->library != library) return CUDA_ERROR_INVALID_HANDLE;
  for (auto& f : m->functions) {
    if (f->name != name) continue;
    if (!f->host) {
      const std::string symbol = "simcuda_kernel_" + f->name;
      f->host = reinterpret_cast<void (*)(void**)>(dlsym(RTLD_DEFAULT, symbol.c_str()));
      if (!f->host) {
        std::fprintf(stderr, "simcuda: kernel %s has no host implementation (export extern \"C\" void %s(void**))\n",
                     f->name.c_str(), symbol.c_str());
        return CUDA_ERROR_NOT_FOUND;
      }
    }
    *out = f.get();
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_NOT_FOUND;
}

CUresult launch_kernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                       CUstream stream, void** params, void** extra, bool per_thread) {
  Work work;
  bool run_now = false;
  {
    std::lock_guard<std::mutex> guard(lock());
    State& s = state();
    int device = 0;
    if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
    auto* fn = reinterpret_cast<Function*>(f);
    if (!s.functions.count(fn) || !fn->host) return CUDA_ERROR_INVALID_HANDLE;
    if (extra) return CUDA_ERROR_NOT_SUPPORTED;
    // The limits of compute capability 9.0 (cuDeviceGetAttribute MAX_GRID_DIM_*, MAX_BLOCK_DIM_*,
    // MAX_THREADS_PER_BLOCK); the thread count is taken in 64 bits so that it cannot wrap.
    if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 || gx > 0x7fffffffU || gy > 65535 ||
        gz > 65535 || bx > 1024 || by > 1024 || bz > 64 || static_cast<std::uint64_t>(bx) * by * bz > 1024)
      return CUDA_ERROR_INVALID_VALUE;
    if (!params && !fn->param_sizes.empty()) return CUDA_ERROR_INVALID_VALUE;
    work.kind = Work::Kind::kKernel;
    work.function = fn;
    for (std::size_t i = 0; i < fn->param_sizes.size(); ++i) {
      const auto* bytes = static_cast<const unsigned char*>(params[i]);
      if (!bytes) return CUDA_ERROR_INVALID_VALUE;
      work.args.emplace_back(bytes, bytes + fn->param_sizes[i]);  // by value, as a captured node keeps them
    }
    if (CUresult r = submit_work(s, stream, per_thread, false, work, run_now); r != CUDA_SUCCESS) return r;
  }
  if (run_now) run_work(work);
  return CUDA_SUCCESS;
}

CUresult begin_capture(CUstream stream, CUstreamCaptureMode mode, bool per_thread) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!valid_mode(mode)) return CUDA_ERROR_INVALID_VALUE;
  Stream* st = resolve_stream(s, stream, per_thread);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  if (st->legacy) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (st->capture) return CUDA_ERROR_ILLEGAL_STATE;
  auto capture = std::make_unique<Capture>();
  capture->id = s.next_capture_id++;
  capture->stream = st;
  capture->mode = mode;
  capture->thread = std::this_thread::get_id();
  capture->graph = new Graph;
  s.graphs.insert(capture->graph);
  st->capture = std::move(capture);
  return CUDA_SUCCESS;
}

CUresult end_capture(CUstream stream, CUgraph* graph, bool per_thread) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  Stream* st = resolve_stream(s, stream, per_thread);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  if (!st->capture) return CUDA_ERROR_ILLEGAL_STATE;
  Capture& c = *st->capture;
  if (c.mode != CU_STREAM_CAPTURE_MODE_RELAXED && c.thread != std::this_thread::get_id())
    return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  const bool invalidated = c.invalidated;
  Graph* g = c.graph;
  st->capture.reset();
  if (invalidated) {
    s.graphs.erase(g);
    delete g;
    *graph = nullptr;
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  *graph = reinterpret_cast<CUgraph>(g);
  return CUDA_SUCCESS;
}

CUresult capture_status(State& s, CUstream stream, bool per_thread, CUstreamCaptureStatus* status, Capture** out) {
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!status) return CUDA_ERROR_INVALID_VALUE;
  Stream* st = resolve_stream(s, stream, per_thread);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = check_legacy_implicit(s, st, false); r != CUDA_SUCCESS) return r;
  *out = st->capture.get();
  *status = !st->capture               ? CU_STREAM_CAPTURE_STATUS_NONE
            : st->capture->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                       : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  return CUDA_SUCCESS;
}

CUresult capture_info(CUstream stream, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
                      const CUgraphNode** deps, const CUgraphEdgeData** edges, size_t* num_deps, bool per_thread) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  Capture* c = nullptr;
  if (CUresult r = capture_status(s, stream, per_thread, status, &c); r != CUDA_SUCCESS) return r;
  if (c) {
    if (id) *id = c->id;
    if (graph) *graph = reinterpret_cast<CUgraph>(c->graph);
  }
  // Nodes are recorded as one linear sequence; dependency sets are not modelled.
  if (deps) *deps = nullptr;
  if (edges) *edges = nullptr;
  if (num_deps) *num_deps = 0;
  return CUDA_SUCCESS;
}

CUresult is_capturing(CUstream stream, CUstreamCaptureStatus* status, bool per_thread) {
  std::lock_guard<std::mutex> guard(lock());
  Capture* c = nullptr;
  return capture_status(state(), stream, per_thread, status, &c);
}

CUresult synchronize_stream(CUstream stream, bool per_thread) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  Stream* st = resolve_stream(s, stream, per_thread);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  if (st->capture) {
    st->capture->invalidated = true;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (check_legacy_implicit(s, st, true) != CUDA_SUCCESS) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return CUDA_SUCCESS;  // work already ran at enqueue time
}

}  // namespace

CUstreamCaptureMode thread_capture_mode() { return t_capture_mode; }

Stream* resolve_stream(State& s, CUstream stream, bool per_thread_api) {
  Context* c = get_current_context(s);
  const int device = c ? c->device : 0;
  if (s.legacy_streams.empty()) return nullptr;
  if (stream == CU_STREAM_LEGACY || (stream == nullptr && !per_thread_api))
    return s.legacy_streams[static_cast<std::size_t>(device)].get();
  if (stream == CU_STREAM_PER_THREAD || stream == nullptr) return per_thread_stream(s, device);
  auto* st = reinterpret_cast<Stream*>(stream);
  return s.streams.count(st) ? st : nullptr;
}

CUresult check_unsafe_during_capture(State& s) {
  const CUstreamCaptureMode mine = t_capture_mode;
  if (mine == CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_SUCCESS;
  const auto self = std::this_thread::get_id();
  bool prohibited = false;
  for (Stream* st : s.streams) {
    if (!st->capture) continue;
    Capture& c = *st->capture;
    const bool own = c.thread == self && c.mode != CU_STREAM_CAPTURE_MODE_RELAXED;
    const bool others_global =
        mine == CU_STREAM_CAPTURE_MODE_GLOBAL && c.thread != self && c.mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
    if (own || others_global) {
      c.invalidated = true;
      prohibited = true;
    }
  }
  return prohibited ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

CUresult submit_work(State& s, CUstream stream, bool per_thread_api, bool synchronous, Work& work, bool& run_now) {
  run_now = false;
  Stream* st = resolve_stream(s, stream, per_thread_api);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  if (st->capture) {
    if (synchronous) {
      st->capture->invalidated = true;
      return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (st->capture->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    st->capture->graph->nodes.push_back(work);
    return CUDA_SUCCESS;
  }
  if (CUresult r = check_legacy_implicit(s, st, true); r != CUDA_SUCCESS) return r;
  // Every executed kernel, copy, memset and graph node passes here, so the oracle sees them all.
  check_serving(s, work, current_call());
  run_now = true;
  return CUDA_SUCCESS;
}

void destroy_all_execution(State& s) {
  for (GraphExec* e : s.execs) delete e;
  s.execs.clear();
  for (Stream* st : s.streams) st->capture.reset();
  for (Graph* g : s.graphs) delete g;
  s.graphs.clear();
  for (Module* m : s.modules) delete m;
  s.modules.clear();
  s.functions.clear();
  s.streams.clear();
  s.owned_streams.clear();
  s.legacy_streams.clear();
}

}  // namespace simcuda

using namespace simcuda;

// ---- streams ----

SIM_EXPORT CUresult cuStreamCreate(CUstream* stream, unsigned int flags) {
  SIM_ENTER("cuStreamCreate");
  SIM_GUARDED_BEGIN
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  int device = 0;
  if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
  if (!stream || (flags & ~static_cast<unsigned>(CU_STREAM_NON_BLOCKING))) return CUDA_ERROR_INVALID_VALUE;
  auto st = std::make_unique<Stream>();
  st->flags = flags;
  st->device = device;
  st->context = get_current_context(s);
  *stream = reinterpret_cast<CUstream>(st.get());
  s.streams.insert(st.get());
  s.owned_streams.push_back(std::move(st));
  return CUDA_SUCCESS;
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuStreamDestroy_v2(CUstream stream) {
  SIM_ENTER("cuStreamDestroy_v2");
  SIM_GUARDED_BEGIN
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  auto* st = reinterpret_cast<Stream*>(stream);
  if (!s.streams.count(st) || st->per_thread) return CUDA_ERROR_INVALID_HANDLE;
  if (st->capture) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  s.streams.erase(st);
  for (auto it = s.owned_streams.begin(); it != s.owned_streams.end(); ++it) {
    if (it->get() == st) {
      s.owned_streams.erase(it);
      break;
    }
  }
  return CUDA_SUCCESS;
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuStreamSynchronize(CUstream stream) {
  SIM_ENTER("cuStreamSynchronize");
  SIM_GUARDED_BEGIN
  return synchronize_stream(stream, false);
  SIM_GUARDED_END
}
SIM_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream stream) {
  SIM_ENTER("cuStreamSynchronize");
  SIM_GUARDED_BEGIN
  return synchronize_stream(stream, true);
  SIM_GUARDED_END
}

// Work runs at enqueue time, so a valid stream is always idle; querying a capturing stream is
// illegal and breaks the capture, as synchronising it is.
static CUresult query_stream(CUstream stream, bool per_thread) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  Stream* st = resolve_stream(s, stream, per_thread);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  if (st->capture) {
    st->capture->invalidated = true;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamQuery(CUstream stream) {
  SIM_ENTER("cuStreamQuery");
  SIM_GUARDED_BEGIN
  return query_stream(stream, false);
  SIM_GUARDED_END
}
SIM_EXPORT CUresult cuStreamQuery_ptsz(CUstream stream) {
  SIM_ENTER("cuStreamQuery");
  SIM_GUARDED_BEGIN
  return query_stream(stream, true);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuStreamBeginCapture_v2(CUstream stream, CUstreamCaptureMode mode) {
  SIM_ENTER("cuStreamBeginCapture_v2");
  SIM_GUARDED_BEGIN
  return begin_capture(stream, mode, false);
  SIM_GUARDED_END
}
SIM_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream stream, CUstreamCaptureMode mode) {
  SIM_ENTER("cuStreamBeginCapture_v2");
  SIM_GUARDED_BEGIN
  return begin_capture(stream, mode, true);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuStreamEndCapture(CUstream stream, CUgraph* graph) {
  SIM_ENTER("cuStreamEndCapture");
  SIM_GUARDED_BEGIN
  return end_capture(stream, graph, false);
  SIM_GUARDED_END
}
SIM_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream stream, CUgraph* graph) {
  SIM_ENTER("cuStreamEndCapture");
  SIM_GUARDED_BEGIN
  return end_capture(stream, graph, true);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus* status) {
  SIM_ENTER("cuStreamIsCapturing");
  SIM_GUARDED_BEGIN
  return is_capturing(stream, status, false);
  SIM_GUARDED_END
}
SIM_EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream stream, CUstreamCaptureStatus* status) {
  SIM_ENTER("cuStreamIsCapturing");
  SIM_GUARDED_BEGIN
  return is_capturing(stream, status, true);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuStreamGetCaptureInfo_v3(CUstream stream, CUstreamCaptureStatus* status, cuuint64_t* id,
                                              CUgraph* graph, const CUgraphNode** deps, const CUgraphEdgeData** edges,
                                              size_t* num_deps) {
  SIM_ENTER("cuStreamGetCaptureInfo_v3");
  SIM_GUARDED_BEGIN
  return capture_info(stream, status, id, graph, deps, edges, num_deps, false);
  SIM_GUARDED_END
}
SIM_EXPORT CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream stream, CUstreamCaptureStatus* status, cuuint64_t* id,
                                                   CUgraph* graph, const CUgraphNode** deps,
                                                   const CUgraphEdgeData** edges, size_t* num_deps) {
  SIM_ENTER("cuStreamGetCaptureInfo_v3");
  SIM_GUARDED_BEGIN
  return capture_info(stream, status, id, graph, deps, edges, num_deps, true);
  SIM_GUARDED_END
}
SIM_EXPORT CUresult cuStreamGetCaptureInfo_v2(CUstream stream, CUstreamCaptureStatus* status, cuuint64_t* id,
                                              CUgraph* graph, const CUgraphNode** deps, size_t* num_deps) {
  SIM_ENTER("cuStreamGetCaptureInfo_v2");
  SIM_GUARDED_BEGIN
  return capture_info(stream, status, id, graph, deps, nullptr, num_deps, false);
  SIM_GUARDED_END
}
SIM_EXPORT CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream stream, CUstreamCaptureStatus* status, cuuint64_t* id,
                                                   CUgraph* graph, const CUgraphNode** deps, size_t* num_deps) {
  SIM_ENTER("cuStreamGetCaptureInfo_v2");
  SIM_GUARDED_BEGIN
  return capture_info(stream, status, id, graph, deps, nullptr, num_deps, true);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  SIM_ENTER("cuThreadExchangeStreamCaptureMode");
  if (!mode) return CUDA_ERROR_INVALID_VALUE;
  int requested = 0;
  std::memcpy(&requested, mode, sizeof requested);
  if (!valid_mode(requested)) return CUDA_ERROR_INVALID_VALUE;
  std::swap(*mode, t_capture_mode);
  return CUDA_SUCCESS;
}

// ---- graphs ----

SIM_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long flags) {
  SIM_ENTER("cuGraphInstantiateWithFlags");
  SIM_GUARDED_BEGIN
  return instantiate(exec, graph, flags);
  SIM_GUARDED_END
}

static CUresult instantiate_with_params(CUgraphExec* exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  if (!params) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = instantiate(exec, graph, params->flags);
  params->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
  params->hErrNode_out = nullptr;
  return r;
}

SIM_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec* exec, CUgraph graph,
                                                 CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  SIM_ENTER("cuGraphInstantiateWithParams");
  SIM_GUARDED_BEGIN
  return instantiate_with_params(exec, graph, params);
  SIM_GUARDED_END
}
SIM_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* exec, CUgraph graph,
                                                      CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  SIM_ENTER("cuGraphInstantiateWithParams");
  SIM_GUARDED_BEGIN
  return instantiate_with_params(exec, graph, params);
  SIM_GUARDED_END
}

// The pre-12.0 five-argument ABI, still exported by libcuda for old binaries.
#undef cuGraphInstantiate
SIM_EXPORT CUresult cuGraphInstantiate(CUgraphExec* exec, CUgraph graph, CUgraphNode* error_node, char* log,
                                       size_t log_size) {
  SIM_ENTER("cuGraphInstantiate");
  SIM_GUARDED_BEGIN
  if (error_node) *error_node = nullptr;
  if (log && log_size) log[0] = '\0';
  return instantiate(exec, graph);
  SIM_GUARDED_END
}
SIM_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec* exec, CUgraph graph, CUgraphNode* error_node, char* log,
                                          size_t log_size) {
  SIM_ENTER("cuGraphInstantiate_v2");
  SIM_GUARDED_BEGIN
  if (error_node) *error_node = nullptr;
  if (log && log_size) log[0] = '\0';
  return instantiate(exec, graph);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  SIM_ENTER("cuGraphLaunch");
  SIM_GUARDED_BEGIN
  return launch_graph(exec, stream, false);
  SIM_GUARDED_END
}
SIM_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) {
  SIM_ENTER("cuGraphLaunch");
  SIM_GUARDED_BEGIN
  return launch_graph(exec, stream, true);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec) {
  SIM_ENTER("cuGraphExecDestroy");
  SIM_GUARDED_BEGIN
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  auto* e = reinterpret_cast<GraphExec*>(exec);
  if (!s.execs.erase(e)) return CUDA_ERROR_INVALID_VALUE;
  uncharge_device(s, e->device, e->charged);
  delete e;
  return CUDA_SUCCESS;
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuGraphDestroy(CUgraph graph) {
  SIM_ENTER("cuGraphDestroy");
  SIM_GUARDED_BEGIN
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  auto* g = reinterpret_cast<Graph*>(graph);
  for (Stream* st : s.streams)
    if (st->capture && st->capture->graph == g) return CUDA_ERROR_ILLEGAL_STATE;  // still being captured
  if (!s.graphs.erase(g)) return CUDA_ERROR_INVALID_VALUE;
  delete g;
  return CUDA_SUCCESS;
  SIM_GUARDED_END
}

// ---- modules and libraries ----

SIM_EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  SIM_ENTER("cuModuleLoadData");
  SIM_GUARDED_BEGIN
  if (!module) return CUDA_ERROR_INVALID_VALUE;
  Module* m = nullptr;
  CUresult r = load_module(&m, image, false);
  if (r == CUDA_SUCCESS) *module = reinterpret_cast<CUmodule>(m);
  return r;
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int num_options,
                                       CUjit_option* options, void** values) {
  SIM_ENTER("cuModuleLoadDataEx");
  // JIT options tune compilation, which the simulator does not do; only their presence is checked.
  (void)values;
  SIM_GUARDED_BEGIN
  if (!module || (num_options != 0 && !options)) return CUDA_ERROR_INVALID_VALUE;
  Module* m = nullptr;
  CUresult r = load_module(&m, image, false);
  if (r == CUDA_SUCCESS) *module = reinterpret_cast<CUmodule>(m);
  return r;
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  SIM_ENTER("cuModuleGetFunction");
  SIM_GUARDED_BEGIN
  if (!function) return CUDA_ERROR_INVALID_VALUE;
  Function* f = nullptr;
  CUresult r = get_function(&f, reinterpret_cast<Module*>(module), name, false);
  if (r == CUDA_SUCCESS) *function = reinterpret_cast<CUfunction>(f);
  return r;
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuModuleUnload(CUmodule module) {
  SIM_ENTER("cuModuleUnload");
  SIM_GUARDED_BEGIN
  return unload_module(reinterpret_cast<Module*>(module), false);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option* jit_options,
                                      void** jit_values, unsigned int num_jit, CUlibraryOption* library_options,
                                      void** library_values, unsigned int num_library) {
  SIM_ENTER("cuLibraryLoadData");
  // Options tune compilation and loading, which the simulator does not do; only their presence is checked.
  (void)jit_values;
  (void)library_values;
  SIM_GUARDED_BEGIN
  if (!library || (num_jit != 0 && !jit_options) || (num_library != 0 && !library_options))
    return CUDA_ERROR_INVALID_VALUE;
  Module* m = nullptr;
  CUresult r = load_module(&m, code, true);
  if (r == CUDA_SUCCESS) *library = reinterpret_cast<CUlibrary>(m);
  return r;
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuLibraryGetKernel(CUkernel* kernel, CUlibrary library, const char* name) {
  SIM_ENTER("cuLibraryGetKernel");
  SIM_GUARDED_BEGIN
  if (!kernel) return CUDA_ERROR_INVALID_VALUE;
  Function* f = nullptr;
  CUresult r = get_function(&f, reinterpret_cast<Module*>(library), name, true);
  if (r == CUDA_SUCCESS) *kernel = reinterpret_cast<CUkernel>(f);
  return r;
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuKernelGetFunction(CUfunction* function, CUkernel kernel) {
  SIM_ENTER("cuKernelGetFunction");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!function) return CUDA_ERROR_INVALID_VALUE;
  auto* f = reinterpret_cast<Function*>(kernel);
  if (!s.functions.count(f)) return CUDA_ERROR_INVALID_HANDLE;
  *function = reinterpret_cast<CUfunction>(f);  // a kernel and its function are one object here
  return CUDA_SUCCESS;
}

// A kernel and its function are one object here, so both families answer from the same record.
static CUresult param_info(const void* handle, std::size_t index, std::size_t* offset, std::size_t* size) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  auto* f = static_cast<Function*>(const_cast<void*>(handle));
  if (!s.functions.count(f) || !offset || index >= f->param_sizes.size()) return CUDA_ERROR_INVALID_VALUE;
  *offset = f->param_offsets[index];
  if (size) *size = f->param_sizes[index];
  return CUDA_SUCCESS;
}

static CUresult function_name(const char** name, const void* handle) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  auto* f = static_cast<Function*>(const_cast<void*>(handle));
  if (!name || !s.functions.count(f)) return CUDA_ERROR_INVALID_VALUE;
  *name = f->name.c_str();
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuFuncGetParamInfo(CUfunction func, size_t index, size_t* offset, size_t* size) {
  SIM_ENTER("cuFuncGetParamInfo");
  return param_info(func, index, offset, size);
}

SIM_EXPORT CUresult cuKernelGetParamInfo(CUkernel kernel, size_t index, size_t* offset, size_t* size) {
  SIM_ENTER("cuKernelGetParamInfo");
  return param_info(kernel, index, offset, size);
}

SIM_EXPORT CUresult cuFuncGetName(const char** name, CUfunction func) {
  SIM_ENTER("cuFuncGetName");
  return function_name(name, func);
}

SIM_EXPORT CUresult cuKernelGetName(const char** name, CUkernel kernel) {
  SIM_ENTER("cuKernelGetName");
  return function_name(name, kernel);
}

SIM_EXPORT CUresult cuLibraryUnload(CUlibrary library) {
  SIM_ENTER("cuLibraryUnload");
  SIM_GUARDED_BEGIN
  return unload_module(reinterpret_cast<Module*>(library), true);
  SIM_GUARDED_END
}

// ---- launches ----

SIM_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                   unsigned int by, unsigned int bz, unsigned int shared_bytes, CUstream stream,
                                   void** params, void** extra) {
  SIM_ENTER("cuLaunchKernel");
  SIM_GUARDED_BEGIN(void) shared_bytes;
  return launch_kernel(f, gx, gy, gz, bx, by, bz, stream, params, extra, false);
  SIM_GUARDED_END
}
SIM_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared_bytes,
                                        CUstream stream, void** params, void** extra) {
  SIM_ENTER("cuLaunchKernel");
  SIM_GUARDED_BEGIN(void) shared_bytes;
  return launch_kernel(f, gx, gy, gz, bx, by, bz, stream, params, extra, true);
  SIM_GUARDED_END
}

static CUresult launch_ex(const CUlaunchConfig* config, CUfunction f, void** params, void** extra, bool per_thread) {
  if (!config || (config->numAttrs != 0 && !config->attrs)) return CUDA_ERROR_INVALID_VALUE;
  return launch_kernel(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX, config->blockDimY,
                       config->blockDimZ, config->hStream, params, extra, per_thread);
}

SIM_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  SIM_ENTER("cuLaunchKernelEx");
  SIM_GUARDED_BEGIN
  return launch_ex(config, f, params, extra, false);
  SIM_GUARDED_END
}
SIM_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  SIM_ENTER("cuLaunchKernelEx");
  SIM_GUARDED_BEGIN
  return launch_ex(config, f, params, extra, true);
  SIM_GUARDED_END
}
