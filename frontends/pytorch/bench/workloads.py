"""The issue-5 PyTorch workloads: each case is a module (parameters, if any,
made once from a fixed seed) and the inputs it is called with. Inference
only: parameters do not require grad and every call runs under no_grad.

    chain100_64x64_f32   100 dependent elementwise ops (x * 0.999, x + 0.001
                         alternating) on a 64x64 f32 tensor
    mlp_microbatch       4 x (Linear(256, 256), LayerNorm(256), GELU), f32,
                         batch 1, 4, 8 (one case each)
    attention_small      softmax(Q K^T / sqrt(64)) V, 8 heads, head dim 64,
                         batch 1, sequence 32 and 128 (one case each), f32
    decoder_step         one decode step of a 2-layer pre-LayerNorm decoder,
                         hidden 256, 4 heads (dim 64), MLP 1024, batch 1:
                         attends over a KV cache of 128 positions plus the
                         new token; returns the hidden state and each layer's
                         new key and value (to be appended by the caller)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn


class Chain100(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i in range(100):
            x = x * 0.999 if i % 2 else x + 0.001
        return x


class Mlp(nn.Module):
    def __init__(self, width: int = 256, layers: int = 4):
        super().__init__()
        self.net = nn.Sequential(*[m for _ in range(layers) for m in
                                   (nn.Linear(width, width), nn.LayerNorm(width), nn.GELU())])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class Attention(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        return torch.softmax(scores, dim=-1) @ v


class DecoderLayer(nn.Module):
    def __init__(self, hidden: int, heads: int, mlp: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.fc1, self.fc2 = nn.Linear(hidden, mlp), nn.Linear(mlp, hidden)

    def forward(self, x, k_cache, v_cache):
        batch, tokens, hidden = x.shape
        head_dim = hidden // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(hidden, dim=-1)
        q, k, v = (t.view(batch, tokens, self.heads, head_dim).transpose(1, 2) for t in (q, k, v))
        keys = torch.cat([k_cache, k], dim=2)
        values = torch.cat([v_cache, v], dim=2)
        scores = q @ keys.transpose(-2, -1) / math.sqrt(head_dim)
        attended = (torch.softmax(scores, dim=-1) @ values).transpose(1, 2)
        x = x + self.proj(attended.reshape(batch, tokens, hidden))
        x = x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))
        return x, k, v


class DecoderStep(nn.Module):
    def __init__(self, hidden: int = 256, heads: int = 4, layers: int = 2, mlp: int = 1024):
        super().__init__()
        self.layers = nn.ModuleList([DecoderLayer(hidden, heads, mlp) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(hidden)

    def forward(self, x, *caches):
        new_kv = []
        for i, layer in enumerate(self.layers):
            x, k, v = layer(x, caches[2 * i], caches[2 * i + 1])
            new_kv += [k, v]
        return (self.ln_f(x), *new_kv)


@dataclass
class Case:
    """One benchmark case: `make_module()` and `make_inputs(device, generator)`
    (fresh random inputs, never zeros)."""

    workload: str
    params: dict
    make_module: Callable[[], nn.Module]
    make_inputs: Callable[[torch.device, torch.Generator], list]
    dtype: torch.dtype = torch.float32
    notes: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        suffix = "".join(f" {k}={v}" for k, v in self.params.items())
        return self.workload + suffix


def _randn(generator: torch.Generator, device: torch.device, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=generator).to(device)


def cases() -> list[Case]:
    result = [Case("chain100_64x64_f32", {}, Chain100,
                   lambda d, g: [_randn(g, d, 64, 64)],
                   notes={"ops": "100 dependent elementwise ops: x * 0.999, x + 0.001, "
                                  "alternating"})]
    for batch in (1, 4, 8):
        result.append(Case("mlp_microbatch", {"batch": batch}, Mlp,
                           lambda d, g, b=batch: [_randn(g, d, b, 256)],
                           notes={"shape": "4 x (Linear(256,256), LayerNorm(256), GELU)"}))
    for seq in (32, 128):
        result.append(Case("attention_small", {"seq": seq}, Attention,
                           lambda d, g, s=seq: [_randn(g, d, 1, 8, s, 64) for _ in range(3)],
                           notes={"shape": "batch 1, 8 heads, head dim 64, q/k/v (1, 8, seq, 64)"}))
    result.append(Case("decoder_step", {"kv_cache": 128}, DecoderStep,
                       lambda d, g: [_randn(g, d, 1, 1, 256)] +
                       [_randn(g, d, 1, 4, 128, 64) for _ in range(4)],
                       notes={"shape": "2 layers, hidden 256, 4 heads, MLP 1024, batch 1, one "
                              "token, KV cache 128 per layer (attention over 129 positions)"}))
    return result


def build(case: Case, device: torch.device, seed: int = 0) -> nn.Module:
    """The case's module on `device`, parameters from `seed`, inference only."""
    torch.manual_seed(seed)
    module = case.make_module().to(device).eval()
    module.requires_grad_(False)
    return module
