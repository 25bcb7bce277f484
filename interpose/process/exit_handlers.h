// Exit and signal handling: the summary at exit, SIGTERM/SIGINT, and the drain of hooks still running.
#pragma once

#include <signal.h>

namespace kvremap::interpose::tracker_detail {

using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);

// Registers the atexit handler, and a SIGTERM/SIGINT handler where the disposition is the default
// (only there would the signal end the process without a summary); called once, when tracking starts.
void install_exit_handlers();

// libc's sigaction (never the hook), or nullptr if it cannot be found.
SigactionFn real_sigaction();

// sigaction() as the program sees it: where kvremap's handler stands in for the program's default
// disposition, a query reports that disposition and a new one replaces kvremap's handler; otherwise
// libc's sigaction unchanged.
int program_sigaction(int sig, const struct sigaction* act, struct sigaction* old);

// Whether kvremap's handler stands in for the program's default disposition of `sig` now.
bool stands_in_for(int sig);

}  // namespace kvremap::interpose::tracker_detail
