// Recognises the engine's own VMM-mapped KV cache from its reservations and mappings.
#include "policy/engine_mapped_kv.h"

#include <iterator>
#include <utility>

#include "policy/units.h"

namespace kvremap::policy {

void EngineMappedKv::decide(MappedKv kind, std::string why) {
  if (seen_ != MappedKv::none) return;
  seen_ = kind;
  why_ = std::move(why);
}

std::map<std::uint64_t, EngineMappedKv::Reservation>::iterator EngineMappedKv::reservation_of(std::uint64_t va) {
  auto it = reservations_.upper_bound(va);
  if (it == reservations_.begin()) return reservations_.end();
  --it;
  return va < it->first + it->second.bytes ? it : reservations_.end();
}

void EngineMappedKv::on_reserve(std::uint64_t va, std::uint64_t bytes, std::uint64_t device_total) {
  // ExpandableSegment reserves segment × ceil(1.125 × total / segment): never less than 1.125 × total.
  if (device_total > 0 && bytes >= device_total + device_total / 8)
    decide(MappedKv::expandable_segments, "a reservation of " + format_bytes(bytes) +
                                              " (at least 1.125 x the device's " + format_bytes(device_total) +
                                              ": PyTorch's expandable segments)");
  reservations_[va] = Reservation{bytes, 0};
}

void EngineMappedKv::on_address_free(std::uint64_t va) { reservations_.erase(va); }

void EngineMappedKv::on_map(std::uint64_t va, std::uint64_t bytes, std::uint64_t handle) {
  handle_at_[va] = handle;
  // kvcached maps one zero page over every page of its KV tensors.
  if (++mappings_per_handle_[handle] == 2)
    decide(MappedKv::elastic_kv, "one memory handle mapped at several addresses (kvcached's zero page)");
  if (auto r = reservation_of(va); r != reservations_.end()) r->second.mapped += bytes;
}

void EngineMappedKv::on_unmap(std::uint64_t va, std::uint64_t bytes) {
  // One unmap may cover several mappings: each one starting inside [va, va + bytes) goes.
  for (auto it = handle_at_.lower_bound(va); it != handle_at_.end() && it->first < va + bytes;) {
    if (auto n = mappings_per_handle_.find(it->second); n != mappings_per_handle_.end() && --n->second == 0)
      mappings_per_handle_.erase(n);
    it = handle_at_.erase(it);
  }
  if (auto r = reservation_of(va); r != reservations_.end())
    r->second.mapped = r->second.mapped > bytes ? r->second.mapped - bytes : 0;
}

MappedKv EngineMappedKv::seen() {
  if (seen_ != MappedKv::none) return seen_;
  // vLLM's extensible KV: its capacity reserved, one block per segment mapped until after the capture.
  for (const auto& [va, r] : reservations_)
    if (r.bytes >= kElasticReservationBytes && r.mapped > 0 && r.mapped <= r.bytes / kElasticMappedShareDivisor) {
      decide(MappedKv::elastic_kv, "a reservation of " + format_bytes(r.bytes) + " with " + format_bytes(r.mapped) +
                                       " mapped (elastic KV capacity, as vLLM's extensible KV reserves it)");
      break;
    }
  return seen_;
}

}  // namespace kvremap::policy
