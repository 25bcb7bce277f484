"""A vLLM-shaped start-up in PyTorch under LD_PRELOAD=libkvremap.so KVREMAP_MODE=defer (scripts/gpu-check.sh):
weights, a profiling forward, the sizing query, KV tensors (torch.zeros), autotune-like transients that
only fit while KV is deferred, CUDA-graph captures on a side stream whose warm-ups write KV, the query
after the loop, then at once an eager forward on the default stream that writes KV (the first request
above the largest captured size). Checks the commit came before that forward: its KV writes read back,
KV it did not write reads zero, and a replayed graph writes KV at the addresses it captured."""
import json
import sys

import torch

MiB = 1 << 20
GiB = 1 << 30
out = {}

torch.cuda.init()
torch.cuda.empty_cache()
free0, total = torch.cuda.mem_get_info()  # vLLM's baseline
out["total_gib"] = total / GiB

weights = [torch.empty(1 * GiB, dtype=torch.uint8, device="cuda") for _ in range(8)]
torch.cuda.mem_get_info()  # "model loading took ..." (weights are in)

# Profiling: one forward at the maximum batch, activations of different shapes, many kernels.
acts = [torch.full(((i + 1) * 64 * MiB // 4,), float(i + 1), device="cuda") for i in range(8)]
for _ in range(40):
    for a in acts[:4]:
        a.mul_(1.0001)
del acts
torch.cuda.synchronize()
torch.cuda.empty_cache()
free_sized, _ = torch.cuda.mem_get_info()  # the sizing query
out["free_at_sizing_gib"] = free_sized / GiB

# KV: 70% of what is free, one torch.zeros per layer, all the same size.
layers = 32
per_layer = int(free_sized * 0.70 / layers) // (2 * MiB) * (2 * MiB)
kv = [torch.zeros(per_layer, dtype=torch.int8, device="cuda") for _ in range(layers)]
out["kv_gib"] = per_layer * layers / GiB
block_table = torch.zeros(4 * MiB, dtype=torch.int32, device="cuda")  # a persistent buffer after the KV burst

# Autotune-like work after KV: transients larger than what the KV cache left free (stock would OOM).
free_after_kv, _ = torch.cuda.mem_get_info()
transient_bytes = int(free_sized * 0.70 * 0.5)
try:
    t = torch.empty(transient_bytes, dtype=torch.uint8, device="cuda")
    t.fill_(7)
    torch.cuda.synchronize()
    del t
    out["autotune_transient_gib"] = transient_bytes / GiB
    out["autotune_ok"] = True
except torch.cuda.OutOfMemoryError as e:
    out["autotune_ok"] = False
    out["autotune_error"] = str(e).splitlines()[0]
torch.cuda.empty_cache()

# Capture loop on a side stream (vLLM's graph_capture()): warm-ups then a capture, each writing KV.
before_capture, _ = torch.cuda.mem_get_info()
stream = torch.cuda.Stream()
stream.wait_stream(torch.cuda.current_stream())
graphs = []
pool = None
with torch.cuda.stream(stream):
    for size in (8, 4, 2, 1):
        for _ in range(2):  # warm-ups write KV, as attention does; their values are thrown away
            for layer in kv[:4]:
                layer[: size * MiB].fill_(size)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool, stream=stream):
            for layer in kv:
                layer[per_layer - size * MiB:].fill_(size + 100)  # the graph's KV writes, at the tail
        pool = g.pool()
        graphs.append((size, g))
torch.cuda.current_stream().wait_stream(stream)
torch.cuda.synchronize()
after_capture, _ = torch.cuda.mem_get_info()
out["graph_capture_took_gib"] = (before_capture - after_capture) / GiB

# The first request: an eager prefill on the default stream, right away, writing KV.
pattern = torch.arange(64 * MiB, device="cuda", dtype=torch.int32).remainder(251).to(torch.int8)
for layer in kv:
    layer[MiB : MiB + pattern.numel()].copy_(pattern)
torch.cuda.synchronize()

ok = True
for i, layer in enumerate(kv):
    if not torch.equal(layer[MiB : MiB + pattern.numel()], pattern):
        ok = False
        out.setdefault("errors", []).append(f"layer {i}: the prefill's KV writes did not read back")
    untouched = layer[MiB + pattern.numel() : per_layer - 8 * MiB]
    if untouched.numel() and int(untouched.abs().max()) != 0:
        ok = False
        out.setdefault("errors", []).append(f"layer {i}: KV the prefill did not write is not zero")

# Decode: replay a captured graph; its writes must land in the committed KV at the captured addresses.
size, g = graphs[-1]
g.replay()
torch.cuda.synchronize()
for i, layer in enumerate(kv):
    if int(layer[per_layer - size * MiB :].min()) != size + 100:
        ok = False
        out.setdefault("errors", []).append(f"layer {i}: the replayed graph's KV writes are missing")
    if not torch.equal(layer[MiB : MiB + pattern.numel()], pattern):
        ok = False
        out.setdefault("errors", []).append(f"layer {i}: the prefill's KV was lost after the replay")
out["kv_intact"] = ok
print(json.dumps(out, indent=1))
sys.exit(0 if ok else 1)
