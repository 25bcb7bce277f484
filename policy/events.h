// What the interposer observes, as plain values: the input of phase inference, tracking and trace replay.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <variant>

namespace kvremap::policy {

// Where an allocation's bytes are accounted. Device addresses are integers: policy never sees CUDA types.
enum class Category : std::uint8_t { kv, graph_pool, graph_exec, module, async_pool, vmm, other };
inline constexpr std::size_t kCategoryCount = 7;  // Category's values, kv .. other
std::string_view to_string(Category category);
std::optional<Category> category_from_string(std::string_view name);

// Mirrors cudaStreamCaptureMode{Global, ThreadLocal, Relaxed}.
enum class CaptureMode : std::uint8_t { global, per_thread, relaxed };

struct Alloc {
  std::uint64_t ptr = 0;
  std::uint64_t bytes = 0;
  Category category = Category::other;
  // The intercepted function ("cudaMalloc", "cuMemAlloc_v2"). Must point at storage that outlives
  // the event (the hook's name literal); a trace reader keeps its own copies.
  std::string_view api;
};

struct Free {
  std::uint64_t ptr = 0;
  std::uint64_t bytes = 0;
  Category category = Category::other;
};

// One cudaMemGetInfo/cuMemGetInfo: what the driver said and what the engine was told.
struct MemoryQuery {
  std::uint64_t driver_free = 0;
  std::uint64_t driver_total = 0;
  std::uint64_t returned_free = 0;
  std::uint64_t returned_total = 0;
  // Bytes the process copied into device memory (1D copies to a device pointer) since this device's
  // previous query: weights arrive by copies, communication buffers do not. nullopt where unknown.
  std::optional<std::uint64_t> copied_to_device_bytes;
};

struct CaptureBegin {
  std::uint64_t capture_id = 0;  // cudaStreamGetCaptureInfo's id: unique per capture in the process
  CaptureMode mode = CaptureMode::global;
};

struct CaptureEnd {
  std::uint64_t capture_id = 0;
  bool ok = true;  // false: the capture was invalidated and produced no graph
};

struct GraphInstantiate {
  std::uint64_t bytes = 0;  // driver memory the instantiation consumed
};

struct GraphLaunch {};
struct KernelLaunch {};

struct ModuleLoad {
  std::uint64_t bytes = 0;
};

using EventKind = std::variant<Alloc, Free, MemoryQuery, CaptureBegin, CaptureEnd, GraphInstantiate, GraphLaunch,
                               KernelLaunch, ModuleLoad>;

struct Event {
  std::uint64_t time_ns = 0;  // since the library was loaded
  std::uint64_t thread_id = 0;
  std::int32_t device = 0;
  EventKind kind;
};

}  // namespace kvremap::policy
