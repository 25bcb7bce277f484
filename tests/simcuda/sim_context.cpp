// Device identity (UUID, PCI ids), peer access, the context stack and primary-context state and flags.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>

#include "sim_state.h"

namespace simcuda {
namespace {

bool valid_device(const State& s, CUdevice dev) { return dev >= 0 && dev < static_cast<int>(s.devices.size()); }

// A UUID that is stable per device ordinal and tells the simulator's devices apart ("GPU-51c0da00-...").
CUuuid device_uuid(CUdevice dev) {
  CUuuid u{};
  const unsigned char prefix[8] = {0x51, 0xc0, 0xda, 0x00, 0x9e, 0x4b, 0x40, 0x0b};
  std::memcpy(u.bytes, prefix, sizeof prefix);
  u.bytes[15] = static_cast<char>(dev);
  return u;
}

CUresult get_uuid(CUuuid* uuid, CUdevice dev) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!uuid) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(s, dev)) return CUDA_ERROR_INVALID_DEVICE;
  *uuid = device_uuid(dev);
  return CUDA_SUCCESS;
}

// Flags cuDevicePrimaryCtxSetFlags accepts: one scheduling policy, LMEM_RESIZE_TO_MAX, COREDUMP/SYNC_MEMOPS bits.
constexpr unsigned kPrimaryFlags = CU_CTX_SCHED_MASK | CU_CTX_MAP_HOST | CU_CTX_LMEM_RESIZE_TO_MAX |
                                   CU_CTX_COREDUMP_ENABLE | CU_CTX_USER_COREDUMP_ENABLE | CU_CTX_SYNC_MEMOPS;

// The context below the current one on the calling thread's stack becomes current; popping the bottom
// of the stack leaves none.
void pop_current_context() {
  auto& stack = context_stack();
  Context* below = nullptr;
  if (!stack.empty()) {
    below = stack.back();
    stack.pop_back();
  }
  set_current_context(below);
}

}  // namespace
}  // namespace simcuda

using namespace simcuda;

SIM_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  SIM_ENTER("cuDeviceGetUuid_v2");
  return get_uuid(uuid, dev);
}

#undef cuDeviceGetUuid
extern "C" CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev);
SIM_EXPORT CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  SIM_ENTER("cuDeviceGetUuid");
  return get_uuid(uuid, dev);
}

// "DDDD:BB:DD.F", domain 0, bus 0x18 + ordinal (CU_DEVICE_ATTRIBUTE_PCI_BUS_ID), device 0, function 0.
SIM_EXPORT CUresult cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev) {
  SIM_ENTER("cuDeviceGetPCIBusId");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!pciBusId || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(s, dev)) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(pciBusId, static_cast<std::size_t>(len), "0000:%02x:00.0", 0x18 + dev);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetByPCIBusId(CUdevice* dev, const char* pciBusId) {
  SIM_ENTER("cuDeviceGetByPCIBusId");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!dev || !pciBusId) return CUDA_ERROR_INVALID_VALUE;
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  // Both forms the driver accepts: domain:bus:device.function and bus:device.function.
  if (std::sscanf(pciBusId, "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4) {
    domain = 0;
    if (std::sscanf(pciBusId, "%x:%x.%x", &bus, &device, &function) != 3) return CUDA_ERROR_INVALID_VALUE;
  }
  const int ordinal = static_cast<int>(bus) - 0x18;
  if (domain != 0 || device != 0 || function != 0 || !valid_device(s, ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceCanAccessPeer(int* canAccessPeer, CUdevice dev, CUdevice peerDev) {
  SIM_ENTER("cuDeviceCanAccessPeer");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!canAccessPeer) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(s, dev) || !valid_device(s, peerDev)) return CUDA_ERROR_INVALID_DEVICE;
  // All simulated devices share one NVLink domain; a device is not its own peer.
  *canAccessPeer = dev != peerDev ? 1 : 0;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetP2PAttribute(int* value, CUdevice_P2PAttribute attrib, CUdevice srcDevice,
                                            CUdevice dstDevice) {
  SIM_ENTER("cuDeviceGetP2PAttribute");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(s, srcDevice) || !valid_device(s, dstDevice) || srcDevice == dstDevice)
    return CUDA_ERROR_INVALID_DEVICE;
  switch (attrib) {
    case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK:
      *value = 0;
      break;
    case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED:
    case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED:
    case CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED:
      *value = 1;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int flags) {
  SIM_ENTER("cuCtxEnablePeerAccess");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  int device = 0;
  if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  Context* peer = context_from_handle(s, peerContext);
  if (!peer || peer->retains == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (peer->device == device) return CUDA_ERROR_INVALID_DEVICE;
  Context* self = get_current_context(s);
  if (!self->peers.insert(peer->device).second) return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxDisablePeerAccess(CUcontext peerContext) {
  SIM_ENTER("cuCtxDisablePeerAccess");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  int device = 0;
  if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
  Context* peer = context_from_handle(s, peerContext);
  if (!peer) return CUDA_ERROR_INVALID_CONTEXT;
  if (get_current_context(s)->peers.erase(peer->device) == 0) return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  SIM_ENTER("cuCtxPushCurrent_v2");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  Context* c = context_from_handle(s, ctx);
  if (!c || c->retains == 0) return CUDA_ERROR_INVALID_CONTEXT;
  context_stack().push_back(get_current_context(s));
  set_current_context(c);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
  SIM_ENTER("cuCtxPopCurrent_v2");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  Context* current = get_current_context(s);
  if (!current) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx) *pctx = reinterpret_cast<CUcontext>(current);
  pop_current_context();
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int* version) {
  SIM_ENTER("cuCtxGetApiVersion");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  Context* c = ctx ? context_from_handle(s, ctx) : get_current_context(s);
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  // The API version contexts of the CUDA 3.2+ ABI report (the real driver answers 3020 too).
  *version = 3020;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetFlags(unsigned int* flags) {
  SIM_ENTER("cuCtxGetFlags");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  int device = 0;
  if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  *flags = get_current_context(s)->flags;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxSetFlags(unsigned int flags) {
  SIM_ENTER("cuCtxSetFlags");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  int device = 0;
  if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
  if ((flags & ~kPrimaryFlags) != 0 || (flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_MASK)
    return CUDA_ERROR_INVALID_VALUE;
  get_current_context(s)->flags = flags;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
  SIM_ENTER("cuCtxGetStreamPriorityRange");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  int device = 0;
  if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
  if (leastPriority) *leastPriority = 0;
  if (greatestPriority) *greatestPriority = kGreatestStreamPriority;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  SIM_ENTER("cuDevicePrimaryCtxGetState");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(s, dev)) return CUDA_ERROR_INVALID_DEVICE;
  const Context& c = s.devices[static_cast<std::size_t>(dev)].primary;
  *flags = c.flags;
  *active = c.retains > 0 ? 1 : 0;
  return CUDA_SUCCESS;
}

static CUresult set_primary_flags(CUdevice dev, unsigned int flags) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!valid_device(s, dev)) return CUDA_ERROR_INVALID_DEVICE;
  if ((flags & ~kPrimaryFlags) != 0 || (flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_MASK)
    return CUDA_ERROR_INVALID_VALUE;
  // Since CUDA 11 the flags may change while the context is active (_v2 semantics).
  s.devices[static_cast<std::size_t>(dev)].primary.flags = flags;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  SIM_ENTER("cuDevicePrimaryCtxSetFlags_v2");
  return set_primary_flags(dev, flags);
}

#undef cuDevicePrimaryCtxSetFlags
extern "C" CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags);
SIM_EXPORT CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
  SIM_ENTER("cuDevicePrimaryCtxSetFlags");
  {
    // The CUDA 7.0 ABI refuses to change an active context's flags.
    std::lock_guard<std::mutex> guard(lock());
    State& s = state();
    if (s.initialized && valid_device(s, dev) && s.devices[static_cast<std::size_t>(dev)].primary.retains > 0)
      return CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE;
  }
  return set_primary_flags(dev, flags);
}

// Resets the primary context's state: its flags and peer accesses, and the cuMemAlloc memory of its
// device, as the driver destroys a context's allocations. The retain count stays (the real call
// leaves it to the retainers too).
static CUresult reset_primary(CUdevice dev) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!valid_device(s, dev)) return CUDA_ERROR_INVALID_DEVICE;
  Context& c = s.devices[static_cast<std::size_t>(dev)].primary;
  c.flags = 0;
  c.peers.clear();
  release_device_allocations(s, dev);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  SIM_ENTER("cuDevicePrimaryCtxReset_v2");
  return reset_primary(dev);
}

#undef cuDevicePrimaryCtxReset
extern "C" CUresult cuDevicePrimaryCtxReset(CUdevice dev);
SIM_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  SIM_ENTER("cuDevicePrimaryCtxReset");
  return reset_primary(dev);
}

// ---- created (non-primary) contexts ----

namespace simcuda {
namespace {

// cuCtxCreate: a new context on `dev` with a usage count of 1, pushed over the calling thread's current
// one, which a later cuCtxPopCurrent restores (cuda.h). It holds SIMCUDA_CONTEXT_BYTES like a primary one.
CUresult create_context(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(s, dev)) return CUDA_ERROR_INVALID_DEVICE;
  if ((flags & ~kPrimaryFlags) != 0 || (flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_MASK)
    return CUDA_ERROR_INVALID_VALUE;
  if (!charge_device(s, dev, s.config.context_bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  auto c = std::make_unique<Context>();
  c->device = dev;
  c->primary = false;
  c->retains = 1;
  c->charged = s.config.context_bytes;
  c->flags = flags;
  Context* created = c.get();
  s.created_contexts.push_back(std::move(c));
  context_stack().push_back(get_current_context(s));
  set_current_context(created);
  *pctx = reinterpret_cast<CUcontext>(created);
  return CUDA_SUCCESS;
}

// Removes every occurrence of `c` from the calling thread's stack below the current context.
void forget_in_stack(const Context* c) {
  auto& stack = context_stack();
  std::erase(stack, c);
}

// cuCtxDestroy: frees the context's resources (cuMemAlloc, cuMemAllocManaged and cuMemAllocHost memory;
// not cuMemCreate or pool memory, cuda.h) and, if it is current to the calling thread, pops it as
// cuCtxPopCurrent would. Other threads keep it current and get CUDA_ERROR_CONTEXT_IS_DESTROYED.
// A primary context is not the caller's to destroy (cuDevicePrimaryCtxRelease is): INVALID_CONTEXT.
CUresult destroy_context(CUcontext ctx) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  Context* c = context_from_handle(s, ctx);
  if (!c || c->primary || c->destroyed) return CUDA_ERROR_INVALID_CONTEXT;
  release_context_memory(s, c);
  uncharge_device(s, c->device, c->charged);
  c->charged = 0;
  c->retains = 0;
  c->destroyed = true;
  c->peers.clear();
  if (get_current_context(s) == c) pop_current_context();
  forget_in_stack(c);
  return CUDA_SUCCESS;
}

// cuCtxCreate_v3's and _v4's execution affinity (SM count limits) exists only under MPS, which the
// simulated device does not run: CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY, as a device without it answers.
CUresult check_affinity(const CUexecAffinityParam* params, int count) {
  if (count < 0 || (count > 0 && !params)) return CUDA_ERROR_INVALID_VALUE;
  return count > 0 ? CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY : CUDA_SUCCESS;
}

}  // namespace
}  // namespace simcuda

SIM_EXPORT CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* ctxCreateParams, unsigned int flags,
                                   CUdevice dev) {
  SIM_ENTER("cuCtxCreate_v4");
  SIM_GUARDED_BEGIN
  if (ctxCreateParams) {
    // Setting both is undefined (cuda.h); refused here. CIG mode needs a graphics client: not supported.
    if (ctxCreateParams->execAffinityParams && ctxCreateParams->cigParams) return CUDA_ERROR_INVALID_VALUE;
    if (ctxCreateParams->cigParams) return CUDA_ERROR_NOT_SUPPORTED;
    if (ctxCreateParams->execAffinityParams || ctxCreateParams->numExecAffinityParams != 0) {
      if (CUresult r = check_affinity(ctxCreateParams->execAffinityParams, ctxCreateParams->numExecAffinityParams);
          r != CUDA_SUCCESS)
        return r;
    }
  }
  return create_context(pctx, flags, dev);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* paramsArray, int numParams, unsigned int flags,
                                   CUdevice dev) {
  SIM_ENTER("cuCtxCreate_v3");
  SIM_GUARDED_BEGIN
  if (CUresult r = check_affinity(paramsArray, numParams); r != CUDA_SUCCESS) return r;
  return create_context(pctx, flags, dev);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  SIM_ENTER("cuCtxCreate_v2");
  SIM_GUARDED_BEGIN
  return create_context(pctx, flags, dev);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  SIM_ENTER("cuCtxDestroy_v2");
  SIM_GUARDED_BEGIN
  return destroy_context(ctx);
  SIM_GUARDED_END
}

// The CUDA 2.0 ABIs, which cuda.h's macros otherwise rename; same arguments, same semantics.
#undef cuCtxCreate
extern "C" CUresult cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev);
SIM_EXPORT CUresult cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  SIM_ENTER("cuCtxCreate");
  SIM_GUARDED_BEGIN
  return create_context(pctx, flags, dev);
  SIM_GUARDED_END
}

#undef cuCtxDestroy
extern "C" CUresult cuCtxDestroy(CUcontext ctx);
SIM_EXPORT CUresult cuCtxDestroy(CUcontext ctx) {
  SIM_ENTER("cuCtxDestroy");
  SIM_GUARDED_BEGIN
  return destroy_context(ctx);
  SIM_GUARDED_END
}
