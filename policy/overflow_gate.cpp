// The serving overflow's gate: a refusal is the allocator's retry only when nothing was allocated since the last one.
#include "policy/overflow_gate.h"

namespace kvremap::policy {

OverflowDecision OverflowGate::on_refusal(std::uint64_t bytes, const DeviceAllocationCounts& now) {
  const bool retry = last_ && last_->bytes == bytes && last_->counts.allocations == now.allocations &&
                     now.frees >= last_->counts.frees && now.freed_bytes >= last_->counts.freed_bytes;
  if (!retry) {
    last_ = Refusal{bytes, now};
    return {};
  }
  OverflowDecision decision{true, now.frees - last_->counts.frees, now.freed_bytes - last_->counts.freed_bytes};
  // The overflow answers this request: the allocator's next refusal is a new request's first.
  last_.reset();
  return decision;
}

}  // namespace kvremap::policy
