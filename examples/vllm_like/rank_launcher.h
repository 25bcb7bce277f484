// Runs one engine process per rank (rank r on device r), as a tensor-parallel launcher does.
#pragma once

#include <string>
#include <vector>

namespace vllm_like {

// Starts `ranks` copies of this program, named `name` (the launcher's argv[0], as torchrun keeps the
// program's name), with `engine_args` plus `--device r`, RANK/LOCAL_RANK/
// WORLD_SIZE set as torchrun sets them; waits for all and prints each rank's outcome. Returns 0 if
// every rank exited 0, else the exit status of the lowest failing rank (128 + signal if killed).
// `forward_stop`: SIGTERM and SIGINT are passed on to every rank (VLLM_LIKE_KEEP_SERVING=1).
int launch_ranks(const std::string& name, int ranks, const std::vector<std::string>& engine_args, bool forward_stop);

}  // namespace vllm_like
