// Process-wide set-up of the preload library: options read once at load, logging, fork and exit handling.
#pragma once

#include <spdlog/logger.h>

#include "interpose/base/hot_path.h"
#include "policy/options.h"

namespace kvremap::interpose {

namespace library_detail {
// Set once by the load-time constructor; a plain constant-initialised pointer, so reading it needs
// no guard and works before any dynamic initialiser has run.
extern policy::Options* g_options;
const policy::Options& default_options();
}  // namespace library_detail

// The options in force (defaults until the load-time constructor has run). Inline: every hook asks.
inline const policy::Options& options() {
  const policy::Options* o = library_detail::g_options;
  return o ? *o : library_detail::default_options();
}

namespace library_detail {
// The options every tracked allocation and free reads, copied out of Options at load into a
// constant-initialised global: one load where options() is two dependent ones (the pointer, then
// the heap object), each a cache miss after the driver's system calls.
struct HotOptions {
  bool loaded = false;  // false until the constructor has run: then options() is asked
  policy::Mode mode{};
  std::uint64_t stack_min_bytes = 0;
  std::uint64_t kv_min_bytes = 0;     // KVREMAP_KV_MIN_BYTES: defer mode's first check on every allocation
  std::uint64_t kv_tensor_bytes = 0;  // KVREMAP_KV_TENSOR_BYTES
};
inline constinit HotOptions g_hot_options;
}  // namespace library_detail

namespace library_detail {
// A HotOptions field, or the same Options field before the load-time constructor has run.
template <auto HotField, auto OptionsField>
[[gnu::always_inline]] inline auto hot_option() {
  const HotOptions& h = g_hot_options;
  return KVREMAP_LIKELY(h.loaded) ? h.*HotField : options().*OptionsField;
}
}  // namespace library_detail

// options().mode, .stack_min_bytes, .kv_min_bytes and .kv_tensor_bytes, for the allocation path.
inline policy::Mode mode_option() {
  return library_detail::hot_option<&library_detail::HotOptions::mode, &policy::Options::mode>();
}
inline std::uint64_t stack_min_bytes_option() {
  return library_detail::hot_option<&library_detail::HotOptions::stack_min_bytes, &policy::Options::stack_min_bytes>();
}
inline std::uint64_t kv_min_bytes_option() {
  return library_detail::hot_option<&library_detail::HotOptions::kv_min_bytes, &policy::Options::kv_min_bytes>();
}
inline std::uint64_t kv_tensor_bytes_option() {
  return library_detail::hot_option<&library_detail::HotOptions::kv_tensor_bytes, &policy::Options::kv_tensor_bytes>();
}
// The "kvremap:"-prefixed stderr logger; never throws.
spdlog::logger& log();
// A line at the default log level that is no warning (what kvremap did, for a person reading the
// engine's output): "kvremap: [pid N] TEXT" on stderr, unless KVREMAP_LOG_LEVEL is above `warn`.
void notice(const std::string& text);
// The option problems found at load, already printed; kept for the trace header.
const std::vector<policy::OptionProblem>& option_problems();

}  // namespace kvremap::interpose
