// Stream exports: creation, synchronisation, and stream capture (begin/end, status, capture modes).
#include "context.h"
#include "export.h"
#include "ptsz_api.h"

using namespace simcudart;

namespace {

static_assert(sizeof(cudaGraphEdgeData) == sizeof(CUgraphEdgeData), "edge data must share a layout");
// Capture modes and statuses share their numbering with the driver's, so they forward unchanged.
static_assert(static_cast<int>(cudaStreamCaptureModeGlobal) == CU_STREAM_CAPTURE_MODE_GLOBAL &&
              static_cast<int>(cudaStreamCaptureModeThreadLocal) == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
              static_cast<int>(cudaStreamCaptureModeRelaxed) == CU_STREAM_CAPTURE_MODE_RELAXED);
static_assert(static_cast<int>(cudaStreamCaptureStatusNone) == CU_STREAM_CAPTURE_STATUS_NONE &&
              static_cast<int>(cudaStreamCaptureStatusActive) == CU_STREAM_CAPTURE_STATUS_ACTIVE &&
              static_cast<int>(cudaStreamCaptureStatusInvalidated) == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
static_assert(cudaStreamNonBlocking == CU_STREAM_NON_BLOCKING);

bool valid_mode(int mode) noexcept {
  return mode == cudaStreamCaptureModeGlobal || mode == cudaStreamCaptureModeThreadLocal ||
         mode == cudaStreamCaptureModeRelaxed;
}

cudaError_t create_stream(cudaStream_t* pStream, unsigned int flags) {
  if (pStream == nullptr || (flags & ~static_cast<unsigned int>(cudaStreamNonBlocking)) != 0) {
    return cudaErrorInvalidValue;
  }
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  return call_driver(driver().cuStreamCreate, pStream, flags);
}

cudaError_t synchronize(StreamApi api, cudaStream_t stream) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  return call_driver(driver().cuStreamSynchronize.pick(api), stream);
}

cudaError_t query(StreamApi api, cudaStream_t stream) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  return call_driver(driver().cuStreamQuery.pick(api), stream);
}

cudaError_t begin_capture(StreamApi api, cudaStream_t stream, int mode) {
  if (!valid_mode(mode)) return cudaErrorInvalidValue;
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  return call_driver(driver().cuStreamBeginCapture.pick(api), stream, static_cast<CUstreamCaptureMode>(mode));
}

cudaError_t end_capture(StreamApi api, cudaStream_t stream, cudaGraph_t* pGraph) {
  if (pGraph == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  return call_driver(driver().cuStreamEndCapture.pick(api), stream, pGraph);
}

cudaError_t is_capturing(StreamApi api, cudaStream_t stream, cudaStreamCaptureStatus* status) {
  if (status == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  return call_driver(driver().cuStreamIsCapturing.pick(api), stream, reinterpret_cast<CUstreamCaptureStatus*>(status));
}

cudaError_t capture_info(StreamApi api, cudaStream_t stream, cudaStreamCaptureStatus* status, unsigned long long* id,
                         cudaGraph_t* graph, const cudaGraphNode_t** dependencies, const cudaGraphEdgeData** edge_data,
                         size_t* num_dependencies) {
  if (status == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  return call_driver(driver().cuStreamGetCaptureInfo.pick(api), stream,
                     reinterpret_cast<CUstreamCaptureStatus*>(status), reinterpret_cast<cuuint64_t*>(id), graph,
                     dependencies, reinterpret_cast<const CUgraphEdgeData**>(edge_data), num_dependencies);
}

}  // namespace

SIMCUDART_API cudaError_t cudaStreamCreate(cudaStream_t* pStream) {
  return guarded([&] { return create_stream(pStream, cudaStreamDefault); });
}

SIMCUDART_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags) {
  return guarded([&] { return create_stream(pStream, flags); });
}

SIMCUDART_API cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  return guarded([&] {
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    return call_driver(driver().cuStreamDestroy, stream);
  });
}

SIMCUDART_API cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return guarded([&] { return synchronize(StreamApi::legacy, stream); });
}
SIMCUDART_API cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream) {
  return guarded([&] { return synchronize(StreamApi::per_thread, stream); });
}

SIMCUDART_API cudaError_t cudaStreamQuery(cudaStream_t stream) {
  return guarded([&] { return query(StreamApi::legacy, stream); });
}
SIMCUDART_API cudaError_t cudaStreamQuery_ptsz(cudaStream_t stream) {
  return guarded([&] { return query(StreamApi::per_thread, stream); });
}

SIMCUDART_API cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  return guarded([&] { return begin_capture(StreamApi::legacy, stream, enum_value(mode)); });
}
SIMCUDART_API cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  return guarded([&] { return begin_capture(StreamApi::per_thread, stream, enum_value(mode)); });
}

SIMCUDART_API cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* pGraph) {
  return guarded([&] { return end_capture(StreamApi::legacy, stream, pGraph); });
}
SIMCUDART_API cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t* pGraph) {
  return guarded([&] { return end_capture(StreamApi::per_thread, stream, pGraph); });
}

SIMCUDART_API cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus* pCaptureStatus) {
  return guarded([&] { return is_capturing(StreamApi::legacy, stream, pCaptureStatus); });
}
SIMCUDART_API cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream,
                                                     enum cudaStreamCaptureStatus* pCaptureStatus) {
  return guarded([&] { return is_capturing(StreamApi::per_thread, stream, pCaptureStatus); });
}

SIMCUDART_API cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, enum cudaStreamCaptureStatus* captureStatus_out,
                                                   unsigned long long* id_out, cudaGraph_t* graph_out,
                                                   const cudaGraphNode_t** dependencies_out,
                                                   const cudaGraphEdgeData** edgeData_out,
                                                   size_t* numDependencies_out) {
  return guarded([&] {
    return capture_info(StreamApi::legacy, stream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                        numDependencies_out);
  });
}
SIMCUDART_API cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t stream,
                                                        enum cudaStreamCaptureStatus* captureStatus_out,
                                                        unsigned long long* id_out, cudaGraph_t* graph_out,
                                                        const cudaGraphNode_t** dependencies_out,
                                                        const cudaGraphEdgeData** edgeData_out,
                                                        size_t* numDependencies_out) {
  return guarded([&] {
    return capture_info(StreamApi::per_thread, stream, captureStatus_out, id_out, graph_out, dependencies_out,
                        edgeData_out, numDependencies_out);
  });
}

// PyTorch switches to relaxed mode around allocations made while another stream captures.
SIMCUDART_API cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode* mode) {
  return guarded([&] {
    if (mode == nullptr || !valid_mode(enum_value(*mode))) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_initialised(); e != cudaSuccess) return e;
    return call_driver(driver().cuThreadExchangeStreamCaptureMode, reinterpret_cast<CUstreamCaptureMode*>(mode));
  });
}
