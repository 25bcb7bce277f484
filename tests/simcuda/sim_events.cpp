// Events, stream waits, IPC event handles, stream priorities, flags and host callbacks.
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "sim_state.h"

namespace simcuda {
namespace {

constexpr unsigned kEventFlags = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
constexpr std::uint64_t kIpcEventMagic = 0x51c0da1bdULL;

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

Event* find_event(State& s, CUevent e) {
  auto* ev = reinterpret_cast<Event*>(e);
  return s.events.count(ev) ? ev : nullptr;
}

CUresult create_event(CUevent* out, unsigned flags) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  int device = 0;
  if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
  if (!out || (flags & ~kEventFlags) != 0) return CUDA_ERROR_INVALID_VALUE;
  // An interprocess event must not time (cuda.h: CU_EVENT_INTERPROCESS requires CU_EVENT_DISABLE_TIMING).
  if ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING)) return CUDA_ERROR_INVALID_VALUE;
  auto* ev = new Event;
  ev->flags = flags;
  s.events.insert(ev);
  *out = reinterpret_cast<CUevent>(ev);
  return CUDA_SUCCESS;
}

// Work already ran when it was enqueued, so recording stamps the time now and completes at once. On a
// capturing stream the record joins the capture, which has no dependency edges here: it is accepted.
CUresult record_event(CUevent e, CUstream stream, unsigned flags, bool per_thread) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  int device = 0;
  if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
  if (flags & ~static_cast<unsigned>(CU_EVENT_RECORD_EXTERNAL)) return CUDA_ERROR_INVALID_VALUE;
  Event* ev = find_event(s, e);
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  Stream* st = resolve_stream(s, stream, per_thread);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  if (st->capture) return st->capture->invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
  ev->recorded = true;
  ev->time_ns = now_ns();
  return CUDA_SUCCESS;
}

CUresult wait_event(CUstream stream, CUevent e, unsigned flags, bool per_thread) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  int device = 0;
  if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
  if (flags & ~static_cast<unsigned>(CU_EVENT_WAIT_EXTERNAL)) return CUDA_ERROR_INVALID_VALUE;
  if (!find_event(s, e)) return CUDA_ERROR_INVALID_HANDLE;
  if (!resolve_stream(s, stream, per_thread)) return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;  // the event's work is complete: nothing to wait for
}

CUresult stream_priority(CUstream stream, int* priority, bool per_thread) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!priority) return CUDA_ERROR_INVALID_VALUE;
  Stream* st = resolve_stream(s, stream, per_thread);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  *priority = st->priority;
  return CUDA_SUCCESS;
}

CUresult stream_flags(CUstream stream, unsigned* flags, bool per_thread) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  Stream* st = resolve_stream(s, stream, per_thread);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  *flags = st->flags;
  return CUDA_SUCCESS;
}

CUresult add_callback(CUstream stream, CUstreamCallback callback, void* user, unsigned flags, bool per_thread) {
  {
    std::lock_guard<std::mutex> guard(lock());
    State& s = state();
    int device = 0;
    if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
    if (!callback || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    Stream* st = resolve_stream(s, stream, per_thread);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    if (st->capture) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  // Earlier work is done, so the callback runs now, outside the lock (it may call the driver's queries).
  callback(stream, CUDA_SUCCESS, user);
  return CUDA_SUCCESS;
}

CUresult launch_host(CUstream stream, CUhostFn fn, void* user, bool per_thread) {
  {
    std::lock_guard<std::mutex> guard(lock());
    State& s = state();
    int device = 0;
    if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
    if (!fn) return CUDA_ERROR_INVALID_VALUE;
    Stream* st = resolve_stream(s, stream, per_thread);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    if (st->capture) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  fn(user);
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace simcuda

using namespace simcuda;

SIM_EXPORT CUresult cuEventCreate(CUevent* phEvent, unsigned int Flags) {
  SIM_ENTER("cuEventCreate");
  SIM_GUARDED_BEGIN
  return create_event(phEvent, Flags);
  SIM_GUARDED_END
}

static CUresult destroy_event(CUevent hEvent) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  Event* ev = find_event(s, hEvent);
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  s.events.erase(ev);
  delete ev;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuEventDestroy_v2(CUevent hEvent) {
  SIM_ENTER("cuEventDestroy_v2");
  return destroy_event(hEvent);
}

// The CUDA 2.0 ABI of the same call, which cuda.h's macro otherwise renames to _v2.
#undef cuEventDestroy
extern "C" CUresult cuEventDestroy(CUevent hEvent);
SIM_EXPORT CUresult cuEventDestroy(CUevent hEvent) {
  SIM_ENTER("cuEventDestroy");
  return destroy_event(hEvent);
}

SIM_EXPORT CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
  SIM_ENTER("cuEventRecord");
  SIM_GUARDED_BEGIN
  return record_event(hEvent, hStream, 0, false);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream) {
  SIM_ENTER("cuEventRecord");
  SIM_GUARDED_BEGIN
  return record_event(hEvent, hStream, 0, true);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags) {
  SIM_ENTER("cuEventRecordWithFlags");
  SIM_GUARDED_BEGIN
  return record_event(hEvent, hStream, flags, false);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags) {
  SIM_ENTER("cuEventRecordWithFlags");
  SIM_GUARDED_BEGIN
  return record_event(hEvent, hStream, flags, true);
  SIM_GUARDED_END
}

// Recorded work has always completed; an event never recorded counts as complete too (cuda.h).
SIM_EXPORT CUresult cuEventQuery(CUevent hEvent) {
  SIM_ENTER("cuEventQuery");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  return find_event(s, hEvent) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

SIM_EXPORT CUresult cuEventSynchronize(CUevent hEvent) {
  SIM_ENTER("cuEventSynchronize");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  return find_event(s, hEvent) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult elapsed(float* ms, CUevent start, CUevent end) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!ms) return CUDA_ERROR_INVALID_VALUE;
  Event* a = find_event(s, start);
  Event* b = find_event(s, end);
  if (!a || !b) return CUDA_ERROR_INVALID_HANDLE;
  // Timing-disabled or never-recorded events have no time to subtract (cuda.h: CUDA_ERROR_INVALID_HANDLE).
  if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  if (!a->recorded || !b->recorded) return CUDA_ERROR_INVALID_HANDLE;
  *ms = static_cast<float>(static_cast<double>(static_cast<std::int64_t>(b->time_ns - a->time_ns)) / 1e6);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuEventElapsedTime_v2(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
  SIM_ENTER("cuEventElapsedTime_v2");
  SIM_GUARDED_BEGIN
  return elapsed(pMilliseconds, hStart, hEnd);
  SIM_GUARDED_END
}

#undef cuEventElapsedTime
extern "C" CUresult cuEventElapsedTime(float* pMilliseconds, CUevent hStart, CUevent hEnd);
SIM_EXPORT CUresult cuEventElapsedTime(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
  SIM_ENTER("cuEventElapsedTime");
  SIM_GUARDED_BEGIN
  return elapsed(pMilliseconds, hStart, hEnd);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  SIM_ENTER("cuStreamWaitEvent");
  SIM_GUARDED_BEGIN
  return wait_event(hStream, hEvent, Flags, false);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  SIM_ENTER("cuStreamWaitEvent");
  SIM_GUARDED_BEGIN
  return wait_event(hStream, hEvent, Flags, true);
  SIM_GUARDED_END
}

// The handle names the exporting process and its event; the importer gets an event of its own with
// the same flags. Since an exporter's recorded work has completed, that event is as complete as the original.
SIM_EXPORT CUresult cuIpcGetEventHandle(CUipcEventHandle* pHandle, CUevent event) {
  SIM_ENTER("cuIpcGetEventHandle");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!pHandle) return CUDA_ERROR_INVALID_VALUE;
  Event* ev = find_event(s, event);
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  if (!(ev->flags & CU_EVENT_INTERPROCESS)) return CUDA_ERROR_INVALID_VALUE;
  std::memset(pHandle->reserved, 0, sizeof pHandle->reserved);
  const std::uint64_t fields[4] = {kIpcEventMagic, static_cast<std::uint64_t>(getpid()),
                                   reinterpret_cast<std::uint64_t>(ev), ev->flags};
  std::memcpy(pHandle->reserved, fields, sizeof fields);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuIpcOpenEventHandle(CUevent* phEvent, CUipcEventHandle handle) {
  SIM_ENTER("cuIpcOpenEventHandle");
  SIM_GUARDED_BEGIN
  std::uint64_t fields[4] = {};
  std::memcpy(fields, handle.reserved, sizeof fields);
  if (!phEvent) return CUDA_ERROR_INVALID_VALUE;
  if (fields[0] != kIpcEventMagic) return CUDA_ERROR_INVALID_HANDLE;
  if (fields[1] == static_cast<std::uint64_t>(getpid())) return CUDA_ERROR_INVALID_CONTEXT;
  return create_event(phEvent, static_cast<unsigned>(fields[3]));
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuStreamCreateWithPriority(CUstream* phStream, unsigned int flags, int priority) {
  SIM_ENTER("cuStreamCreateWithPriority");
  SIM_GUARDED_BEGIN
  CUresult r = cuStreamCreate(phStream, flags);
  if (r != CUDA_SUCCESS) return r;
  // Out-of-range priorities are clamped to the range, as cuda.h documents.
  std::lock_guard<std::mutex> guard(lock());
  reinterpret_cast<Stream*>(*phStream)->priority =
      priority < kGreatestStreamPriority ? kGreatestStreamPriority : (priority > 0 ? 0 : priority);
  return CUDA_SUCCESS;
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuStreamGetPriority(CUstream hStream, int* priority) {
  SIM_ENTER("cuStreamGetPriority");
  return stream_priority(hStream, priority, false);
}

SIM_EXPORT CUresult cuStreamGetPriority_ptsz(CUstream hStream, int* priority) {
  SIM_ENTER("cuStreamGetPriority");
  return stream_priority(hStream, priority, true);
}

SIM_EXPORT CUresult cuStreamGetFlags(CUstream hStream, unsigned int* flags) {
  SIM_ENTER("cuStreamGetFlags");
  return stream_flags(hStream, flags, false);
}

SIM_EXPORT CUresult cuStreamGetFlags_ptsz(CUstream hStream, unsigned int* flags) {
  SIM_ENTER("cuStreamGetFlags");
  return stream_flags(hStream, flags, true);
}

SIM_EXPORT CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void* userData,
                                        unsigned int flags) {
  SIM_ENTER("cuStreamAddCallback");
  SIM_GUARDED_BEGIN
  return add_callback(hStream, callback, userData, flags, false);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback, void* userData,
                                             unsigned int flags) {
  SIM_ENTER("cuStreamAddCallback");
  SIM_GUARDED_BEGIN
  return add_callback(hStream, callback, userData, flags, true);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void* userData) {
  SIM_ENTER("cuLaunchHostFunc");
  SIM_GUARDED_BEGIN
  return launch_host(hStream, fn, userData, false);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void* userData) {
  SIM_ENTER("cuLaunchHostFunc");
  SIM_GUARDED_BEGIN
  return launch_host(hStream, fn, userData, true);
  SIM_GUARDED_END
}
