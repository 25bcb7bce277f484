#!/usr/bin/env python3
"""Writes a large, valid synthetic kvremap trace for measuring the reader's time and memory.

Usage: make_synthetic_trace.py OUT.json [MEGABYTES]   (default 200)

The file is complete.json's header followed by alloc/free pairs and counter samples in the
writer's line format, closed with ']' (no summary, so `kvremap report` replays the events).
"""
import sys

HEADER = (
    '[\n'
    '{"ph":"M","name":"process_name","pid":4242,"tid":4242,"ts":0,"args":{"name":"kvremap: python3 (pid 4242)"}}\n'
    ',{"ph":"M","cat":"kvremap","name":"kvremap_trace","pid":4242,"tid":4242,"ts":0,"args":{"schema_version":1,'
    '"library_version":"0.1.0","hostname":"gpu-node-1","pid":4242,"ppid":4200,"cmdline":"python3 -m vllm",'
    '"start_unix_ns":1735689600000000000,"options":{"KVREMAP_MODE":"observe"}}}\n'
    ',{"ph":"M","cat":"kvremap","name":"kvremap_device","pid":4242,"tid":4242,"ts":0,'
    '"args":{"device":0,"total_bytes":85899345920}}\n'
)
ALLOC = (',{{"ph":"i","cat":"alloc","name":"alloc","pid":4242,"tid":4242,"ts":{ts},"s":"t","args":{{"api":"cudaMalloc",'
         '"ptr":"0x{ptr:x}","bytes":{bytes},"device":0,"category":"other","phase":"loading","caller":"libc10_cuda.so"}}}}\n')
FREE = (',{{"ph":"i","cat":"alloc","name":"free","pid":4242,"tid":4242,"ts":{ts},"s":"t","args":{{"api":"cudaFree",'
        '"ptr":"0x{ptr:x}","bytes":{bytes},"device":0,"category":"other"}}}}\n')
COUNTER = (',{{"ph":"C","cat":"memory","name":"device 0 bytes","pid":4242,"tid":4242,"ts":{ts},"args":{{"kv":0,'
           '"graph_pool":0,"graph_exec":0,"module":0,"async_pool":0,"vmm":0,"other":{live}}}}}\n')


def main():
    out = sys.argv[1]
    target = int(float(sys.argv[2]) * 1e6) if len(sys.argv) > 2 else 200_000_000
    written = 0
    with open(out, "w") as f:
        f.write(HEADER)
        written += len(HEADER)
        i = 0
        while written < target:
            ptr = 0x7F0000000000 + (i % 4096) * 0x200000
            bytes_ = 2097152 + (i % 7) * 4096
            chunk = (ALLOC.format(ts=1000 + 3 * i, ptr=ptr, bytes=bytes_)
                     + COUNTER.format(ts=1000 + 3 * i, live=bytes_)
                     + FREE.format(ts=1001 + 3 * i, ptr=ptr, bytes=bytes_)
                     + COUNTER.format(ts=1001 + 3 * i, live=0))
            f.write(chunk)
            written += len(chunk)
            i += 1
        f.write("]\n")


if __name__ == "__main__":
    main()
