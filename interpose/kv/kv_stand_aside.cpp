// Decides, once per allocation API, whether another interposer sits between kvremap and CUDA, and says so.
#include "interpose/kv/kv_stand_aside.h"

#include <dlfcn.h>

#include <atomic>
#include <climits>
#include <map>
#include <string>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "interpose/base/library.h"
#include "interpose/driver/real.h"
#include "interpose/kv/kv_observe_only.h"
#include "interpose/trace/kv_events.h"
#include "interpose/track/tracker.h"
#include "policy/stacked.h"

namespace kvremap::interpose {

namespace {

enum Decision : int { kUndecided = 0, kForwardsToCuda = 1, kStandsAside = 2 };

// One allocation API: the symbol its hook forwards to, and how that symbol is resolved (as the hook does).
struct Api {
  const char* name;
  const char* symbol;
  void* (*resolve)(const char*);
  std::atomic<int> decision{kUndecided};
  // Written once, before `decision` becomes kStandsAside (release). A plain array: no destructor runs
  // at exit while a late hook may still read it.
  char library[PATH_MAX];
};

constinit Api g_apis[] = {
    {"cudaMalloc", "cudaMalloc", next_definition, {}, {}},
    {"cuMemAlloc", "cuMemAlloc_v2", driver_export, {}, {}},
    {"cuMemCreate", "cuMemCreate", driver_export, {}, {}},
};
// Serialises the first decision of each API, so exactly one thread warns.
constinit std::mutex g_deciding;

Api* api_named(const char* name) {
  for (Api& a : g_apis)
    if (std::strcmp(a.name, name) == 0) return &a;
  return nullptr;
}

int decide(Api& a) {
  std::lock_guard<std::mutex> g(g_deciding);
  const int known = a.decision.load(std::memory_order_acquire);
  if (known != kUndecided) return known;
  const std::string path = defining_object(a.resolve(a.symbol));
  // An unresolved function or one no object holds names no library to stand aside for: as before.
  if (path.empty() || policy::is_cuda_library(path)) {
    a.decision.store(kForwardsToCuda, std::memory_order_release);
    return kForwardsToCuda;
  }
  std::snprintf(a.library, sizeof a.library, "%s", path.c_str());
  a.decision.store(kStandsAside, std::memory_order_release);
  log().warn(
      "{} defines {} between kvremap and the CUDA {} (another interposer loaded after kvremap): kvremap stands "
      "aside and places none of its {} allocations in the KV arena (no KV deferral through {}); put kvremap after "
      "it in LD_PRELOAD (`kvremap run` does)",
      path, a.symbol, a.resolve == next_definition ? "runtime" : "driver", a.name, a.name);
  kv_event([&] { trace_events::kv_stands_aside(a.name, path); });
  return kStandsAside;
}

}  // namespace

bool kv_stands_aside(const char* api) {
  // An engine that maps its own KV cache: nothing of the process goes in the arena (said once there).
  if (kv_observe_only()) return true;
  Api* a = api_named(api);
  if (a == nullptr) return false;
  int d = a->decision.load(std::memory_order_acquire);
  if (d == kUndecided) d = decide(*a);
  return d == kStandsAside;
}

bool kv_made_by_interposer(void* return_address) {
  const std::string path = defining_object(return_address);
  if (path.empty() || policy::is_cuda_library(path)) return false;
  static constinit std::mutex lock;
  static std::map<std::string, bool>* known = new std::map<std::string, bool>;  // never destroyed: hooks run at exit
  std::lock_guard<std::mutex> g(lock);
  if (auto it = known->find(path); it != known->end()) return it->second;
  // The object's own definition, not one of its dependencies' (a library linked against libcudart finds
  // the runtime's): dlsym on its handle searches both, dladdr says which it was.
  bool defines = false;
  if (void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD)) {
    const DlsymFn lookup = libc_dlsym();
    void* fn = lookup ? lookup(handle, "cudaMalloc") : nullptr;
    defines = fn != nullptr && path == defining_object(fn);
    dlclose(handle);
  }
  (*known)[path] = defines;
  if (defines)
    log().info(
        "{} defines cudaMalloc itself (an interposer, such as torch_memory_saver): the VMM memory it maps is its "
        "own to pause and resume, and kvremap leaves it alone",
        path);
  return defines;
}

std::string kv_stood_aside_for() {
  for (const Api& a : g_apis)
    if (a.decision.load(std::memory_order_acquire) == kStandsAside) return a.library;
  return {};
}

}  // namespace kvremap::interpose
