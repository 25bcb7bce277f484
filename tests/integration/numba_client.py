# Numba's CUDA driver binding (Debian's python3-numba) driving the simulated libcuda.so.1: init, memory info, alloc, copy, free.
# Run with NUMBA_CUDA_DRIVER=<simulated libcuda.so.1>; prints "numba-client: ok allocated=BYTES" on success.
import sys

import numpy as np
from numba import cuda
from numba.cuda.cudadrv import driver as numba_driver

# CUDA 13 gave cuCtxGetDevice_v2 and cuCtxSynchronize_v2 a context parameter; numba 0.56 looks names up
# with a "_v2" suffix first and would call them without it (on a real CUDA 13 driver as well). Bind those
# two to their unversioned ABI, which is what numba's prototypes describe.
_find_api = numba_driver.Driver._find_api


def _find_api_cuda13(self, fname):
    if fname in ("cuCtxGetDevice", "cuCtxSynchronize"):
        return getattr(self.lib, fname)
    return _find_api(self, fname)


numba_driver.Driver._find_api = _find_api_cuda13

MiB = 1 << 20
expected_total = int(sys.argv[1]) if len(sys.argv) > 1 else 0

ctx = cuda.current_context()
free0, total = ctx.get_memory_info()
assert expected_total == 0 or total == expected_total, (total, expected_total)
dev = cuda.get_current_device()
assert dev.compute_capability == (9, 0), dev.compute_capability
assert len(dev.uuid) > 4, dev.uuid

# Three allocations of known sizes: 3, 5 and 7 MiB (float32 elements).
host = np.arange(3 * MiB // 4, dtype=np.float32)
d_a = cuda.to_device(host)  # cuMemAlloc + cuMemcpyHtoD
d_b = cuda.device_array(5 * MiB // 4, dtype=np.float32)  # cuMemAlloc
d_c = cuda.device_array_like(np.zeros(7 * MiB // 4, dtype=np.float32))
d_b[: host.size].copy_to_device(d_a)  # cuMemcpyDtoD
back = d_b[: host.size].copy_to_host()  # cuMemcpyDtoH
assert (back == host).all()
free1, _ = ctx.get_memory_info()
assert free0 - free1 >= 15 * MiB, (free0, free1)

# A stream, events and pinned memory: the calls engines make around copies.
stream = cuda.stream()
start, end = cuda.event(), cuda.event()
start.record(stream)
pinned = cuda.pinned_array(1024, dtype=np.float32)
pinned[:] = 7
d_pinned = cuda.to_device(pinned, stream=stream)
out = d_pinned.copy_to_host(stream=stream)
end.record(stream)
end.synchronize()
assert (out == 7).all()
assert cuda.event_elapsed_time(start, end) >= 0.0
stream.synchronize()

# Pointer queries numba makes for device arrays.
begin, end_addr = numba_driver.device_extents(d_c)  # cuMemGetAddressRange
assert end_addr - begin == 7 * MiB, (begin, end_addr)

del d_a, d_b, d_c, d_pinned, back
import gc
gc.collect()
ctx.memory_manager.deallocations.clear()  # numba defers frees; this makes them happen now (cuMemFree)
free2, _ = ctx.get_memory_info()
assert free2 == free0, (free0, free2)
print("numba-client: ok allocated=%d" % (15 * MiB + 4096))
