// The trace's schema, shared by its writer (interpose/trace) and its readers (tools/trace): version, category and phase names.
#pragma once

#include <array>
#include <string_view>

#include "policy/events.h"

namespace kvremap::policy {

// Written into every trace's header and summary. Version 2 added allocation lifetimes (an "alloc"
// complete event); version 3 made the counter's kv series what the device holds of the KV cache, beside a
// "device <N> kv bytes" counter of where that cache lies.
inline constexpr int kTraceSchemaVersion = 3;

// The allocation categories, in policy::Category's order (the order reports print them).
inline constexpr std::array<std::string_view, kCategoryCount> kCategoryNames{"kv",         "graph_pool", "graph_exec", "module",
                                                                "async_pool", "vmm",        "other"};

// The start-up phases, in policy::Phase's order (the order an engine start-up goes through them).
inline constexpr std::array<std::string_view, 7> kPhaseNames{"init",           "loading", "profiling", "kv_allocation",
                                                             "post_kv_warmup", "capture", "serving"};

}  // namespace kvremap::policy
