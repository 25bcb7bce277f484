// vllm_like's process tree as `vllm serve` and `sglang serve` start it: a front process, the engine process renamed.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace vllm_like {

// How the front process starts the engine process, as Python's multiprocessing does: fork (vLLM's default
// for its engine core, VLLM_WORKER_MULTIPROC_METHOD unset, utils/system_utils.py:126-181 at 017e9f4) or
// spawn (vLLM where CUDA was initialised or VLLM_WORKER_MULTIPROC_METHOD=spawn; SGLang always,
// entrypoints/engine.py `mp.set_start_method("spawn")`): a fresh program whose own line is the bootstrap
// `python3 -c "from multiprocessing.spawn import spawn_main; spawn_main(...)" --multiprocessing-fork`, its
// arguments sent through a pipe.
enum class StartMethod { fork, spawn };

// In the front process: starts the engine process with `engine_args` (the command line after the program
// name) and waits for it. Returns in the forked child (nullopt there: it runs the engine on); in the front
// process, the engine process's exit status (128 + signal when killed).
// `forward_stop`: SIGTERM and SIGINT sent to the front process are passed on to the engine process.
std::optional<int> start_engine_process(StartMethod method, const std::vector<std::string>& engine_args,
                                        bool forward_stop);

// In a spawned engine process (`argv` is the multiprocessing bootstrap): the arguments the front process
// sent. Nothing for any other command line.
std::optional<std::vector<std::string>> spawned_engine_arguments(int argc, char** argv);

// setproctitle's effect on Linux: `title` written over the argv area, the rest zeroed, so /proc/self/cmdline
// reads the title followed by empty arguments. vLLM names its engine core "VLLM::EngineCore"
// (v1/engine/core.py:1288), SGLang its scheduler "sglang::scheduler_TP<rank>" (managers/scheduler.py:4248).
void set_process_title(int argc, char** argv, const std::string& title);

}  // namespace vllm_like
