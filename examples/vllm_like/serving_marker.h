// Tells the simulated driver that serving starts, where the driver offers the hook (never on a GPU).
#pragma once

namespace vllm_like {

// Calls simcudart_mark_serving() if the process has it (looked up at run time, so the program builds
// and runs without it); throws EngineExit if it reports a failure. Returns whether it was called.
bool mark_serving_start();

}  // namespace vllm_like
