// The program's SIGTERM/SIGINT dispositions, where kvremap's summary handler stands in for a default one.
#pragma once

#include <signal.h>

namespace kvremap::interpose {

using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);
using SiginfoHandler = void (*)(int, siginfo_t*, void*);

// libc's sigaction (never the hook), or nullptr if it cannot be found.
SigactionFn real_sigaction();

// Installs `handler` (SA_SIGINFO | SA_RESTART) for SIGTERM or SIGINT where the disposition is the
// default one, remembering that disposition as sigaction() reported it; anything else (a program's
// handler, SIG_IGN) is left alone. Returns whether it installed.
bool stand_in_for_default(int sig, SiginfoHandler handler);

// Puts back the disposition kvremap's handler stands in for (from that handler, before it re-raises).
void restore_program_disposition(int sig);

// sigaction() as the program sees it: where kvremap's handler stands in for the program's default
// disposition, a query reports that disposition and a new one replaces kvremap's handler; otherwise
// libc's sigaction unchanged.
int program_sigaction(int sig, const struct sigaction* act, struct sigaction* old);

// Whether kvremap's handler stands in for the program's default disposition of `sig` now.
bool stands_in_for(int sig);

}  // namespace kvremap::interpose
