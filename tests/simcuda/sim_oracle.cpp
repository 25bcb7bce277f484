// The serving oracle: once serving is marked, executed work on an aliased physical handle ends the process.
//
// kvremap backs deferred KV with one scratch handle mapped at many addresses; serving work on it is
// silently wrong output. Tests sample a few words and can miss that, so the driver itself checks every
// kernel, copy and memset it executes against the live mappings, whatever the test reads back.
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "sim_state.h"
#include "simcuda.h"

namespace simcuda {
namespace {

struct AliasHit {
  std::uint64_t address = 0;  // the first byte of the range inside the aliased mapping
  int mappings = 0;           // how many addresses its handle is mapped at
};

// The first mapping overlapping [begin, begin + bytes) whose handle is mapped more than once.
bool find_alias(const State& s, std::uint64_t begin, std::uint64_t bytes, AliasHit& hit) {
  if (bytes == 0 || s.mappings.empty()) return false;
  const std::uint64_t end = begin + bytes < begin ? UINT64_MAX : begin + bytes;
  auto it = s.mappings.upper_bound(begin);
  if (it != s.mappings.begin()) {
    auto prev = std::prev(it);
    if (prev->second.va + prev->second.size > begin) it = prev;
  }
  for (; it != s.mappings.end() && it->first < end; ++it) {
    auto h = s.handles.find(it->second.handle);
    if (h == s.handles.end() || h->second.mappings <= 1) continue;
    hit.address = begin > it->first ? begin : it->first;
    hit.mappings = h->second.mappings;
    return true;
  }
  return false;
}

// Kernel arguments are opaque bytes; every aligned 64-bit word is read as a possible pointer
// (pointer parameters, and pointers inside by-value structs and arrays). The simulator does not know
// how far a kernel reads or writes from a pointer, so only the pointed-to byte itself is checked.
bool find_alias_in_args(const State& s, const Work& work, AliasHit& hit) {
  for (const auto& arg : work.args) {
    for (std::size_t at = 0; at + sizeof(std::uint64_t) <= arg.size(); at += sizeof(std::uint64_t)) {
      std::uint64_t word = 0;
      std::memcpy(&word, arg.data() + at, sizeof word);
      if (word != 0 && find_alias(s, word, 1, hit)) return true;
    }
  }
  return false;
}

[[noreturn]] void die(const char* call, const AliasHit& hit) {
  std::fprintf(stderr,
               "simcuda: serving oracle: %s touched 0x%llx which maps a handle mapped at %d addresses "
               "(scratch-backed memory used after serving began)\n",
               call, static_cast<unsigned long long>(hit.address), hit.mappings);
  std::fflush(stderr);
  // _exit: no atexit handlers or destructors, which could run more work on the same memory.
  _exit(kServingOracleExit);
}

}  // namespace

void check_serving(const State& s, const Work& work, const char* call) {
  if (!s.serving) return;
  AliasHit hit;
  bool found = false;
  switch (work.kind) {
    case Work::Kind::kKernel:
      found = find_alias_in_args(s, work, hit);
      break;
    case Work::Kind::kMemset:
      found = find_alias(s, work.dst, work.bytes, hit);
      break;
    case Work::Kind::kMemcpy:
      found = find_alias(s, work.dst, work.bytes, hit) || find_alias(s, work.src, work.bytes, hit);
      break;
  }
  if (found) die(call && *call ? call : "(unknown call)", hit);
}

}  // namespace simcuda

using namespace simcuda;

SIM_EXPORT int simcuda_mark_serving(void) {
  std::lock_guard<std::mutex> guard(lock());
  state().serving = true;
  return 0;
}

SIM_EXPORT int simcuda_serving_marked(void) {
  std::lock_guard<std::mutex> guard(lock());
  return state().serving ? 1 : 0;
}
