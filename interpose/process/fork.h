// Fork handling: every layer's part of a fork, in the order the layers depend on each other.
#pragma once

namespace kvremap::interpose {

// Registers the pthread_atfork handlers; called once, when the library loads.
void install_fork_handlers();

}  // namespace kvremap::interpose
