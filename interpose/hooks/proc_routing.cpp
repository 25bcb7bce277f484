// The cuGetProcAddress routing table, indexed by base name, and the ABI match of one query.
#include "interpose/hooks/proc_routing.h"

#include <unordered_map>
#include <vector>

#include "interpose/hooks/driver_hooks.h"

namespace kvremap::interpose {
namespace {

// Built at the first query and never destroyed (queries may come during exit). Built in code, not
// a constant array: the strings' addresses then cost the loader no relocations at load.
const std::vector<ProcRoute>& routes() {
  static const std::vector<ProcRoute>* table = new std::vector<ProcRoute>{
#define KVREMAP_ROUTE_ROW(exp, base, first, next, per_thread, kv) {#exp, #base, first, next, per_thread, KvRole::kv},
      KVREMAP_DRIVER_HOOKS(KVREMAP_ROUTE_ROW)
#undef KVREMAP_ROUTE_ROW
  };
  return *table;
}

using Index = std::unordered_map<std::string_view, std::vector<const ProcRoute*>>;

const Index& by_base_name() {
  static const Index* index = [] {
    auto* i = new Index;
    for (const ProcRoute& r : routes()) (*i)[r.base_name].push_back(&r);
    return i;
  }();
  return *index;
}

bool same_abi(const ProcRoute& r, int version, unsigned long long flags, void* real_fn, AbiCheck check_above_known) {
  if (version < r.first_version) return false;
  if (version <= kKnownCudaVersion) return r.next_version == 0 || version < r.next_version;
  return check_above_known(r, flags, real_fn);
}

}  // namespace

std::span<const ProcRoute> proc_routes() { return routes(); }

std::span<const ProcRoute* const> routes_named(std::string_view base_name) {
  auto it = by_base_name().find(base_name);
  if (it == by_base_name().end()) return {};
  return it->second;
}

const ProcRoute* route_for_query(std::span<const ProcRoute* const> named, int version, unsigned long long flags,
                                 void* real_fn, AbiCheck check_above_known) {
  bool has_per_thread = false;
  for (const ProcRoute* r : named) has_per_thread |= r->per_thread;
  const bool wants_per_thread = has_per_thread && (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  for (const ProcRoute* r : named)
    if (r->per_thread == wants_per_thread && same_abi(*r, version, flags, real_fn, check_above_known)) return r;
  return nullptr;
}

}  // namespace kvremap::interpose
