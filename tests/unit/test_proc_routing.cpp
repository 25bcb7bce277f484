// The cuGetProcAddress routing table: which wrapper, if any, answers each (name, version, flags) query.
#include "interpose/hooks/proc_routing.h"

#include "interpose/track/tracker.h"

#include <cuda.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>

namespace {

using kvremap::interpose::kKnownCudaVersion;
using kvremap::interpose::proc_routes;
using kvremap::interpose::ProcRoute;
using kvremap::interpose::route_for_query;
using kvremap::interpose::routes_named;

constexpr unsigned long long kPerThread = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
constexpr unsigned long long kLegacy = CU_GET_PROC_ADDRESS_LEGACY_STREAM;

// Any non-null pointer: the routing only passes it on to the check above the known versions.
void* const kRealFn = reinterpret_cast<void*>(0x1000);

bool fail_if_asked(const ProcRoute&, unsigned long long, void*) {
  ADD_FAILURE() << "the resolver check is only for versions above kKnownCudaVersion";
  return false;
}

// The export a query is routed to, or "" when it passes through.
std::string routed(std::string_view name, int version, unsigned long long flags = 0) {
  const ProcRoute* r = route_for_query(routes_named(name), version, flags, kRealFn, fail_if_asked);
  return r ? std::string(r->export_name) : std::string();
}

TEST(ProcRouting, NamesOutsideTheTableHaveNoRoute) {
  EXPECT_TRUE(routes_named("cuMemAllocManaged").empty());
  EXPECT_TRUE(routes_named("").empty());
  // Queries name the base function; an export name is not one.
  EXPECT_TRUE(routes_named("cuMemAlloc_v2").empty());
  EXPECT_EQ(routed("cuDeviceGetCount", 12000), "");
}

TEST(ProcRouting, VersionsFromTheFirstOfTheAbiGetTheWrapper) {
  EXPECT_EQ(routed("cuMemAlloc", 3020), "cuMemAlloc_v2");
  EXPECT_EQ(routed("cuMemAlloc", 12080), "cuMemAlloc_v2");
  EXPECT_EQ(routed("cuMemAlloc", kKnownCudaVersion), "cuMemAlloc_v2");
  EXPECT_EQ(routed("cuMemCreate", 10020), "cuMemCreate");
  EXPECT_EQ(routed("cuLaunchKernelEx", 11060), "cuLaunchKernelEx");
}

TEST(ProcRouting, VersionsBeforeTheAbiPassThrough) {
  // cuMemAlloc before 3.2 is the 32-bit ABI, which has no wrapper.
  EXPECT_EQ(routed("cuMemAlloc", 3010), "");
  EXPECT_EQ(routed("cuMemAlloc", 2000), "");
  EXPECT_EQ(routed("cuMemCreate", 10010), "");
  EXPECT_EQ(routed("cuMemAllocAsync", 11010, kPerThread), "");
  EXPECT_EQ(routed("cuGetProcAddress", 11020), "");
}

TEST(ProcRouting, ANewerAbiEndsTheOlderRow) {
  EXPECT_EQ(routed("cuGetProcAddress", 11030), "cuGetProcAddress");
  EXPECT_EQ(routed("cuGetProcAddress", 11080), "cuGetProcAddress");
  EXPECT_EQ(routed("cuGetProcAddress", 12000), "cuGetProcAddress_v2");
  EXPECT_EQ(routed("cuGetProcAddress", 13000), "cuGetProcAddress_v2");
}

TEST(ProcRouting, ThePerThreadFlagSelectsThePerThreadVariant) {
  EXPECT_EQ(routed("cuMemcpyHtoD", 3020, kPerThread), "cuMemcpyHtoD_v2_ptds");
  EXPECT_EQ(routed("cuMemcpyHtoD", 3020, 0), "cuMemcpyHtoD_v2");
  EXPECT_EQ(routed("cuMemcpyHtoD", 3020, kLegacy), "cuMemcpyHtoD_v2");
  EXPECT_EQ(routed("cuLaunchKernel", 12000, kPerThread), "cuLaunchKernel_ptsz");
  EXPECT_EQ(routed("cuMemAllocAsync", 11020, kPerThread), "cuMemAllocAsync_ptsz");
  EXPECT_EQ(routed("cuStreamBeginCapture", 10010, kPerThread | kLegacy), "cuStreamBeginCapture_v2_ptsz");
}

TEST(ProcRouting, FunctionsWithoutAStreamIgnoreThePerThreadFlag) {
  EXPECT_EQ(routed("cuMemAlloc", 3020, kPerThread), "cuMemAlloc_v2");
  EXPECT_EQ(routed("cuMemGetInfo", 12000, kPerThread), "cuMemGetInfo_v2");
}

// What the check above the known versions was asked, and what it answers.
struct CheckLog {
  int calls = 0;
  std::string export_name;
  unsigned long long flags = 0;
  void* real_fn = nullptr;
  bool answer = false;
};
CheckLog g_check;

void expect_check_to_answer(bool answer) {
  g_check = CheckLog{};
  g_check.answer = answer;
}

bool logged_check(const ProcRoute& route, unsigned long long flags, void* real_fn) {
  ++g_check.calls;
  g_check.export_name = std::string(route.export_name);
  g_check.flags = flags;
  g_check.real_fn = real_fn;
  return g_check.answer;
}

TEST(ProcRouting, AboveTheKnownVersionsTheResolverCheckDecides) {
  const int newer = kKnownCudaVersion + 10;
  expect_check_to_answer(true);
  const ProcRoute* r = route_for_query(routes_named("cuMemcpyAsync"), newer, kPerThread, kRealFn, logged_check);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->export_name, "cuMemcpyAsync_ptsz");
  EXPECT_EQ(g_check.calls, 1);
  EXPECT_EQ(g_check.export_name, "cuMemcpyAsync_ptsz");
  EXPECT_EQ(g_check.flags, kPerThread);
  EXPECT_EQ(g_check.real_fn, kRealFn);

  expect_check_to_answer(false);
  EXPECT_EQ(route_for_query(routes_named("cuMemcpyAsync"), newer, 0, kRealFn, logged_check), nullptr);
  EXPECT_EQ(g_check.calls, 1);
  EXPECT_EQ(g_check.export_name, "cuMemcpyAsync");
}

TEST(ProcRouting, AboveTheKnownVersionsAnOlderAbiIsAskedToo) {
  // cuGetProcAddress's first ABI ends at 12000 by the table, but above the known versions only the
  // resolver can tell which ABI it answered: each row is asked in the table's order.
  expect_check_to_answer(true);
  const ProcRoute* r =
      route_for_query(routes_named("cuGetProcAddress"), kKnownCudaVersion + 10, 0, kRealFn, logged_check);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->export_name, "cuGetProcAddress");
  EXPECT_EQ(g_check.calls, 1);
}

TEST(ProcRouting, EveryRowAnswersItsFirstVersionAndNoEarlierOne) {
  std::set<std::string_view> exports;
  ASSERT_FALSE(proc_routes().empty());
  for (const ProcRoute& row : proc_routes()) {
    SCOPED_TRACE(std::string(row.export_name));
    EXPECT_TRUE(exports.insert(row.export_name).second) << "listed twice";
    const unsigned long long flags = row.per_thread ? kPerThread : 0;
    EXPECT_EQ(route_for_query(routes_named(row.base_name), row.first_version, flags, kRealFn, fail_if_asked), &row);
    EXPECT_NE(route_for_query(routes_named(row.base_name), row.first_version - 1, flags, kRealFn, fail_if_asked),
              &row);
    if (row.next_version != 0) {
      EXPECT_NE(route_for_query(routes_named(row.base_name), row.next_version, flags, kRealFn, fail_if_asked), &row);
    }
  }
}

TEST(ProcRouting, RoutedLookupsCountsEachAnsweredLookup) {
  const std::uint64_t before = kvremap::interpose::routed_lookups();
  kvremap::interpose::count_routed_lookup();
  kvremap::interpose::count_routed_lookup();
  EXPECT_EQ(kvremap::interpose::routed_lookups(), before + 2);
}

}  // namespace

// The table says what each hook does about deferred KV, and the roles follow the deferral's rules
// (docs/kv-deferral.md §3): a driver function that reaches memory by address is an `access` hook (it
// commits the KV it reaches first); only cuMemAlloc places KV tensors; the commit trigger's events
// are `point` hooks; cuMemAlloc and cuMemCreate may place KV; the VMM calls taking a handle translate
// kvremap's virtual handles. A hook added to the table without its role fails here.
TEST(ProcRouting, EveryHookHasTheKvRoleOfItsFamily) {
  using kvremap::interpose::KvRole;
  const auto starts = [](std::string_view name, std::initializer_list<std::string_view> prefixes) {
    for (std::string_view p : prefixes)
      if (name.starts_with(p)) return true;
    return false;
  };
  std::set<std::string> placing;
  for (const ProcRoute& r : proc_routes()) {
    SCOPED_TRACE(std::string(r.export_name));
    const bool reaches_memory =
        starts(r.base_name, {"cuMemcpy", "cuMemset", "cuIpcGetMemHandle", "cuPointerGetAttribute",
                             "cuMemGetAddressRange", "cuMemRetainAllocationHandle", "cuMemGetHandleForAddressRange"});
    EXPECT_EQ(reaches_memory, r.kv == KvRole::access);
    const bool trigger_event = starts(r.base_name, {"cuLaunchKernel", "cuGraphLaunch", "cuStreamBeginCapture",
                                                    "cuStreamEndCapture", "cuStreamDestroy", "cuMemGetInfo",
                                                    "cuModuleLoadData", "cuLibraryLoadData"});
    EXPECT_EQ(trigger_event, r.kv == KvRole::point);
    if (r.kv == KvRole::place) placing.insert(std::string(r.base_name));
    // The calls that take a VMM handle or change a mapping translate kvremap's virtual handles (kv_vmm.h).
    const bool takes_handle =
        starts(r.base_name, {"cuMemRelease", "cuMemMap", "cuMemUnmap", "cuMemSetAccess",
                             "cuMemGetAllocationPropertiesFromHandle", "cuMemExportToShareableHandle",
                             "cuMulticastBindMem"});
    EXPECT_EQ(takes_handle, r.kv == KvRole::handle);
    if (r.base_name.starts_with("cuMemAlloc") && r.base_name != "cuMemAlloc") {
      EXPECT_EQ(r.kv, KvRole::none);
    }
  }
  EXPECT_EQ(placing, (std::set<std::string>{"cuMemAlloc", "cuMemCreate"}))
      << "pitched, stream-ordered and pool allocations are not KV";
  EXPECT_EQ(routes_named("cuMemFree")[0]->kv, KvRole::free);
}
