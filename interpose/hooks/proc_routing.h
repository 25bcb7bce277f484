// cuGetProcAddress routing: which row of the driver hook table answers a query by name, ABI version and flags.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace kvremap::interpose {

// The newest CUDA version whose ABIs the table was written against: for queries above it the
// table's version ranges are not trusted, and the ABI is confirmed by pointer identity instead.
inline constexpr int kKnownCudaVersion = 13000;

// What a hook does about deferred KV (driver_hooks.h's table says it for every row).
enum class KvRole : std::uint8_t { none, place, free, access, point, handle };

// A row of KVREMAP_DRIVER_HOOKS without its function pointers, so that the routing needs none of
// the exported wrappers.
struct ProcRoute {
  std::string_view export_name;
  std::string_view base_name;
  int first_version;
  int next_version;  // 0: no newer ABI known
  bool per_thread;
  KvRole kv;
};

// Every row, in the table's order (the order of driver_hooks.cpp's own rows).
std::span<const ProcRoute> proc_routes();
// The rows that answer cuGetProcAddress(base_name); empty for a name kvremap does not wrap.
std::span<const ProcRoute* const> routes_named(std::string_view base_name);

// Whether `real_fn`, answered for a version above kKnownCudaVersion, has the ABI of `route`.
using AbiCheck = bool (*)(const ProcRoute& route, unsigned long long flags, void* real_fn);
// The row among `named` whose ABI cuGetProcAddress(version, flags) answered with `real_fn`, or
// nullptr (the call passes through). `check_above_known` is asked only above kKnownCudaVersion.
const ProcRoute* route_for_query(std::span<const ProcRoute* const> named, int version, unsigned long long flags,
                                 void* real_fn, AbiCheck check_above_known);


}  // namespace kvremap::interpose
