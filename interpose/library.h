// Process-wide set-up of the preload library: options read once at load, logging, fork and exit handling.
#pragma once

#include <spdlog/logger.h>

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
// The "kvremap:"-prefixed stderr logger; never throws.
spdlog::logger& log();
// The option problems found at load, already printed; kept for the trace header.
const std::vector<policy::OptionProblem>& option_problems();

}  // namespace kvremap::interpose
