// Graph exports: instantiation (three entry points), launch, and destruction of graphs and execs.
#include "context.h"
#include "export.h"
#include "ptsz_api.h"

#include <cstddef>

using namespace simcudart;

namespace {

static_assert(
    sizeof(cudaGraphInstantiateParams) == sizeof(CUDA_GRAPH_INSTANTIATE_PARAMS) &&
        offsetof(cudaGraphInstantiateParams, uploadStream) == offsetof(CUDA_GRAPH_INSTANTIATE_PARAMS, hUploadStream) &&
        offsetof(cudaGraphInstantiateParams, errNode_out) == offsetof(CUDA_GRAPH_INSTANTIATE_PARAMS, hErrNode_out) &&
        offsetof(cudaGraphInstantiateParams, result_out) == offsetof(CUDA_GRAPH_INSTANTIATE_PARAMS, result_out),
    "instantiate parameters must share a layout");

// cudaGraphInstantiate takes flags since CUDA 12 (cuda.h maps cuGraphInstantiate to
// cuGraphInstantiateWithFlags the same way), so both exports land on one driver entry.
cudaError_t instantiate(cudaGraphExec_t* pGraphExec, cudaGraph_t graph, unsigned long long flags) {
  if (pGraphExec == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  return call_driver(driver().cuGraphInstantiateWithFlags, pGraphExec, graph, flags);
}

cudaError_t instantiate_with_params(StreamApi api, cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                    cudaGraphInstantiateParams* params) {
  if (pGraphExec == nullptr || params == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  return call_driver(driver().cuGraphInstantiateWithParams.pick(api), pGraphExec, graph,
                     reinterpret_cast<CUDA_GRAPH_INSTANTIATE_PARAMS*>(params));
}

cudaError_t launch(StreamApi api, cudaGraphExec_t exec, cudaStream_t stream) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  return call_driver(driver().cuGraphLaunch.pick(api), exec, stream);
}

}  // namespace

SIMCUDART_API cudaError_t cudaGraphInstantiate(cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                               unsigned long long flags) {
  return guarded([&] { return instantiate(pGraphExec, graph, flags); });
}

SIMCUDART_API cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                                        unsigned long long flags) {
  return guarded([&] { return instantiate(pGraphExec, graph, flags); });
}

SIMCUDART_API cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                                         cudaGraphInstantiateParams* instantiateParams) {
  return guarded([&] { return instantiate_with_params(StreamApi::legacy, pGraphExec, graph, instantiateParams); });
}
SIMCUDART_API cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                                              cudaGraphInstantiateParams* instantiateParams) {
  return guarded([&] { return instantiate_with_params(StreamApi::per_thread, pGraphExec, graph, instantiateParams); });
}

SIMCUDART_API cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
  return guarded([&] { return launch(StreamApi::legacy, graphExec, stream); });
}
SIMCUDART_API cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream) {
  return guarded([&] { return launch(StreamApi::per_thread, graphExec, stream); });
}

SIMCUDART_API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec) {
  return guarded([&] {
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    return call_driver(driver().cuGraphExecDestroy, graphExec);
  });
}

SIMCUDART_API cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  return guarded([&] {
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    return call_driver(driver().cuGraphDestroy, graph);
  });
}
