# A process tree shaped like vLLM on Ray: Ray's workers are programs the raylet starts by exec, not
# multiprocessing children, and the raylet is a program of its own.
# - `python3 <dir>/vllm serve MODEL --port P --distributed-executor-backend ray`: vLLM starting the Ray
#   cluster itself. The API server spawns its engine core (renamed VLLM::EngineCore), whose executor calls
#   ray.init() with no cluster to connect to (vLLM v1/executor/ray_utils.py:597), which starts the raylet
#   by subprocess (Ray's services.start_ray_process); the API server listens on P once the worker is ready.
# - `python3 <dir>/ray start --head --block`: a cluster started on its own, as `kvremap run -- ray start`
#   would (vLLM's ray.init() connects to it from another tree); it starts the raylet and, once the worker
#   is ready, lets it serve (no port of its own).
# The raylet forks and execs Ray's setup_worker.py (worker_pool.cc StartProcess, not decoupled), which
# applies the runtime environment's variables (RAY_TREE_RUNTIME_ENV_VARS, JSON, here) and execs
# default_worker.py in its place (runtime_env/context.py exec_worker); the worker renames itself as Ray
# titles vLLM's actor, `ray::RayWorkerWrapper`, and does engine_tree.py's worker start-up: a KV cache on the
# simulated driver, a start-up kernel, then a serving kernel once released.
# With RAY_TREE_HOLD_ROOT=1, `vllm serve` only prints the root kvremap hands its descendants
# (KVREMAP_ENGINE_ROOT) and waits for its stdin to close: a vLLM of another tree, whose root a test hands
# to a worker that does not descend from it.
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time

import setproctitle

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import engine_tree  # noqa: E402 (beside this file)

SCRIPT = os.path.realpath(__file__)


class FileEvent:
    """multiprocessing.Event's set and wait across exec'd processes: a file in a directory they inherit."""

    def __init__(self, name):
        self.path = os.path.join(os.environ["RAY_TREE_SYNC"], name)

    def set(self):
        open(self.path, "w").close()

    def wait(self, timeout):
        deadline = time.monotonic() + timeout
        while not os.path.exists(self.path):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True


def start_raylet():
    return subprocess.Popen([sys.executable, SCRIPT, "raylet", "--raylet_socket_name=/tmp/ray/session/raylet",
                             "--node_ip_address=127.0.0.1"])


def raylet():
    context = json.dumps({"env_vars": json.loads(os.environ.get("RAY_TREE_RUNTIME_ENV_VARS", "{}"))})
    worker = subprocess.Popen([sys.executable, SCRIPT, "setup_worker", "--serialized-runtime-env-context=" + context,
                               "--language=PYTHON", sys.executable, SCRIPT, "default_worker",
                               "--node-ip-address=127.0.0.1"])
    sys.exit(worker.wait())


def setup_worker(args):
    context = json.loads(args[0].split("=", 1)[1])
    os.environ.update(context["env_vars"])
    command = args[2:]
    os.execv(command[0], command)


def engine_core_on_ray():
    setproctitle.setproctitle("VLLM::EngineCore")
    sys.exit(start_raylet().wait())


def vllm_serve_on_ray():
    core = multiprocessing.get_context("spawn").Process(target=engine_core_on_ray)
    core.start()
    server = engine_tree.serve_when_ready(FileEvent("ready"), FileEvent("serve"))
    core.join()
    if server:
        server.close()
    return core.exitcode


def ray_start_block():
    cluster = start_raylet()
    if FileEvent("ready").wait(60):
        FileEvent("serve").set()
    return cluster.wait()


if __name__ == "__main__":
    role = os.path.basename(sys.argv[0])
    if role == "vllm" and os.environ.get("RAY_TREE_HOLD_ROOT") == "1":
        print(os.environ.get("KVREMAP_ENGINE_ROOT", ""), flush=True)
        sys.stdin.read()
    elif role in ("vllm", "ray"):
        with tempfile.TemporaryDirectory() as sync:
            os.environ["RAY_TREE_SYNC"] = sync
            code = vllm_serve_on_ray() if role == "vllm" else ray_start_block()
        sys.exit(code)
    elif sys.argv[1] == "raylet":
        raylet()
    elif sys.argv[1] == "setup_worker":
        setup_worker(sys.argv[2:])
    elif sys.argv[1] == "default_worker":
        engine_tree.worker(FileEvent("ready"), FileEvent("serve"), title="ray::RayWorkerWrapper")
