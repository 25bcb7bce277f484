// Conformance client: streams, events, stream capture in each mode, graph instantiate and launch.
#include "conformance.h"

using conf::handle;
using conf::ptr;

namespace {

void capture_status(CUstream s) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  CALL("cuStreamIsCapturing", handle("S", s), cuStreamIsCapturing(s, &st), "status=" + std::to_string(st));
}

void read_back(CUdeviceptr p, size_t bytes) {
  unsigned char host[16] = {};
  CALL("cuMemcpyDtoH", ptr(p) + " " + std::to_string(bytes), cuMemcpyDtoH(host, p, bytes), "bytes=" + conf::hex(host, bytes));
}

}  // namespace

int main() {
  conf::primary_context();
  CUdeviceptr d = 0;
  CALL("cuMemAlloc", "4096", cuMemAlloc(&d, 4096), "dptr=" + conf::add_block("D", d, 4096));

  // Streams.
  CUstream s = nullptr, nb = nullptr;
  CALL("cuStreamCreate", "DEFAULT", cuStreamCreate(&s, CU_STREAM_DEFAULT), "stream=" + handle("S", s));
  CALL("cuStreamCreate", "NON_BLOCKING", cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING), "stream=" + handle("S", nb));
  CUstream bad = nullptr;
  CALL("cuStreamCreate", "flags=4", cuStreamCreate(&bad, 4));
  unsigned int flags = 99;
  CALL("cuStreamGetFlags", handle("S", nb), cuStreamGetFlags(nb, &flags), "flags=" + std::to_string(flags));
  int least = 99, greatest = 99;
  CALL("cuCtxGetStreamPriorityRange", "", cuCtxGetStreamPriorityRange(&least, &greatest),
       "least=" + std::to_string(least) + " greatest<=least=" + std::to_string(greatest <= least));
  CUstream prio = nullptr;
  CALL("cuStreamCreateWithPriority", "NON_BLOCKING greatest", cuStreamCreateWithPriority(&prio, CU_STREAM_NON_BLOCKING, greatest),
       "stream=" + handle("S", prio));
  int p = 99;
  CALL("cuStreamGetPriority", handle("S", prio), cuStreamGetPriority(prio, &p), "is greatest=" + std::to_string(p == greatest));
  CUcontext c = nullptr;
  CALL("cuStreamGetCtx", handle("S", s), cuStreamGetCtx(s, &c), "ctx=" + handle("C", c));
  CALL("cuStreamGetCtx", "null", cuStreamGetCtx(nullptr, &c), "ctx=" + handle("C", c));
  CALL("cuStreamGetCtx", "PER_THREAD", cuStreamGetCtx(CU_STREAM_PER_THREAD, &c), "ctx=" + handle("C", c));
  CUgreenCtx green = reinterpret_cast<CUgreenCtx>(&c);
  CALL("cuStreamGetCtx_v2", handle("S", s), cuStreamGetCtx_v2(s, &c, &green),
       "ctx=" + handle("C", c) + " green=" + handle("GC", green));
  CALL("cuMemsetD8Async", ptr(d) + " 0x01 16 " + handle("S", s), cuMemsetD8Async(d, 0x01, 16, s));
  CALL("cuStreamSynchronize", handle("S", s), cuStreamSynchronize(s));
  CALL("cuStreamQuery", handle("S", s), cuStreamQuery(s));
  read_back(d, 4);

  // Events.
  CUevent start = nullptr, end = nullptr, untimed = nullptr;
  CALL("cuEventCreate", "DEFAULT", cuEventCreate(&start, CU_EVENT_DEFAULT), "event=" + handle("E", start));
  CALL("cuEventCreate", "BLOCKING_SYNC", cuEventCreate(&end, CU_EVENT_BLOCKING_SYNC), "event=" + handle("E", end));
  CALL("cuEventCreate", "DISABLE_TIMING", cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING), "event=" + handle("E", untimed));
  CUevent bad_e = nullptr;
  CALL("cuEventCreate", "INTERPROCESS without DISABLE_TIMING", cuEventCreate(&bad_e, CU_EVENT_INTERPROCESS));
  CALL("cuEventQuery", handle("E", start) + " never recorded", cuEventQuery(start));
  float ms = -1;
  CALL("cuEventElapsedTime", "never recorded", cuEventElapsedTime(&ms, start, end));
  CALL("cuEventRecord", handle("E", start) + " " + handle("S", s), cuEventRecord(start, s));
  CALL("cuMemsetD8Async", ptr(d) + " 0x02 16 " + handle("S", s), cuMemsetD8Async(d, 0x02, 16, s));
  CALL("cuEventRecord", handle("E", end) + " " + handle("S", s), cuEventRecord(end, s));
  CALL("cuEventRecord", handle("E", untimed) + " " + handle("S", s), cuEventRecord(untimed, s));
  CALL("cuStreamWaitEvent", handle("S", nb) + " " + handle("E", end), cuStreamWaitEvent(nb, end, 0));
  CALL("cuEventSynchronize", handle("E", end), cuEventSynchronize(end));
  CALL("cuEventQuery", handle("E", end), cuEventQuery(end));
  CALL("cuEventElapsedTime", handle("E", start) + " " + handle("E", end), cuEventElapsedTime(&ms, start, end),
       "ms>=0=" + std::to_string(ms >= 0));
  CALL("cuEventElapsedTime", handle("E", start) + " " + handle("E", untimed) + " timing disabled",
       cuEventElapsedTime(&ms, start, untimed));
  read_back(d, 4);

  // Capture: the legacy NULL stream cannot be captured; a created stream can, in each mode.
  CALL("cuStreamBeginCapture", "null GLOBAL", cuStreamBeginCapture(nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL));
  capture_status(s);
  CALL("cuStreamBeginCapture", handle("S", s) + " GLOBAL", cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  capture_status(s);
  CALL("cuStreamBeginCapture", handle("S", s) + " GLOBAL again", cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CALL("cuMemsetD8Async", ptr(d) + " 0x03 8 " + handle("S", s) + " captured", cuMemsetD8Async(d, 0x03, 8, s));
  CUgraph g = nullptr;
  CALL("cuStreamEndCapture", handle("S", s), cuStreamEndCapture(s, &g), "graph=" + handle("G", g));
  capture_status(s);
  size_t nodes = 0;
  CALL("cuGraphGetNodes", handle("G", g) + " count", cuGraphGetNodes(g, nullptr, &nodes), "nodes=" + std::to_string(nodes));
  CUgraphNode filled[3] = {nullptr, reinterpret_cast<CUgraphNode>(&nodes), reinterpret_cast<CUgraphNode>(&nodes)};
  size_t asked = 3;
  CALL("cuGraphGetNodes", handle("G", g) + " fill 3", cuGraphGetNodes(g, filled, &asked),
       "numNodes=" + std::to_string(asked) + " nodes=" + handle("N", filled[0]) + "," + handle("N", filled[1]) + "," +
           handle("N", filled[2]));
  CALL("cuGraphGetNodes", handle("G", g) + " numNodes=NULL", cuGraphGetNodes(g, nullptr, nullptr));
  CUgraphExec x = nullptr;
  CALL("cuGraphInstantiate", handle("G", g) + " flags=0", cuGraphInstantiate(&x, g, 0), "exec=" + handle("X", x));
  CALL("cuGraphLaunch", handle("X", x) + " " + handle("S", nb), cuGraphLaunch(x, nb));
  CALL("cuStreamSynchronize", handle("S", nb), cuStreamSynchronize(nb));
  read_back(d, 12);

  // A global-mode capture makes potentially unsafe calls fail and invalidates the capture.
  CALL("cuStreamBeginCapture", handle("S", s) + " GLOBAL", cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUdeviceptr during = 0;
  CALL("cuMemAlloc", "4096 during a GLOBAL capture", cuMemAlloc(&during, 4096));
  capture_status(s);
  CUgraph g2 = nullptr;
  CALL("cuStreamEndCapture", handle("S", s) + " invalidated", cuStreamEndCapture(s, &g2));
  capture_status(s);

  // Relaxed mode allows them.
  CALL("cuStreamBeginCapture", handle("S", s) + " RELAXED", cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  CALL("cuThreadExchangeStreamCaptureMode", "RELAXED", cuThreadExchangeStreamCaptureMode(&mode), "previous=" + std::to_string(mode));
  CALL("cuMemAlloc", "4096 during a RELAXED capture", cuMemAlloc(&during, 4096), "dptr=" + conf::add_block("D", during, 4096));
  CALL("cuMemFree", ptr(during), cuMemFree(during));
  CALL("cuStreamSynchronize", handle("S", s) + " capturing", cuStreamSynchronize(s));
  CALL("cuStreamEndCapture", handle("S", s) + " invalidated by the synchronize", cuStreamEndCapture(s, &g2));
  mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  CALL("cuThreadExchangeStreamCaptureMode", "GLOBAL", cuThreadExchangeStreamCaptureMode(&mode), "previous=" + std::to_string(mode));

  // Thread-local mode.
  CALL("cuStreamBeginCapture", handle("S", nb) + " THREAD_LOCAL", cuStreamBeginCapture(nb, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  CALL("cuMemcpyHtoDAsync", ptr(d + 8) + " 4 " + handle("S", nb) + " captured",
       cuMemcpyHtoDAsync(d + 8, "\x0a\x0b\x0c\x0d", 4, nb));
  CUgraph g3 = nullptr;
  CALL("cuStreamEndCapture", handle("S", nb), cuStreamEndCapture(nb, &g3), "graph=" + handle("G", g3));
  CUgraphExec x3 = nullptr;
  CALL("cuGraphInstantiate", handle("G", g3) + " flags=0", cuGraphInstantiate(&x3, g3, 0), "exec=" + handle("X", x3));
  CALL("cuGraphLaunch", handle("X", x3) + " " + handle("S", s), cuGraphLaunch(x3, s));
  CALL("cuStreamSynchronize", handle("S", s), cuStreamSynchronize(s));
  read_back(d + 8, 4);

  CALL("cuGraphExecDestroy", handle("X", x3), cuGraphExecDestroy(x3));
  CALL("cuGraphDestroy", handle("G", g3), cuGraphDestroy(g3));
  CALL("cuGraphExecDestroy", handle("X", x), cuGraphExecDestroy(x));
  CALL("cuGraphDestroy", handle("G", g), cuGraphDestroy(g));
  for (CUevent e : {start, end, untimed}) CALL("cuEventDestroy", handle("E", e), cuEventDestroy(e));
  for (CUstream st : {s, nb, prio}) CALL("cuStreamDestroy", handle("S", st), cuStreamDestroy(st));
  CALL("cuMemFree", ptr(d), cuMemFree(d));
  return 0;
}
