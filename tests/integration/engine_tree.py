# A process tree shaped like `vllm serve` with TP=1 and multiprocessing "spawn": the API server starts the
# engine core, which starts its worker; each child is a fresh interpreter whose own command line names only
# the multiprocessing bootstrap, and each renames itself with setproctitle before any CUDA call (vLLM
# v1/engine/core.py:1288 "VLLM::EngineCore", v1/executor/multiproc_executor.py:1089 "VLLM::Worker_TP0";
# setproctitle overwrites /proc/<pid>/cmdline). The worker allocates a tagged KV cache on the simulated
# driver (ENGINE_TREE_DRIVER) and prints its process title.
# Run as `python3 <dir>/vllm serve MODEL [flags]`; with run_name "standalone" (python3 -c "from
# multiprocessing.spawn import spawn_main; import runpy; runpy.run_path(SCRIPT, run_name='standalone')")
# the worker runs alone, as a multiprocessing child whose root is not its ancestor.
import ctypes
import multiprocessing
import os
import sys

import setproctitle

MiB = 1 << 20


def check(result, what):
    if result != 0:
        print(f"engine_tree: {what} failed: {result}", flush=True)
        sys.exit(1)


def worker():
    setproctitle.setproctitle("VLLM::Worker_TP0")
    driver = ctypes.CDLL(os.environ["ENGINE_TREE_DRIVER"])
    check(driver.cuInit(0), "cuInit")
    device = ctypes.c_int(0)
    check(driver.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
    context = ctypes.c_void_p()
    check(driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxSetCurrent(context), "cuCtxSetCurrent")
    # kvremap's tagging API where it is loaded (RTLD_DEFAULT finds the preloaded library's exports).
    process = ctypes.CDLL(None)
    push = getattr(process, "kvremap_tag_push", None)
    pop = getattr(process, "kvremap_tag_pop", None)
    address = ctypes.c_uint64()
    check(driver.cuMemAlloc_v2(ctypes.byref(address), ctypes.c_size_t(MiB)), "warm-up allocation")
    if push:
        push(b"kv")
    for _ in range(2):
        check(driver.cuMemAlloc_v2(ctypes.byref(address), ctypes.c_size_t(32 * MiB)), "KV tensor")
    if pop:
        pop()
    check(driver.cuMemAlloc_v2(ctypes.byref(address), ctypes.c_size_t(8 * MiB)), "post-KV allocation")
    with open("/proc/self/cmdline", "rb") as f:
        title = f.read().split(b"\0")[0].decode()
    print(f"engine_tree: worker titled {title} allocated its KV cache", flush=True)


def engine_core():
    setproctitle.setproctitle("VLLM::EngineCore")
    child = multiprocessing.get_context("spawn").Process(target=worker)
    child.start()
    child.join()
    sys.exit(child.exitcode)


if __name__ == "__main__":
    core = multiprocessing.get_context("spawn").Process(target=engine_core)
    core.start()
    core.join()
    sys.exit(core.exitcode)
elif __name__ == "standalone":
    worker()
