// Signs that the engine maps its own KV cache with VMM (expandable segments, kvcached, vLLM's extensible KV).
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace kvremap::policy {

// Which of the engine's own VMM paths a process shows (docs/kv-deferral.md, "KV the engine maps itself").
enum class MappedKv : std::uint8_t {
  none,
  expandable_segments,  // PyTorch's ExpandableSegment: a reservation of at least 1.125 × the device's memory
  elastic_kv,           // kvcached (one handle mapped at many pages) or vLLM's extensible KV (capacity mostly unmapped)
};

// Follows the engine's own reservations and mappings (never kvremap's) and says, from the first sign on,
// that the engine maps its KV cache itself: then kvremap defers nothing, shifts no sizing and places none
// of the process's allocations in its arena.
class EngineMappedKv {
 public:
  // A reservation of `bytes` at `va` on a device of `device_total` bytes.
  void on_reserve(std::uint64_t va, std::uint64_t bytes, std::uint64_t device_total);
  void on_address_free(std::uint64_t va);
  // `handle` mapped over [va, va + bytes); unmapped again.
  void on_map(std::uint64_t va, std::uint64_t bytes, std::uint64_t handle);
  void on_unmap(std::uint64_t va, std::uint64_t bytes);

  // What the process has shown so far; once not `none`, it stays. Asked when kvremap would act (an
  // allocation it might place): a reservation mostly unmapped then is elastic capacity, while a page-by-page
  // mapping of a whole reservation has finished by then.
  MappedKv seen();
  // One line saying what was seen, for the notice; "" while nothing was.
  const std::string& why() const { return why_; }

  // A reservation at least this large holding at most this share mapped is elastic KV capacity.
  static constexpr std::uint64_t kElasticReservationBytes = std::uint64_t{64} << 20;
  static constexpr std::uint64_t kElasticMappedShareDivisor = 2;

 private:
  struct Reservation {
    std::uint64_t bytes = 0;
    std::uint64_t mapped = 0;
  };
  // The reservation holding `va`, or end().
  std::map<std::uint64_t, Reservation>::iterator reservation_of(std::uint64_t va);
  void decide(MappedKv kind, std::string why);

  std::map<std::uint64_t, Reservation> reservations_;
  std::map<std::uint64_t, std::uint64_t> mappings_per_handle_;
  std::map<std::uint64_t, std::uint64_t> handle_at_;  // mapped address -> handle
  MappedKv seen_ = MappedKv::none;
  std::string why_;
};

}  // namespace kvremap::policy
