// VLLM_LIKE_KEEP_SERVING=1: the replica serves until it is asked to stop, as a server does, and then shuts down cleanly.
#pragma once

#include <sys/types.h>

#include <vector>

namespace vllm_like {

// At program start: SIGTERM and SIGINT stay pending for wait_for_stop_signal or the forwarding thread instead
// of ending the process at once. Children inherit the mask, through fork and exec.
void block_stop_signals();

// In a front process or the rank launcher: a thread that passes each SIGTERM or SIGINT on to `children` as
// SIGTERM, as vLLM's API server shuts its engine down on either (serve_http's signal_handler,
// vllm/entrypoints/launcher.py, cancels the server; the engine client then terminates the engine process).
void forward_stop_signals(std::vector<pid_t> children);

// In the engine process once it serves: waits for SIGTERM or SIGINT and returns which came.
int wait_for_stop_signal();

}  // namespace vllm_like
