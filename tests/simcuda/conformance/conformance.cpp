// Canonical output for the conformance clients (see conformance.h and README.md's line format).
#include "conformance.h"

#include <cstdarg>
#include <cstdio>
#include <map>
#include <vector>

namespace conf {
namespace {

struct Block {
  std::string name;
  std::uintptr_t base;
  std::size_t size;
};

std::vector<Block>& blocks() {
  static std::vector<Block> b;
  return b;
}

std::map<std::string, int>& counters() {
  static std::map<std::string, int> c;
  return c;
}

std::map<std::pair<std::string, unsigned long long>, std::string>& handles() {
  static std::map<std::pair<std::string, unsigned long long>, std::string> h;
  return h;
}

}  // namespace

std::string res(CUresult r) {
  const char* name = nullptr;
  if (cuGetErrorName(r, &name) == CUDA_SUCCESS && name != nullptr) return name;
  return "CUresult(" + std::to_string(static_cast<int>(r)) + ")";
}

std::string add_block(const char* prefix, std::uintptr_t base, std::size_t size) {
  std::string name = std::string(prefix) + std::to_string(counters()[prefix]++);
  blocks().push_back({name, base, size});
  return name;
}

std::string ptr(std::uintptr_t address) {
  if (address == 0) return "0";
  // A block's own base first, then an address inside one, then one just past a block's end: blocks the
  // allocator placed back to back (as ASan's does) must not name the second by the first's end.
  for (const int pass : {0, 1, 2}) {
    for (auto it = blocks().rbegin(); it != blocks().rend(); ++it) {
      if (address < it->base) continue;
      const std::uintptr_t off = address - it->base;
      const bool match = pass == 0 ? off == 0 : pass == 1 ? off < it->size : off == it->size;
      if (match) return off == 0 ? it->name : it->name + "+" + std::to_string(off);
    }
  }
  return "unknown";
}

std::string handle(const char* kind, unsigned long long h) {
  if (h == 0) return "null";
  auto key = std::make_pair(std::string(kind), h);
  auto it = handles().find(key);
  if (it != handles().end()) return it->second;
  std::string name = std::string(kind) + std::to_string(counters()[std::string("#") + kind]++);
  handles().emplace(key, name);
  return name;
}

std::string handle(const char* kind, const void* h) {
  return handle(kind, static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(h)));
}

void line(const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vprintf(format, args);
  va_end(args);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

void call(const std::string& name, const std::string& args, CUresult r, const std::string& outcome) {
  if (r == CUDA_SUCCESS && !outcome.empty()) {
    line("%s(%s) -> %s %s", name.c_str(), args.c_str(), res(r).c_str(), outcome.c_str());
  } else {
    line("%s(%s) -> %s", name.c_str(), args.c_str(), res(r).c_str());
  }
}

CUcontext primary_context() {
  call("cuInit", "0", cuInit(0));
  CUdevice dev = -1;
  CALL("cuDeviceGet", "0", cuDeviceGet(&dev, 0), "device=" + std::to_string(dev));
  CUcontext ctx = nullptr;
  CALL("cuDevicePrimaryCtxRetain", "device=0", cuDevicePrimaryCtxRetain(&ctx, dev), "ctx=" + handle("C", ctx));
  call("cuCtxSetCurrent", handle("C", ctx), cuCtxSetCurrent(ctx));
  return ctx;
}

std::string hex(const void* data, std::size_t bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
  return out;
}

}  // namespace conf
