"""PyTorch reference for BenchmarkGEMMBF16Pairs: y = x @ W.T with bf16 x and W (what a bf16
model's linear layer runs; oneDNN uses AMX where the CPU has it), on the same shapes, in
torch.set_num_threads(THREADS) threads. Prints one line per shape: m n k GFLOP/s."""
import sys
import time

import torch

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
torch.set_num_threads(threads)
shapes = [(512, 1536, 576), (512, 576, 1536), (512, 4864, 896), (512, 896, 4864), (1024, 1024, 1024)]
for m, n, k in shapes:
    x = torch.randn(m, k).to(torch.bfloat16)
    w = torch.randn(n, k).to(torch.bfloat16)
    for _ in range(3):
        torch.nn.functional.linear(x, w)
    reps, best = 10, 0.0
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            torch.nn.functional.linear(x, w)
        dt = (time.perf_counter() - t0) / reps
        best = max(best, 2 * m * n * k / dt / 1e9)
    print(m, n, k, f"{best:.1f}")
