// Conformance client: legacy IPC across two processes (the child is this program exec'd again, since CUDA
// cannot be used in a forked child) and stream-ordered memory pools — default pool, create/destroy,
// attributes, allocation and free on a stream, trimming.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "conformance.h"

using conf::handle;
using conf::ptr;

namespace {

constexpr const char* kChildFlag = "--open-ipc-handle";

std::string handle_hex(const CUipcMemHandle& h) { return conf::hex(h.reserved, sizeof h.reserved); }

bool parse_handle(const char* text, CUipcMemHandle& h) {
  if (std::strlen(text) != 2 * sizeof h.reserved) return false;
  for (std::size_t i = 0; i < sizeof h.reserved; ++i) {
    unsigned byte = 0;
    if (std::sscanf(text + 2 * i, "%2x", &byte) != 1) return false;
    h.reserved[i] = static_cast<char>(byte);
  }
  return true;
}

// The importing process: opens the exporter's handle, reads what the exporter wrote, writes for the
// exporter to read, and closes each reference it took.
int open_in_child(const char* text) {
  CUipcMemHandle h{};
  if (!parse_handle(text, h)) {
    conf::line("child: malformed handle argument");
    return 2;
  }
  conf::primary_context();
  CUdeviceptr bad = 0;
  CALL("cuIpcOpenMemHandle", "flags=2", cuIpcOpenMemHandle(&bad, h, 2));
  CUdeviceptr opened = 0;
  CALL("cuIpcOpenMemHandle", "LAZY_ENABLE_PEER_ACCESS", cuIpcOpenMemHandle(&opened, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
       "dptr=" + conf::add_block("I", opened, 4096));
  unsigned char back[4] = {};
  CALL("cuMemcpyDtoH", ptr(opened) + " 4", cuMemcpyDtoH(back, opened, 4), "bytes=" + conf::hex(back, 4));
  CALL("cuMemsetD8", ptr(opened + 4) + " 0x6b 4", cuMemsetD8(opened + 4, 0x6b, 4));
  CUdeviceptr again = 0;
  CALL("cuIpcOpenMemHandle", "again", cuIpcOpenMemHandle(&again, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
       "same dptr=" + std::to_string(again == opened));
  CALL("cuIpcCloseMemHandle", ptr(opened), cuIpcCloseMemHandle(opened));
  CALL("cuIpcCloseMemHandle", ptr(opened) + " second reference", cuIpcCloseMemHandle(opened));
  CUipcMemHandle zero{};
  CALL("cuIpcOpenMemHandle", "zeroed handle", cuIpcOpenMemHandle(&bad, zero, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  return 0;
}

void ipc(CUdeviceptr d) {
  CALL("cuMemsetD8", ptr(d) + " 0x5a 4096", cuMemsetD8(d, 0x5a, 4096));
  CUipcMemHandle h{};
  CALL("cuIpcGetMemHandle", ptr(d), cuIpcGetMemHandle(&h, d));
  CALL("cuIpcGetMemHandle", "handle=NULL", cuIpcGetMemHandle(nullptr, d));
  CUdeviceptr self = 0;
  CALL("cuIpcOpenMemHandle", "in the exporting process", cuIpcOpenMemHandle(&self, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  conf::line("child process starts");
  const std::string arg = handle_hex(h);
  const pid_t child = fork();
  if (child == 0) {
    execl("/proc/self/exe", "conf_ipc_pools", kChildFlag, arg.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = -1;
  if (child > 0) waitpid(child, &status, 0);
  conf::line("child process exit=%d", child > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  unsigned char back[8] = {};
  CALL("cuMemcpyDtoH", ptr(d) + " 8", cuMemcpyDtoH(back, d, 8), "bytes=" + conf::hex(back, 8));
}

void pools() {
  CUmemoryPool def = nullptr;
  CALL("cuDeviceGetDefaultMemPool", "device=0", cuDeviceGetDefaultMemPool(&def, 0), "pool=" + handle("L", def));
  CUmemoryPool current = nullptr;
  CALL("cuDeviceGetMemPool", "device=0", cuDeviceGetMemPool(&current, 0), "pool=" + handle("L", current));
  cuuint64_t value = 99;
  CALL("cuMemPoolGetAttribute", handle("L", def) + " RELEASE_THRESHOLD",
       cuMemPoolGetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &value), "value=" + std::to_string(value));
  int enabled = 99;
  CALL("cuMemPoolGetAttribute", handle("L", def) + " REUSE_FOLLOW_EVENT_DEPENDENCIES",
       cuMemPoolGetAttribute(def, CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, &enabled),
       "value=" + std::to_string(enabled));
  CALL("cuMemPoolDestroy", handle("L", def) + " default", cuMemPoolDestroy(def));

  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  CUmemoryPool pool = nullptr;
  CALL("cuMemPoolCreate", "PINNED device=0", cuMemPoolCreate(&pool, &props), "pool=" + handle("L", pool));
  CUmemPoolProps bad = props;
  bad.allocType = CU_MEM_ALLOCATION_TYPE_INVALID;
  CUmemoryPool unused = nullptr;
  CALL("cuMemPoolCreate", "allocType INVALID", cuMemPoolCreate(&unused, &bad));
  cuuint64_t keep_all = UINT64_MAX;
  CALL("cuMemPoolSetAttribute", handle("L", pool) + " RELEASE_THRESHOLD UINT64_MAX",
       cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_all));
  CALL("cuMemPoolGetAttribute", handle("L", pool) + " RELEASE_THRESHOLD",
       cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &value),
       "is UINT64_MAX=" + std::to_string(value == UINT64_MAX));
  cuuint64_t nonzero = 1;
  CALL("cuMemPoolSetAttribute", handle("L", pool) + " USED_MEM_HIGH 1",
       cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &nonzero));

  CUstream s = nullptr;
  CALL("cuStreamCreate", "NON_BLOCKING", cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "stream=" + handle("S", s));
  CUdeviceptr p = 0;
  CALL("cuMemAllocFromPoolAsync", "4096 " + handle("L", pool) + " " + handle("S", s),
       cuMemAllocFromPoolAsync(&p, 4096, pool, s), "dptr=" + conf::add_block("D", p, 4096));
  CUmemoryPool owner = nullptr;
  CALL("cuPointerGetAttribute", "MEMPOOL_HANDLE " + ptr(p + 16),
       cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p + 16), "pool=" + handle("L", owner));
  CUipcMemHandle ipc_handle{};
  CALL("cuIpcGetMemHandle", ptr(p) + " pool memory", cuIpcGetMemHandle(&ipc_handle, p));
  CALL("cuMemPoolGetAttribute", handle("L", pool) + " USED_MEM_CURRENT",
       cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &value), "used>=4096=" + std::to_string(value >= 4096));
  CALL("cuMemFreeAsync", ptr(p) + " " + handle("S", s), cuMemFreeAsync(p, s));
  CALL("cuStreamSynchronize", handle("S", s), cuStreamSynchronize(s));
  CALL("cuMemPoolGetAttribute", handle("L", pool) + " USED_MEM_CURRENT",
       cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &value), "value=" + std::to_string(value));
  CALL("cuMemPoolGetAttribute", handle("L", pool) + " RESERVED_MEM_CURRENT",
       cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &value),
       "reserved>=4096=" + std::to_string(value >= 4096));
  CALL("cuMemPoolTrimTo", handle("L", pool) + " 0", cuMemPoolTrimTo(pool, 0));
  CALL("cuMemPoolGetAttribute", handle("L", pool) + " RESERVED_MEM_CURRENT",
       cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &value), "value=" + std::to_string(value));

  // The device's current pool serves cuMemAllocAsync.
  CALL("cuDeviceSetMemPool", "device=0 " + handle("L", pool), cuDeviceSetMemPool(0, pool));
  CALL("cuDeviceGetMemPool", "device=0", cuDeviceGetMemPool(&current, 0), "pool=" + handle("L", current));
  CUdeviceptr q = 0;
  CALL("cuMemAllocAsync", "4096 " + handle("S", s), cuMemAllocAsync(&q, 4096, s), "dptr=" + conf::add_block("D", q, 4096));
  CALL("cuPointerGetAttribute", "MEMPOOL_HANDLE " + ptr(q),
       cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, q), "pool=" + handle("L", owner));
  CALL("cuMemFreeAsync", ptr(q) + " " + handle("S", s), cuMemFreeAsync(q, s));
  CALL("cuStreamSynchronize", handle("S", s), cuStreamSynchronize(s));
  CALL("cuMemPoolDestroy", handle("L", pool) + " current", cuMemPoolDestroy(pool));
  CALL("cuDeviceGetMemPool", "device=0", cuDeviceGetMemPool(&current, 0), "pool=" + handle("L", current));
  CALL("cuStreamDestroy", handle("S", s), cuStreamDestroy(s));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], kChildFlag) == 0) return open_in_child(argv[2]);
  conf::primary_context();
  CUdeviceptr d = 0;
  CALL("cuMemAlloc", "4096", cuMemAlloc(&d, 4096), "dptr=" + conf::add_block("D", d, 4096));
  ipc(d);
  CALL("cuMemFree", ptr(d), cuMemFree(d));
  pools();
  return 0;
}
