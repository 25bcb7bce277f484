// Walks the stack once per call site with libunwind and names the first non-CUDA, non-kvremap object.
#define UNW_LOCAL_ONLY
#include "interpose/track/caller.h"

#include <dlfcn.h>
#include <libunwind.h>
#include <tbb/concurrent_hash_map.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "interpose/base/process_object.h"

namespace kvremap::interpose {
namespace {

// Nodes from malloc, not TBB's scalable allocator: LeakSanitizer scans malloc'd memory only, so names held
// in tbbmalloc's pages (any longer than a string's inline buffer) would read as leaks in sanitized builds.
using Cache = tbb::concurrent_hash_map<std::uintptr_t, std::string, tbb::tbb_hash_compare<std::uintptr_t>,
                                       std::allocator<std::pair<const std::uintptr_t, std::string>>>;
constinit ProcessObject<Cache> g_cache;
Cache& cache() { return g_cache.get(); }

const char* basename_of(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

bool is_cuda_or_self(const char* base) {
  return std::strncmp(base, "libkvremap", 10) == 0 || std::strncmp(base, "libcudart", 9) == 0 ||
         std::strncmp(base, "libcuda.so", 10) == 0;
}

std::string walk() {
  unw_context_t context;
  unw_cursor_t cursor;
  if (unw_getcontext(&context) != 0 || unw_init_local(&cursor, &context) != 0) return {};
  for (int depth = 0; depth < 64 && unw_step(&cursor) > 0; ++depth) {
    unw_word_t ip = 0;
    if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0) break;
    Dl_info info{};
    // ip - 1: the return address may already belong to the next function or object.
    if (!dladdr(reinterpret_cast<void*>(ip - 1), &info) || !info.dli_fname) continue;
    const char* base = basename_of(info.dli_fname);
    if (*base == '\0' || is_cuda_or_self(base)) continue;
    return base;
  }
  return {};
}

}  // namespace

std::string caller_object(void* return_address) {
  const auto key = reinterpret_cast<std::uintptr_t>(return_address);
  {
    Cache::const_accessor found;
    if (cache().find(found, key)) return found->second;
  }
  std::string name = walk();
  cache().insert({key, name});
  return name;
}

}  // namespace kvremap::interpose
