"""PyTorch on a real GPU under LD_PRELOAD=libkvremap.so: allocate, query, capture and replay a CUDA
graph, then print torch's own accounting for comparison with the kvremap trace (scripts/gpu-check.sh)."""
import json

import torch

MiB = 1 << 20

weights = [torch.empty(64 * MiB, dtype=torch.uint8, device="cuda") for _ in range(4)]
free, total = torch.cuda.mem_get_info()
print(f"mem_get_info: free {free // MiB} MiB of {total // MiB} MiB")

static_in = torch.ones(1 << 20, device="cuda")
static_out = torch.zeros_like(static_in)
stream = torch.cuda.Stream()
stream.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(stream):
    for _ in range(3):  # warm-up outside the capture, as torch.cuda.graphs recommends
        static_out.copy_(static_in * 2)
torch.cuda.current_stream().wait_stream(stream)
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    scratch = torch.empty(32 * MiB, dtype=torch.uint8, device="cuda")  # lands in the graph pool
    static_out.copy_(static_in * 3)
static_in.fill_(2)
graph.replay()
torch.cuda.synchronize()
assert float(static_out[0]) == 6.0, "graph replay produced a wrong value"
print("graph replay ok")

stats = torch.cuda.memory_stats()
print(json.dumps({
    "reserved_bytes.all.current": stats["reserved_bytes.all.current"],
    "reserved_bytes.all.peak": stats["reserved_bytes.all.peak"],
    "allocated_bytes.all.current": stats["allocated_bytes.all.current"],
    "num_alloc_retries": stats["num_alloc_retries"],
    "segment.all.current": stats["segment.all.current"],
}))
