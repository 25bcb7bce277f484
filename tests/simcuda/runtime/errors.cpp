// CUresult -> cudaError_t table, error names/descriptions, and the per-thread sticky last error.
#include "errors.h"

#include <cstddef>

#include "export.h"

namespace simcudart {
namespace {

struct DriverToRuntime {
  CUresult driver;
  cudaError_t runtime;
};

// Most codes share a number across the two enums, but not all have a counterpart, and the names
// differ; one explicit table keeps the mapping reviewable. PyTorch relies on OUT_OF_MEMORY ->
// cudaErrorMemoryAllocation (2) to free its cache and retry.
constexpr DriverToRuntime kDriverToRuntime[] = {
    {CUDA_SUCCESS, cudaSuccess},
    {CUDA_ERROR_INVALID_VALUE, cudaErrorInvalidValue},
    {CUDA_ERROR_OUT_OF_MEMORY, cudaErrorMemoryAllocation},
    {CUDA_ERROR_NOT_INITIALIZED, cudaErrorInitializationError},
    {CUDA_ERROR_DEINITIALIZED, cudaErrorCudartUnloading},
    {CUDA_ERROR_PROFILER_DISABLED, cudaErrorProfilerDisabled},
    {CUDA_ERROR_PROFILER_NOT_INITIALIZED, cudaErrorProfilerNotInitialized},
    {CUDA_ERROR_PROFILER_ALREADY_STARTED, cudaErrorProfilerAlreadyStarted},
    {CUDA_ERROR_PROFILER_ALREADY_STOPPED, cudaErrorProfilerAlreadyStopped},
    {CUDA_ERROR_STUB_LIBRARY, cudaErrorStubLibrary},
    {CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, cudaErrorCallRequiresNewerDriver},
    {CUDA_ERROR_DEVICE_UNAVAILABLE, cudaErrorDevicesUnavailable},
    {CUDA_ERROR_NO_DEVICE, cudaErrorNoDevice},
    {CUDA_ERROR_INVALID_DEVICE, cudaErrorInvalidDevice},
    {CUDA_ERROR_DEVICE_NOT_LICENSED, cudaErrorDeviceNotLicensed},
    {CUDA_ERROR_INVALID_IMAGE, cudaErrorInvalidKernelImage},
    {CUDA_ERROR_INVALID_CONTEXT, cudaErrorDeviceUninitialized},
    {CUDA_ERROR_MAP_FAILED, cudaErrorMapBufferObjectFailed},
    {CUDA_ERROR_UNMAP_FAILED, cudaErrorUnmapBufferObjectFailed},
    {CUDA_ERROR_ARRAY_IS_MAPPED, cudaErrorArrayIsMapped},
    {CUDA_ERROR_ALREADY_MAPPED, cudaErrorAlreadyMapped},
    {CUDA_ERROR_NO_BINARY_FOR_GPU, cudaErrorNoKernelImageForDevice},
    {CUDA_ERROR_ALREADY_ACQUIRED, cudaErrorAlreadyAcquired},
    {CUDA_ERROR_NOT_MAPPED, cudaErrorNotMapped},
    {CUDA_ERROR_NOT_MAPPED_AS_ARRAY, cudaErrorNotMappedAsArray},
    {CUDA_ERROR_NOT_MAPPED_AS_POINTER, cudaErrorNotMappedAsPointer},
    {CUDA_ERROR_ECC_UNCORRECTABLE, cudaErrorECCUncorrectable},
    {CUDA_ERROR_UNSUPPORTED_LIMIT, cudaErrorUnsupportedLimit},
    {CUDA_ERROR_CONTEXT_ALREADY_IN_USE, cudaErrorDeviceAlreadyInUse},
    {CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, cudaErrorPeerAccessUnsupported},
    {CUDA_ERROR_INVALID_PTX, cudaErrorInvalidPtx},
    {CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, cudaErrorInvalidGraphicsContext},
    {CUDA_ERROR_NVLINK_UNCORRECTABLE, cudaErrorNvlinkUncorrectable},
    {CUDA_ERROR_JIT_COMPILER_NOT_FOUND, cudaErrorJitCompilerNotFound},
    {CUDA_ERROR_UNSUPPORTED_PTX_VERSION, cudaErrorUnsupportedPtxVersion},
    {CUDA_ERROR_JIT_COMPILATION_DISABLED, cudaErrorJitCompilationDisabled},
    {CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY, cudaErrorUnsupportedExecAffinity},
    {CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC, cudaErrorUnsupportedDevSideSync},
    {CUDA_ERROR_CONTAINED, cudaErrorContained},
    {CUDA_ERROR_INVALID_SOURCE, cudaErrorInvalidSource},
    {CUDA_ERROR_FILE_NOT_FOUND, cudaErrorFileNotFound},
    {CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, cudaErrorSharedObjectSymbolNotFound},
    {CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, cudaErrorSharedObjectInitFailed},
    {CUDA_ERROR_OPERATING_SYSTEM, cudaErrorOperatingSystem},
    {CUDA_ERROR_INVALID_HANDLE, cudaErrorInvalidResourceHandle},
    {CUDA_ERROR_ILLEGAL_STATE, cudaErrorIllegalState},
    {CUDA_ERROR_LOSSY_QUERY, cudaErrorLossyQuery},
    {CUDA_ERROR_NOT_FOUND, cudaErrorSymbolNotFound},
    {CUDA_ERROR_NOT_READY, cudaErrorNotReady},
    {CUDA_ERROR_ILLEGAL_ADDRESS, cudaErrorIllegalAddress},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, cudaErrorLaunchOutOfResources},
    {CUDA_ERROR_LAUNCH_TIMEOUT, cudaErrorLaunchTimeout},
    {CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING, cudaErrorLaunchIncompatibleTexturing},
    {CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, cudaErrorPeerAccessAlreadyEnabled},
    {CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, cudaErrorPeerAccessNotEnabled},
    {CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, cudaErrorSetOnActiveProcess},
    {CUDA_ERROR_CONTEXT_IS_DESTROYED, cudaErrorContextIsDestroyed},
    {CUDA_ERROR_ASSERT, cudaErrorAssert},
    {CUDA_ERROR_TOO_MANY_PEERS, cudaErrorTooManyPeers},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, cudaErrorHostMemoryAlreadyRegistered},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, cudaErrorHostMemoryNotRegistered},
    {CUDA_ERROR_HARDWARE_STACK_ERROR, cudaErrorHardwareStackError},
    {CUDA_ERROR_ILLEGAL_INSTRUCTION, cudaErrorIllegalInstruction},
    {CUDA_ERROR_MISALIGNED_ADDRESS, cudaErrorMisalignedAddress},
    {CUDA_ERROR_INVALID_ADDRESS_SPACE, cudaErrorInvalidAddressSpace},
    {CUDA_ERROR_INVALID_PC, cudaErrorInvalidPc},
    {CUDA_ERROR_LAUNCH_FAILED, cudaErrorLaunchFailure},
    {CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, cudaErrorCooperativeLaunchTooLarge},
    {CUDA_ERROR_TENSOR_MEMORY_LEAK, cudaErrorTensorMemoryLeak},
    {CUDA_ERROR_NOT_PERMITTED, cudaErrorNotPermitted},
    {CUDA_ERROR_NOT_SUPPORTED, cudaErrorNotSupported},
    {CUDA_ERROR_SYSTEM_NOT_READY, cudaErrorSystemNotReady},
    {CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, cudaErrorSystemDriverMismatch},
    {CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, cudaErrorCompatNotSupportedOnDevice},
    {CUDA_ERROR_MPS_CONNECTION_FAILED, cudaErrorMpsConnectionFailed},
    {CUDA_ERROR_MPS_RPC_FAILURE, cudaErrorMpsRpcFailure},
    {CUDA_ERROR_MPS_SERVER_NOT_READY, cudaErrorMpsServerNotReady},
    {CUDA_ERROR_MPS_MAX_CLIENTS_REACHED, cudaErrorMpsMaxClientsReached},
    {CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED, cudaErrorMpsMaxConnectionsReached},
    {CUDA_ERROR_MPS_CLIENT_TERMINATED, cudaErrorMpsClientTerminated},
    {CUDA_ERROR_CDP_NOT_SUPPORTED, cudaErrorCdpNotSupported},
    {CUDA_ERROR_CDP_VERSION_MISMATCH, cudaErrorCdpVersionMismatch},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cudaErrorStreamCaptureUnsupported},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cudaErrorStreamCaptureInvalidated},
    {CUDA_ERROR_STREAM_CAPTURE_MERGE, cudaErrorStreamCaptureMerge},
    {CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, cudaErrorStreamCaptureUnmatched},
    {CUDA_ERROR_STREAM_CAPTURE_UNJOINED, cudaErrorStreamCaptureUnjoined},
    {CUDA_ERROR_STREAM_CAPTURE_ISOLATION, cudaErrorStreamCaptureIsolation},
    {CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, cudaErrorStreamCaptureImplicit},
    {CUDA_ERROR_CAPTURED_EVENT, cudaErrorCapturedEvent},
    {CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, cudaErrorStreamCaptureWrongThread},
    {CUDA_ERROR_TIMEOUT, cudaErrorTimeout},
    {CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, cudaErrorGraphExecUpdateFailure},
    {CUDA_ERROR_EXTERNAL_DEVICE, cudaErrorExternalDevice},
    {CUDA_ERROR_INVALID_CLUSTER_SIZE, cudaErrorInvalidClusterSize},
    {CUDA_ERROR_FUNCTION_NOT_LOADED, cudaErrorFunctionNotLoaded},
    {CUDA_ERROR_INVALID_RESOURCE_TYPE, cudaErrorInvalidResourceType},
    {CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, cudaErrorInvalidResourceConfiguration},
    {CUDA_ERROR_UNKNOWN, cudaErrorUnknown},
};

struct ErrorText {
  cudaError_t error;
  const char* name;
  const char* description;
};

// Every cudaError_t of the CUDA 13 headers, so any code a caller holds has a name.
#define SIMCUDART_ERROR(code, text) \
  { code, #code, text }
constexpr ErrorText kErrorTexts[] = {
    SIMCUDART_ERROR(cudaSuccess, "no error"),
    SIMCUDART_ERROR(cudaErrorInvalidValue, "invalid argument"),
    SIMCUDART_ERROR(cudaErrorMemoryAllocation, "out of memory"),
    SIMCUDART_ERROR(cudaErrorInitializationError, "initialization error"),
    SIMCUDART_ERROR(cudaErrorCudartUnloading, "driver shutting down"),
    SIMCUDART_ERROR(cudaErrorProfilerDisabled, "profiler disabled"),
    SIMCUDART_ERROR(cudaErrorProfilerNotInitialized, "profiler not initialized"),
    SIMCUDART_ERROR(cudaErrorProfilerAlreadyStarted, "profiler already started"),
    SIMCUDART_ERROR(cudaErrorProfilerAlreadyStopped, "profiler already stopped"),
    SIMCUDART_ERROR(cudaErrorInvalidConfiguration, "invalid launch configuration"),
    SIMCUDART_ERROR(cudaErrorInvalidPitchValue, "invalid pitch"),
    SIMCUDART_ERROR(cudaErrorInvalidSymbol, "invalid device symbol"),
    SIMCUDART_ERROR(cudaErrorInvalidHostPointer, "invalid host pointer"),
    SIMCUDART_ERROR(cudaErrorInvalidDevicePointer, "invalid device pointer"),
    SIMCUDART_ERROR(cudaErrorInvalidTexture, "invalid texture"),
    SIMCUDART_ERROR(cudaErrorInvalidTextureBinding, "invalid texture binding"),
    SIMCUDART_ERROR(cudaErrorInvalidChannelDescriptor, "invalid channel descriptor"),
    SIMCUDART_ERROR(cudaErrorInvalidMemcpyDirection, "invalid copy direction"),
    SIMCUDART_ERROR(cudaErrorAddressOfConstant, "address of constant variable requested"),
    SIMCUDART_ERROR(cudaErrorTextureFetchFailed, "texture fetch failed"),
    SIMCUDART_ERROR(cudaErrorTextureNotBound, "texture not bound"),
    SIMCUDART_ERROR(cudaErrorSynchronizationError, "synchronization error"),
    SIMCUDART_ERROR(cudaErrorInvalidFilterSetting, "invalid texture filter setting"),
    SIMCUDART_ERROR(cudaErrorInvalidNormSetting, "invalid texture normalization setting"),
    SIMCUDART_ERROR(cudaErrorMixedDeviceExecution, "mixed device and host execution"),
    SIMCUDART_ERROR(cudaErrorNotYetImplemented, "feature not yet implemented"),
    SIMCUDART_ERROR(cudaErrorMemoryValueTooLarge, "memory value too large"),
    SIMCUDART_ERROR(cudaErrorStubLibrary, "stub driver library loaded instead of the real one"),
    SIMCUDART_ERROR(cudaErrorInsufficientDriver, "CUDA driver missing or too old for this runtime"),
    SIMCUDART_ERROR(cudaErrorCallRequiresNewerDriver, "call not supported by the installed driver"),
    SIMCUDART_ERROR(cudaErrorInvalidSurface, "invalid surface"),
    SIMCUDART_ERROR(cudaErrorDuplicateVariableName, "duplicate global variable name"),
    SIMCUDART_ERROR(cudaErrorDuplicateTextureName, "duplicate texture name"),
    SIMCUDART_ERROR(cudaErrorDuplicateSurfaceName, "duplicate surface name"),
    SIMCUDART_ERROR(cudaErrorDevicesUnavailable, "all devices busy or unavailable"),
    SIMCUDART_ERROR(cudaErrorIncompatibleDriverContext, "context incompatible with the runtime"),
    SIMCUDART_ERROR(cudaErrorMissingConfiguration, "launch configuration missing"),
    SIMCUDART_ERROR(cudaErrorPriorLaunchFailure, "a prior launch failed"),
    SIMCUDART_ERROR(cudaErrorLaunchMaxDepthExceeded, "launch nesting depth exceeded"),
    SIMCUDART_ERROR(cudaErrorLaunchFileScopedTex, "file-scoped texture used in device launch"),
    SIMCUDART_ERROR(cudaErrorLaunchFileScopedSurf, "file-scoped surface used in device launch"),
    SIMCUDART_ERROR(cudaErrorSyncDepthExceeded, "device synchronize depth exceeded"),
    SIMCUDART_ERROR(cudaErrorLaunchPendingCountExceeded, "pending device launch count exceeded"),
    SIMCUDART_ERROR(cudaErrorInvalidDeviceFunction, "invalid device function"),
    SIMCUDART_ERROR(cudaErrorNoDevice, "no CUDA-capable device found"),
    SIMCUDART_ERROR(cudaErrorInvalidDevice, "invalid device ordinal"),
    SIMCUDART_ERROR(cudaErrorDeviceNotLicensed, "device not licensed"),
    SIMCUDART_ERROR(cudaErrorSoftwareValidityNotEstablished, "software validity not established"),
    SIMCUDART_ERROR(cudaErrorStartupFailure, "runtime start-up failure"),
    SIMCUDART_ERROR(cudaErrorInvalidKernelImage, "invalid kernel image"),
    SIMCUDART_ERROR(cudaErrorDeviceUninitialized, "invalid or uninitialised device context"),
    SIMCUDART_ERROR(cudaErrorMapBufferObjectFailed, "buffer object mapping failed"),
    SIMCUDART_ERROR(cudaErrorUnmapBufferObjectFailed, "buffer object unmapping failed"),
    SIMCUDART_ERROR(cudaErrorArrayIsMapped, "array is mapped"),
    SIMCUDART_ERROR(cudaErrorAlreadyMapped, "resource already mapped"),
    SIMCUDART_ERROR(cudaErrorNoKernelImageForDevice, "no kernel image for this device"),
    SIMCUDART_ERROR(cudaErrorAlreadyAcquired, "resource already acquired"),
    SIMCUDART_ERROR(cudaErrorNotMapped, "resource not mapped"),
    SIMCUDART_ERROR(cudaErrorNotMappedAsArray, "resource not mapped as an array"),
    SIMCUDART_ERROR(cudaErrorNotMappedAsPointer, "resource not mapped as a pointer"),
    SIMCUDART_ERROR(cudaErrorECCUncorrectable, "uncorrectable ECC error"),
    SIMCUDART_ERROR(cudaErrorUnsupportedLimit, "limit not supported"),
    SIMCUDART_ERROR(cudaErrorDeviceAlreadyInUse, "device already in use by another thread"),
    SIMCUDART_ERROR(cudaErrorPeerAccessUnsupported, "peer access not supported"),
    SIMCUDART_ERROR(cudaErrorInvalidPtx, "PTX JIT compilation failed"),
    SIMCUDART_ERROR(cudaErrorInvalidGraphicsContext, "invalid graphics context"),
    SIMCUDART_ERROR(cudaErrorNvlinkUncorrectable, "uncorrectable NVLink error"),
    SIMCUDART_ERROR(cudaErrorJitCompilerNotFound, "PTX JIT compiler not found"),
    SIMCUDART_ERROR(cudaErrorUnsupportedPtxVersion, "unsupported PTX version"),
    SIMCUDART_ERROR(cudaErrorJitCompilationDisabled, "PTX JIT compilation disabled"),
    SIMCUDART_ERROR(cudaErrorUnsupportedExecAffinity, "execution affinity not supported"),
    SIMCUDART_ERROR(cudaErrorUnsupportedDevSideSync, "device-side synchronize not supported"),
    SIMCUDART_ERROR(cudaErrorContained, "contained device error"),
    SIMCUDART_ERROR(cudaErrorInvalidSource, "invalid kernel source"),
    SIMCUDART_ERROR(cudaErrorFileNotFound, "file not found"),
    SIMCUDART_ERROR(cudaErrorSharedObjectSymbolNotFound, "shared object symbol not found"),
    SIMCUDART_ERROR(cudaErrorSharedObjectInitFailed, "shared object initialization failed"),
    SIMCUDART_ERROR(cudaErrorOperatingSystem, "operating system call failed"),
    SIMCUDART_ERROR(cudaErrorInvalidResourceHandle, "invalid resource handle"),
    SIMCUDART_ERROR(cudaErrorIllegalState, "operation not allowed in the current state"),
    SIMCUDART_ERROR(cudaErrorLossyQuery, "query would lose information"),
    SIMCUDART_ERROR(cudaErrorSymbolNotFound, "named symbol not found"),
    SIMCUDART_ERROR(cudaErrorNotReady, "device not ready"),
    SIMCUDART_ERROR(cudaErrorIllegalAddress, "illegal memory access"),
    SIMCUDART_ERROR(cudaErrorLaunchOutOfResources, "too many resources requested for launch"),
    SIMCUDART_ERROR(cudaErrorLaunchTimeout, "launch timed out"),
    SIMCUDART_ERROR(cudaErrorLaunchIncompatibleTexturing, "launch uses incompatible texturing"),
    SIMCUDART_ERROR(cudaErrorPeerAccessAlreadyEnabled, "peer access already enabled"),
    SIMCUDART_ERROR(cudaErrorPeerAccessNotEnabled, "peer access not enabled"),
    SIMCUDART_ERROR(cudaErrorSetOnActiveProcess, "device already active in this process"),
    SIMCUDART_ERROR(cudaErrorContextIsDestroyed, "context destroyed"),
    SIMCUDART_ERROR(cudaErrorAssert, "device-side assert triggered"),
    SIMCUDART_ERROR(cudaErrorTooManyPeers, "too many peer devices"),
    SIMCUDART_ERROR(cudaErrorHostMemoryAlreadyRegistered, "host memory already registered"),
    SIMCUDART_ERROR(cudaErrorHostMemoryNotRegistered, "host memory not registered"),
    SIMCUDART_ERROR(cudaErrorHardwareStackError, "hardware stack error"),
    SIMCUDART_ERROR(cudaErrorIllegalInstruction, "illegal instruction"),
    SIMCUDART_ERROR(cudaErrorMisalignedAddress, "misaligned address"),
    SIMCUDART_ERROR(cudaErrorInvalidAddressSpace, "operation on the wrong address space"),
    SIMCUDART_ERROR(cudaErrorInvalidPc, "invalid program counter"),
    SIMCUDART_ERROR(cudaErrorLaunchFailure, "unspecified launch failure"),
    SIMCUDART_ERROR(cudaErrorCooperativeLaunchTooLarge, "cooperative launch too large"),
    SIMCUDART_ERROR(cudaErrorTensorMemoryLeak, "tensor memory not freed"),
    SIMCUDART_ERROR(cudaErrorNotPermitted, "operation not permitted"),
    SIMCUDART_ERROR(cudaErrorNotSupported, "operation not supported"),
    SIMCUDART_ERROR(cudaErrorSystemNotReady, "system not ready"),
    SIMCUDART_ERROR(cudaErrorSystemDriverMismatch, "driver and kernel module versions differ"),
    SIMCUDART_ERROR(cudaErrorCompatNotSupportedOnDevice, "forward compatibility not supported on this device"),
    SIMCUDART_ERROR(cudaErrorMpsConnectionFailed, "MPS server connection failed"),
    SIMCUDART_ERROR(cudaErrorMpsRpcFailure, "MPS remote call failed"),
    SIMCUDART_ERROR(cudaErrorMpsServerNotReady, "MPS server not ready"),
    SIMCUDART_ERROR(cudaErrorMpsMaxClientsReached, "MPS client limit reached"),
    SIMCUDART_ERROR(cudaErrorMpsMaxConnectionsReached, "MPS connection limit reached"),
    SIMCUDART_ERROR(cudaErrorMpsClientTerminated, "MPS client terminated"),
    SIMCUDART_ERROR(cudaErrorCdpNotSupported, "dynamic parallelism not supported"),
    SIMCUDART_ERROR(cudaErrorCdpVersionMismatch, "dynamic parallelism version mismatch"),
    SIMCUDART_ERROR(cudaErrorStreamCaptureUnsupported, "operation not permitted while stream is capturing"),
    SIMCUDART_ERROR(cudaErrorStreamCaptureInvalidated, "stream capture invalidated by an earlier error"),
    SIMCUDART_ERROR(cudaErrorStreamCaptureMerge, "would merge two separate captures"),
    SIMCUDART_ERROR(cudaErrorStreamCaptureUnmatched, "capture was not started on this stream"),
    SIMCUDART_ERROR(cudaErrorStreamCaptureUnjoined, "capture forked but did not join back"),
    SIMCUDART_ERROR(cudaErrorStreamCaptureIsolation, "dependency would cross the capture boundary"),
    SIMCUDART_ERROR(cudaErrorStreamCaptureImplicit, "implicit dependency on a capturing stream"),
    SIMCUDART_ERROR(cudaErrorCapturedEvent, "operation not permitted on a captured event"),
    SIMCUDART_ERROR(cudaErrorStreamCaptureWrongThread, "capture ended from a different thread"),
    SIMCUDART_ERROR(cudaErrorTimeout, "wait timed out"),
    SIMCUDART_ERROR(cudaErrorGraphExecUpdateFailure, "graph exec update violated its constraints"),
    SIMCUDART_ERROR(cudaErrorExternalDevice, "error on an external device"),
    SIMCUDART_ERROR(cudaErrorInvalidClusterSize, "invalid cluster size"),
    SIMCUDART_ERROR(cudaErrorFunctionNotLoaded, "function not loaded"),
    SIMCUDART_ERROR(cudaErrorInvalidResourceType, "invalid resource type"),
    SIMCUDART_ERROR(cudaErrorInvalidResourceConfiguration, "invalid resource configuration"),
    SIMCUDART_ERROR(cudaErrorUnknown, "unknown error"),
};
#undef SIMCUDART_ERROR

constexpr const char* kUnrecognised = "unrecognized error code";

const ErrorText* find_text(int error) noexcept {
  for (const ErrorText& entry : kErrorTexts) {
    if (entry.error == error) return &entry;
  }
  return nullptr;
}

// Per thread, like the real runtime: one thread's failure never shows in another's
// cudaGetLastError.
thread_local cudaError_t t_last_error = cudaSuccess;

}  // namespace

cudaError_t to_runtime_error(CUresult result) noexcept {
  for (const DriverToRuntime& entry : kDriverToRuntime) {
    if (entry.driver == result) return entry.runtime;
  }
  return cudaErrorUnknown;
}

cudaError_t record_error(cudaError_t error) noexcept {
  if (error != cudaSuccess) t_last_error = error;
  return error;
}

void clear_last_error() noexcept { t_last_error = cudaSuccess; }

}  // namespace simcudart

SIMCUDART_API cudaError_t cudaGetLastError(void) {
  const cudaError_t error = simcudart::t_last_error;
  simcudart::t_last_error = cudaSuccess;
  return error;
}

SIMCUDART_API cudaError_t cudaPeekAtLastError(void) { return simcudart::t_last_error; }

SIMCUDART_API const char* cudaGetErrorName(cudaError_t error) {
  const simcudart::ErrorText* text = simcudart::find_text(simcudart::enum_value(error));
  return text ? text->name : simcudart::kUnrecognised;
}

SIMCUDART_API const char* cudaGetErrorString(cudaError_t error) {
  const simcudart::ErrorText* text = simcudart::find_text(simcudart::enum_value(error));
  return text ? text->description : simcudart::kUnrecognised;
}
