#!/usr/bin/env python3
"""Triton's own first-call latency for kevo's Triton seeds, to set beside
kevo's compile time per candidate (`wall.compile_s` in `kevo eval --json`).

A jit function's first call with an empty cache compiles it (the same
Triton compiler kevo's helper runs), loads the binary and launches it; the
second call finds it compiled. Each seed runs in a fresh cache directory.

usage: python3 scripts/triton-jit-latency.py crates/tasks/assets [EVAL_JSON]
(on a machine with a CUDA GPU, torch and triton)
"""
import importlib.util
import json
import os
import sys
import tempfile
import time

ASSETS = sys.argv[1]
# Arguments per task: small buffers and sizes (the timing is of the
# compile; the data only has to be in bounds).
# task -> (entry point, arguments, grid as the seed's directive gives it).
CASES = {
    "saxpy": ("saxpy", lambda t: [t.randn(1 << 16), t.randn(1 << 16), 2.5, 1 << 16], (64,)),
    "heat2d": ("heat_step", lambda t: [t.randn(256 * 256), t.empty(256 * 256), 256, 256, 0.2], (1, 256)),
}


def load(task):
    path = os.path.join(ASSETS, task, "seed.py")
    spec = importlib.util.spec_from_file_location(f"seed_{task}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    import torch

    torch.cuda.init()
    rows = []
    for task, (name, make_args, grid) in CASES.items():
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"jit-{task}-")
        kernel = getattr(load(task), name)
        args = [a.cuda() if hasattr(a, "cuda") else a for a in make_args(torch)]
        torch.cuda.synchronize()
        t = time.perf_counter()
        kernel[grid](*args)
        torch.cuda.synchronize()
        cold = time.perf_counter() - t
        t = time.perf_counter()
        kernel[grid](*args)
        torch.cuda.synchronize()
        warm = time.perf_counter() - t
        rows.append((task, cold, warm))
    import triton

    print(f"triton {triton.__version__}: first call with an empty cache (compile + load + launch), then a warm call")
    print("| task | Triton first call s | Triton warm call ms |")
    print("|---|---|---|")
    for task, cold, warm in rows:
        print(f"| {task} | {cold:.3f} | {warm * 1e3:.3f} |")
    if len(sys.argv) > 2:
        data = json.load(open(sys.argv[2]))
        print("\nkevo compile per candidate (helper check + Triton compile + cubin load), from", sys.argv[2])
        print("| task | kevo compile s |")
        print("|---|---|")
        for e in data:
            print(f"| {e['task']} | {e['wall']['compile_s']:.3f} |")


main()
