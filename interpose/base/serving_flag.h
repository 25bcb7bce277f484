// The engine's serving flag: one shared page that every process of an engine maps, set when its server listens.
#pragma once

#include <cstdint>

namespace kvremap::interpose {

// In a root (a process started by exec that is not a multiprocessing child): a one-page memfd, mapped
// shared; its descriptor stays open so that descendants started by spawn map the same page through
// /proc/<root pid>/fd/<n> (policy::EngineRoot::serving_flag_fd hands them the number). Forked
// children keep the mapping. Returns the descriptor, or -1 when none could be made (no flag then).
int create_serving_flag();

// In a multiprocessing child whose handed-down root is one of its ancestors: maps that root's flag.
// False, and no flag, when it cannot: the root has exited, the descriptor is not a kvremap flag of
// this user, or /proc forbids it.
bool attach_serving_flag(std::int64_t root_pid, int fd);

// The engine's server listens on its serving port (any process of the engine may set it).
void set_serving_flag();
// Whether any process of this engine set it; false without a flag. One load: called on every kernel
// launch while KV is deferred.
bool serving_flag_set();

}  // namespace kvremap::interpose
