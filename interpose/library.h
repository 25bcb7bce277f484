// Process-wide set-up of the preload library: options read once at load, logging, fork and exit handling.
#pragma once

#include <spdlog/logger.h>

#include "policy/options.h"

namespace kvremap::interpose {

// The options in force (defaults until the load-time constructor has run).
const policy::Options& options();
// The "kvremap:"-prefixed stderr logger; never throws.
spdlog::logger& log();
// The option problems found at load, already printed; kept for the trace header.
const std::vector<policy::OptionProblem>& option_problems();

}  // namespace kvremap::interpose
