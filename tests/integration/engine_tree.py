# A process tree shaped like `vllm serve` with TP=1 and multiprocessing "spawn": the API server starts the
# engine core, which starts its worker; each child is a fresh interpreter whose own command line names only
# the multiprocessing bootstrap, and each renames itself with setproctitle before any CUDA call (vLLM
# v1/engine/core.py:1288 "VLLM::EngineCore", v1/executor/multiproc_executor.py:1089 "VLLM::Worker_TP0";
# setproctitle overwrites /proc/<pid>/cmdline). The worker allocates a tagged KV cache on the simulated
# driver (ENGINE_TREE_DRIVER) and prints its process title.
# Run as `python3 <dir>/vllm serve MODEL [flags]`; with run_name "standalone" (python3 -c "from
# multiprocessing.spawn import spawn_main; import runpy; runpy.run_path(SCRIPT, run_name='standalone')")
# the worker runs alone, as a multiprocessing child whose root is not its ancestor. With ENGINE_TREE_FRONT
# the root is vLLM's API server alone (front_only).
# With ENGINE_TREE_SERVE=1 the tree also serves as vLLM's does when its engine captures no graphs although
# its flags say graphs (vLLM sets cudagraph_mode=NONE on its own, config/compilation.py:1433-1438): the
# worker listens on a port of its own (as torch.distributed's store does), runs a start-up kernel and
# reports ready; only then the root listens on its --port (the API server listens once the engine core
# is ready, entrypoints/openai/api_server.py:629-655), and the worker runs its first serving kernel.
import ctypes
import multiprocessing
import os
import socket
import sys

import setproctitle

MiB = 1 << 20


def check(result, what):
    if result != 0:
        print(f"engine_tree: {what} failed: {result}", flush=True)
        sys.exit(1)


PTX = (b".version 8.0\n.target sm_90\n.address_size 64\n// simcuda-module-bytes: 1MiB\n"
       b".visible .entry touch(.param .u64 p)\n{\nret;\n}\n")


def launch_touch(driver, target):
    """One launch of the simulated `touch` kernel (ENGINE_TREE_KERNELS holds its host implementation)."""
    ctypes.CDLL(os.environ["ENGINE_TREE_KERNELS"], mode=ctypes.RTLD_GLOBAL)
    module = ctypes.c_void_p()
    check(driver.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(PTX)), "cuModuleLoadData")
    function = ctypes.c_void_p()
    check(driver.cuModuleGetFunction(ctypes.byref(function), module, b"touch"), "cuModuleGetFunction")
    argument = ctypes.c_uint64(target.value)
    params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.byref(argument), ctypes.c_void_p))
    check(driver.cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, None, params, None), "cuLaunchKernel")
    check(driver.cuCtxSynchronize(), "cuCtxSynchronize")


def worker(ready=None, serve=None, title="VLLM::Worker_TP0"):
    setproctitle.setproctitle(title)
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
    small = ctypes.c_uint64(address.value)
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
    if ready is None:
        return
    store = socket.socket()
    store.bind(("127.0.0.1", 0))
    store.listen()
    launch_touch(driver, small)
    print("engine_tree: worker ran a start-up kernel beside its own listening store", flush=True)
    ready.set()
    if not serve.wait(60):
        print("engine_tree: the root never served", flush=True)
        sys.exit(1)
    launch_touch(driver, small)
    print("engine_tree: worker ran its first serving kernel", flush=True)


def engine_core(ready=None, serve=None):
    setproctitle.setproctitle("VLLM::EngineCore")
    child = multiprocessing.get_context("spawn").Process(target=worker, args=(ready, serve))
    child.start()
    child.join()
    sys.exit(child.exitcode)


def serve_when_ready(ready, serve):
    """The API server: listens on the command line's --port once the engine is ready, then serves."""
    if not ready.wait(60):
        return
    port = int(sys.argv[sys.argv.index("--port") + 1])
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen()
    serve.set()
    return server


def front_only(then_cuda):
    """vLLM's API server on its own (ENGINE_TREE_FRONT=listen): it listens on --port and never calls CUDA
    (its engine runs in other processes). With ENGINE_TREE_FRONT=listen-then-cuda it then allocates once."""
    port = int(sys.argv[sys.argv.index("--port") + 1])
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen()
    print("engine_tree: the front process listens", flush=True)
    if then_cuda:
        driver = ctypes.CDLL(os.environ["ENGINE_TREE_DRIVER"])
        check(driver.cuInit(0), "cuInit")
        device = ctypes.c_int(0)
        check(driver.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
        context = ctypes.c_void_p()
        check(driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
        check(driver.cuCtxSetCurrent(context), "cuCtxSetCurrent")
        address = ctypes.c_uint64()
        check(driver.cuMemAlloc_v2(ctypes.byref(address), ctypes.c_size_t(MiB)), "allocation")
        print("engine_tree: the front process allocated", flush=True)
    server.close()


if __name__ == "__main__" and os.environ.get("ENGINE_TREE_FRONT"):
    front_only(os.environ["ENGINE_TREE_FRONT"] == "listen-then-cuda")
elif __name__ == "__main__":
    context = multiprocessing.get_context("spawn")
    serving = os.environ.get("ENGINE_TREE_SERVE") == "1"
    ready, serve = (context.Event(), context.Event()) if serving else (None, None)
    core = context.Process(target=engine_core, args=(ready, serve))
    core.start()
    server = serve_when_ready(ready, serve) if serving else None
    core.join()
    sys.exit(core.exitcode)
elif __name__ == "standalone":
    worker()
