// How hot records become trace lines: per-thread cached pieces of repeating text around a few numbers.
#include "interpose/trace/hot_format.h"

#include <string_view>

#include "interpose/base/process_id.h"
#include "interpose/trace/event_line.h"
#include "policy/events.h"
#include "policy/phases.h"
#include "policy/trace_schema.h"

namespace kvremap::interpose::trace_events {
namespace {
// Hot lines are mostly text that repeats: everything before the timestamp is fixed per thread and
// kind, the api part per hook, everything after the size per (kind, device, category, phase). The
// formatting thread keeps the last of each, so a line is three padded copies and four numbers.
struct Piece {
  std::uint64_t key = ~0ULL;
  std::size_t size = 0;
  char text[96] = {};
};

template <typename Build>
const Piece& cached(Piece& piece, std::uint64_t key, Build&& build) {
  if (piece.key != key) {
    EventLine e(piece.text, sizeof piece.text);
    build(e);
    piece.size = e.overflowed() ? 0 : e.view().size();
    piece.key = key;
  }
  return piece;
}

// A lifetime (an allocation and its free in one complete event) uses the allocation's pieces plus
// its own head and the free's api.
constexpr std::size_t kLifetime = 3;
struct HotPieces {
  Piece head[4];   // per record kind and lifetime: `{"ph":…,"pid":P,"tid":T` up to the timestamp's key
  Piece api[2];    // alloc, free: `,"args":{"api":"NAME","ptr":`
  Piece tail[2];   // alloc, free: `,"device":D,"category":"C"[,"phase":"P"]}}`
  Piece free_api;  // lifetime: `,"free_api":"NAME"}}`
};
thread_local HotPieces t_pieces;

std::uint64_t thread_key(int tid) {
  return static_cast<std::uint64_t>(static_cast<std::uint32_t>(process_id())) << 32 | static_cast<std::uint32_t>(tid);
}
}  // namespace

std::size_t format_hot_record(const HotLine& line, char* out, std::size_t capacity) {
  const HotRecord& r = *line.record;
  const std::uint64_t* extra = line.extra;
  // A lifetime is written from its allocation's pieces, with its own head and the free's api.
  const HotRecord* freed = line.freed && !extra && is_lifetime(r, *line.freed) ? line.freed : nullptr;
  EventLine e(out, capacity);  // straight into the caller's buffer
  const std::size_t kind = r.kind() <= kHotCounter ? std::size_t{r.kind()} : std::size_t{kHotCounter};
  if (kind == kHotCounter && !extra) return 0;
  const Piece& head = cached(t_pieces.head[freed ? kLifetime : kind], thread_key(line.tid), [&](EventLine& h) {
    h.lit(R"({"ph":")").raw(kind == kHotCounter ? "C" : freed ? "X" : "i");
    h.raw(kind == kHotCounter ? std::string_view(R"(","cat":"memory","pid":)") : R"(","cat":"alloc","pid":)");
    h.u64(static_cast<std::uint64_t>(process_id())).lit(R"(,"tid":)").u64(static_cast<std::uint64_t>(line.tid));
    if (freed) h.lit(R"(,"name":"alloc")");
    if (kind == kHotAlloc && !freed) h.lit(R"(,"name":"alloc","s":"t")");
    if (kind == kHotFree) h.lit(R"(,"name":"free","s":"t")");
    h.lit(R"(,"ts":)");
  });
  if (head.size == 0) return 0;
  e.padded(head.text, head.size).micros(line.ts_ns);
  if (freed) e.lit(R"(,"dur":)").micros(line.end_ns > line.ts_ns ? line.end_ns - line.ts_ns : 0);
  if (kind == kHotCounter) {
    e.lit(R"(,"name":"device )").u64(static_cast<std::uint64_t>(r.device())).lit(R"( bytes","args":{)");
    for (std::size_t i = 0; i < policy::kCategoryNames.size(); ++i) {
      if (i) e.lit(",");
      e.lit("\"").raw(policy::kCategoryNames[i]).lit(R"(":)").u64(extra[i]);
    }
    e.lit("}}");
    if (extra[kCounterKvPlaced] != 0) {
      // Where the KV cache kvremap placed lies, as a second counter of the same time (the writer puts the
      // separator and newline around both): Perfetto draws it as its own tracks beside the device's.
      e.lit("\n,").padded(head.text, head.size).micros(line.ts_ns);
      e.lit(R"(,"name":"device )").u64(static_cast<std::uint64_t>(r.device())).lit(R"( kv bytes","args":{"reserved":)");
      e.u64(extra[kCounterKvReserved]).lit(R"(,"device":)").u64(extra[kCounterKvDevice]);
      e.lit(R"(,"scratch":)").u64(extra[kCounterKvScratch]).lit(R"(,"host":)").u64(extra[kCounterKvHost]).lit("}}");
    }
    return e.overflowed() ? 0 : e.view().size();
  }
  const Piece& api = cached(t_pieces.api[kind], reinterpret_cast<std::uintptr_t>(r.api),
                            [&](EventLine& a) { a.lit(R"(,"args":{"api":")").raw(r.api).lit(R"(","ptr":)"); });
  e.padded(api.text, api.size).hex(r.ptr).lit(R"(,"bytes":)").u64(extra ? *extra : r.bytes());
  // Device, category and phase: the packed word's top bits (the phase only matters for allocations).
  const std::uint64_t tail_key =
      r.packed >> HotRecord::kBytesBits & (kind == kHotAlloc ? ~0ULL : ~(std::uint64_t{15} << 9));
  const Piece& tail = cached(t_pieces.tail[kind], tail_key, [&](EventLine& t) {
    t.lit(R"(,"device":)").u64(static_cast<std::uint64_t>(r.device())).lit(R"(,"category":")");
    t.raw(policy::to_string(static_cast<policy::Category>(r.category())));
    if (kind == kHotAlloc) t.lit(R"(","phase":")").raw(policy::to_string(static_cast<policy::Phase>(r.phase())));
    t.lit(R"("}})");
  });
  // A piece that did not fit its buffer (an api name of ~60 characters) is empty: the line is
  // dropped rather than written without it.
  if (api.size == 0 || tail.size == 0) return 0;
  if (!freed) {
    e.padded(tail.text, tail.size);
  } else {
    const Piece& free_api = cached(t_pieces.free_api, reinterpret_cast<std::uintptr_t>(freed->api),
                                   [&](EventLine& f) { f.lit(R"(,"free_api":")").raw(freed->api).lit(R"("}})"); });
    if (free_api.size == 0) return 0;
    e.padded(tail.text, tail.size - 2).padded(free_api.text, free_api.size);  // its "}}" closes the line
  }
  return e.overflowed() ? 0 : e.view().size();
}

void hot_line(const HotRecord& r, const char* caller, const std::uint64_t* full_bytes) {
  char line[768];
  HotLine hot;
  hot.record = &r;
  hot.extra = full_bytes;
  hot.ts_ns = trace_ns_of_ticks(r.ticks);
  hot.tid = current_tid();
  const std::size_t n = format_hot_record(hot, line, sizeof line);
  if (n <= 2) return;
  EventLine e;
  if (caller) {
    e.raw(line, n - 2).lit(R"(,"caller":)").quoted(caller).lit("}}");  // inserted before the closing "}}"
  } else {
    e.raw(line, n);
  }
  if (!e.overflowed()) trace().event(e.view());
}

}  // namespace kvremap::interpose::trace_events
