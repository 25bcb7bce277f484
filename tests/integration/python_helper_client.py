# An engine that allocates its own KV cache and uses kvremap's Python helper (python/kvremap): a warm-up
# allocation, two KV tensors inside `with kvremap.tag("kv")`, a post-KV allocation (the burst is over), then
# kvremap.commit() where the engine knows its start-up ends. Prints what the helper answered. On the
# simulated driver (PYTHON_HELPER_DRIVER).
import ctypes
import os
import sys

import kvremap

MiB = 1 << 20


def check(result, what):
    if result != 0:
        print(f"python_helper: {what} failed: {result}", flush=True)
        sys.exit(1)


driver = ctypes.CDLL(os.environ["PYTHON_HELPER_DRIVER"])
check(driver.cuInit(0), "cuInit")
device = ctypes.c_int(0)
check(driver.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
context = ctypes.c_void_p()
check(driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
check(driver.cuCtxSetCurrent(context), "cuCtxSetCurrent")
address = ctypes.c_uint64()
check(driver.cuMemAlloc_v2(ctypes.byref(address), ctypes.c_size_t(MiB)), "warm-up allocation")
with kvremap.tag("kv"):
    for _ in range(2):
        check(driver.cuMemAlloc_v2(ctypes.byref(address), ctypes.c_size_t(32 * MiB)), "KV tensor")
check(driver.cuMemAlloc_v2(ctypes.byref(address), ctypes.c_size_t(8 * MiB)), "post-KV allocation")
try:
    with kvremap.tag("weights"):
        pass
except ValueError as error:
    print(f"python_helper: {error}", flush=True)
print(f"python_helper: module {kvremap.__file__}", flush=True)
print(f"python_helper: available {kvremap.available()}, version {kvremap.version()}", flush=True)
print(f"python_helper: commit {kvremap.commit()}", flush=True)
print(f"python_helper: commit again {kvremap.commit()}", flush=True)
