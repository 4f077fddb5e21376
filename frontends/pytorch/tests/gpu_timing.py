"""What the GPU tests share: chain100 and a median timing of a call on
PyTorch's current stream."""

import statistics
import time

import torch


def chain100(x):
    """chain100_64x64_f32's body: 100 dependent elementwise ops."""
    for i in range(100):
        x = x * 0.999 if i % 2 else x + 0.001
    return x


def median_us(fn, iterations=200, warmup=20):
    """(median, p10, p90) in microseconds of `fn()`, each call timed until
    PyTorch's current stream is synchronized (a gpuos call is ordered on it)."""
    stream = torch.cuda.current_stream()
    for _ in range(warmup):
        fn()
    stream.synchronize()
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        fn()
        stream.synchronize()
        times.append((time.perf_counter() - start) * 1e6)
    times.sort()
    return statistics.median(times), times[len(times) // 10], times[9 * len(times) // 10]
