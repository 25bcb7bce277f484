// Queries engines make about what they created: a VMM handle's properties, a mapping's access, a stream's context, a graph's nodes.
#include <cstring>

#include "sim_state.h"

using namespace simcuda;

namespace {

// cuStreamGetCtx in both ABIs: a created stream's own context; the special streams (NULL, CU_STREAM_LEGACY,
// CU_STREAM_PER_THREAD) answer the calling thread's current context, as cuda.h documents.
CUresult stream_context(CUstream stream, CUcontext* ctx, bool per_thread) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  Stream* st = resolve_stream(s, stream, per_thread);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  Context* c = st->legacy || st->per_thread ? get_current_context(s) : st->context;
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  *ctx = reinterpret_cast<CUcontext>(c);
  return CUDA_SUCCESS;
}

// The _v2 ABI adds the green context, which the simulator never creates: always NULL.
CUresult stream_context_v2(CUstream stream, CUcontext* ctx, CUgreenCtx* green, bool per_thread) {
  if (!green) return CUDA_ERROR_INVALID_VALUE;
  const CUresult r = stream_context(stream, ctx, per_thread);
  if (r == CUDA_SUCCESS) *green = nullptr;
  return r;
}

}  // namespace

SIM_EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle) {
  SIM_ENTER("cuMemGetAllocationPropertiesFromHandle");
  SIM_GUARDED_BEGIN
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  auto it = s.handles.find(handle);
  // A handle whose every reference was released is gone for its owner, even while a mapping keeps it.
  if (!prop || it == s.handles.end() || (it->second.released && it->second.retains == 0))
    return CUDA_ERROR_INVALID_VALUE;
  const PhysicalHandle& p = it->second;
  CUmemAllocationProp out;
  std::memset(&out, 0, sizeof out);
  out.type = CU_MEM_ALLOCATION_TYPE_PINNED;  // the only type cuMemCreate accepts
  out.location.type = p.location;
  out.location.id = p.location_id;
  // An imported handle came through a POSIX fd, which its exporter had to request.
  out.requestedHandleTypes = p.posix_fd ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
  out.allocFlags.gpuDirectRDMACapable = p.rdma ? 1 : 0;
  *prop = out;
  return CUDA_SUCCESS;
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuMemGetAccess(unsigned long long* flags, const CUmemLocation* location, CUdeviceptr ptr) {
  SIM_ENTER("cuMemGetAccess");
  SIM_GUARDED_BEGIN
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!flags || !location) return CUDA_ERROR_INVALID_VALUE;
  switch (location->type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      if (location->id < 0 || location->id >= static_cast<int>(s.devices.size())) return CUDA_ERROR_INVALID_DEVICE;
      break;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  // Any address inside a mapping (one cuMemMap) answers for that mapping; anything else is not VMM memory.
  auto next = s.mappings.upper_bound(ptr);
  if (next == s.mappings.begin()) return CUDA_ERROR_INVALID_VALUE;
  const Mapping& m = std::prev(next)->second;
  if (ptr >= m.va + m.size) return CUDA_ERROR_INVALID_VALUE;
  auto granted = m.granted.find(access_key(*location));
  *flags = granted == m.granted.end() ? CU_MEM_ACCESS_FLAGS_PROT_NONE : granted->second;
  return CUDA_SUCCESS;
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuStreamGetCtx(CUstream hStream, CUcontext* pctx) {
  SIM_ENTER("cuStreamGetCtx");
  SIM_GUARDED_BEGIN
  return stream_context(hStream, pctx, false);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuStreamGetCtx_ptsz(CUstream hStream, CUcontext* pctx) {
  SIM_ENTER("cuStreamGetCtx");
  SIM_GUARDED_BEGIN
  return stream_context(hStream, pctx, true);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuStreamGetCtx_v2(CUstream hStream, CUcontext* pCtx, CUgreenCtx* pGreenCtx) {
  SIM_ENTER("cuStreamGetCtx_v2");
  SIM_GUARDED_BEGIN
  return stream_context_v2(hStream, pCtx, pGreenCtx, false);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuStreamGetCtx_v2_ptsz(CUstream hStream, CUcontext* pCtx, CUgreenCtx* pGreenCtx) {
  SIM_ENTER("cuStreamGetCtx_v2");
  SIM_GUARDED_BEGIN
  return stream_context_v2(hStream, pCtx, pGreenCtx, true);
  SIM_GUARDED_END
}

// With `nodes` NULL, the count; otherwise `*numNodes` entries, NULL past the graph's nodes, and the count of
// those filled in `*numNodes` (cuda.h). A node handle is the node's address in the graph.
SIM_EXPORT CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode* nodes, size_t* numNodes) {
  SIM_ENTER("cuGraphGetNodes");
  SIM_GUARDED_BEGIN
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  auto* g = reinterpret_cast<Graph*>(hGraph);
  if (!numNodes || !s.graphs.count(g)) return CUDA_ERROR_INVALID_VALUE;
  const std::size_t count = g->nodes.size();
  if (!nodes) {
    *numNodes = count;
    return CUDA_SUCCESS;
  }
  const std::size_t asked = *numNodes;
  for (std::size_t i = 0; i < asked; ++i)
    nodes[i] = i < count ? reinterpret_cast<CUgraphNode>(&g->nodes[i]) : nullptr;
  *numNodes = asked < count ? asked : count;
  return CUDA_SUCCESS;
  SIM_GUARDED_END
}
