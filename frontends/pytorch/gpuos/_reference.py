"""A CPU interpreter of task programs, with each operator's pack semantics
written in torch (operators/*.yaml). It runs a Program exactly as the device
would see it (buffers, strided views, tasks), so tests can check the lowering
against eager PyTorch without a GPU, and check that dependencies suffice by
running the tasks in a shuffled order that respects them.
"""

from __future__ import annotations

import random
from typing import Optional, Sequence

import torch

from ._packs import ITEM_SIZES, TORCH_DTYPES
from ._program import CONSTANT, INPUT, Program, View

# layer_norm's `activation` attribute (device/include/gpuos/device/normalization.cuh).
NORM_ACTIVATIONS = {
    1: torch.nn.functional.gelu,
    2: lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    3: torch.relu,
}


def _reduce_trailing(x: torch.Tensor, out_rank: int) -> tuple[torch.Tensor, int]:
    """x with its trailing (rank - out_rank) dimensions flattened into one."""
    k = x.dim() - out_rank
    lead = list(x.shape[:out_rank])
    return x.reshape(lead + [-1]) if k > 0 else x.unsqueeze(-1), k


def _elementwise(op: str, ins: list[torch.Tensor], attrs: dict[str, float]) -> torch.Tensor:
    a = ins[0] if ins else None
    b = ins[1] if len(ins) > 1 else None
    table = {
        "add": lambda: a + attrs.get("alpha", 1.0) * b if attrs.get("alpha", 1.0) != 1 else a + b,
        "sub": lambda: a - attrs.get("alpha", 1.0) * b if attrs.get("alpha", 1.0) != 1 else a - b,
        "mul": lambda: a * b, "div": lambda: a / b, "neg": lambda: -a, "abs": lambda: a.abs(),
        "relu": lambda: torch.relu(a), "sigmoid": lambda: torch.sigmoid(a),
        "tanh": lambda: torch.tanh(a), "exp": lambda: torch.exp(a), "log": lambda: torch.log(a),
        "sqrt": lambda: torch.sqrt(a), "pow": lambda: torch.pow(a, b),
        "maximum": lambda: torch.maximum(a, b), "minimum": lambda: torch.minimum(a, b),
        "where": lambda: torch.where(a, b, ins[2]),
        "eq": lambda: a == b, "ne": lambda: a != b, "lt": lambda: a < b, "gt": lambda: a > b,
        "le": lambda: a <= b, "ge": lambda: a >= b,
        "logical_and": lambda: torch.logical_and(a, b), "logical_or": lambda: torch.logical_or(a, b),
        "logical_xor": lambda: torch.logical_xor(a, b), "logical_not": lambda: torch.logical_not(a),
        "erf": lambda: torch.erf(a), "rsqrt": lambda: torch.rsqrt(a),
        "reciprocal": lambda: torch.reciprocal(a), "square": lambda: a * a,
        "sign": lambda: torch.sign(a), "floor": lambda: torch.floor(a),
        "ceil": lambda: torch.ceil(a), "round": lambda: torch.round(a),
        "gelu": lambda: torch.nn.functional.gelu(a),
        "gelu_tanh": lambda: torch.nn.functional.gelu(a, approximate="tanh"),
        "silu": lambda: torch.nn.functional.silu(a), "copy": lambda: a, "cast": lambda: a,
    }
    if op == "clamp":
        lo, hi = attrs["lo"], attrs["hi"]
        if a.is_floating_point():  # the lowering writes +-DBL_MAX for "no bound"
            lo = -float("inf") if lo <= -1e308 else lo
            hi = float("inf") if hi >= 1e308 else hi
        else:
            info = torch.iinfo(a.dtype)
            lo, hi = int(max(lo, info.min)), int(min(hi, info.max))
        return torch.clamp(a, lo, hi)
    return table[op]()


def _addmm(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, attrs: dict[str, float],
           dtype: torch.dtype) -> torch.Tensor:
    """addmm as the device computes it: the product and the bias in the
    compute type (float for f16 / bf16), not rounded; beta == 0 never reads c."""
    compute = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    result = alpha * torch.matmul(a.to(compute), b.to(compute))
    if beta != 0:
        result = beta * c.to(compute) + result
    return result


def _run_task(op: str, ins: list[torch.Tensor], out: torch.Tensor, attrs: dict[str, float]):
    if op == "fill":
        out.fill_(attrs.get("value", 0.0))
    elif op == "arange":
        n = out.numel()
        values = attrs.get("start", 0.0) + torch.arange(n, dtype=torch.float64) * attrs.get("step", 1.0)
        out.copy_(values.reshape(out.shape))
    elif op == "cat":
        out.copy_(torch.cat(ins, dim=int(attrs.get("dim", 0))))
    elif op == "index_select":
        out.copy_(torch.index_select(ins[0], int(attrs.get("dim", 0)), ins[1]))
    elif op == "gather":
        out.copy_(torch.gather(ins[0], int(attrs.get("dim", 0)), ins[1]))
    elif op in ("matmul", "bmm"):
        out.copy_(torch.matmul(ins[0], ins[1]))
    elif op in ("addmm", "baddbmm"):
        out.copy_(_addmm(ins[0], ins[1], ins[2], attrs, out.dtype))
    elif op == "fused_addmm":
        # matmul_fused.cuh: the layer_norm prologue, addmm, the activation and
        # the residual, rounded to the dtype where separate tasks would store.
        compute = torch.float32 if out.dtype in (torch.float16, torch.bfloat16) else out.dtype
        a = ins[0]
        norm = int(attrs.get("norm", 0))
        if norm:
            a = torch.nn.functional.layer_norm(a.to(compute), [a.shape[-1]], ins[3].to(compute),
                                               ins[4].to(compute), attrs.get("eps", 1e-5))
            if norm > 1:
                a = NORM_ACTIVATIONS[norm - 1](a.to(out.dtype).to(compute))
            a = a.to(out.dtype)
        result = _addmm(a, ins[1], ins[2], attrs, out.dtype)
        activation = int(attrs.get("activation", 0))
        if activation or attrs.get("add_residual", 0):
            result = result.to(out.dtype).to(compute)
        if activation:
            result = NORM_ACTIVATIONS[activation](result).to(out.dtype).to(compute)
        if attrs.get("add_residual", 0):
            result = result + ins[5].to(compute)
        out.copy_(result)
    elif op == "softmax":
        out.copy_(torch.softmax(ins[0], -1))
    elif op == "log_softmax":
        out.copy_(torch.log_softmax(ins[0], -1))
    elif op == "layer_norm":
        n = ins[0].shape[-1]
        result = torch.nn.functional.layer_norm(ins[0], [n], ins[1], ins[2], attrs.get("eps", 1e-5))
        activation = int(attrs.get("activation", 0))
        if activation:  # rounded to the output's dtype first, as the separate task reads it
            result = NORM_ACTIVATIONS[activation](result.to(out.dtype).to(result.dtype))
        out.copy_(result)
    elif op == "rms_norm":
        x = ins[0]
        scale = torch.rsqrt((x * x).mean(-1, keepdim=True) + attrs.get("eps", 1e-6))
        out.copy_(x * scale * ins[1])
    elif op in ("sum", "mean", "prod", "amax", "amin", "argmax", "var"):
        x, _ = _reduce_trailing(ins[0], out.dim())
        if op == "var":
            r = torch.var(x, -1, correction=attrs.get("correction", 1.0))
        elif op in ("amax", "amin"):
            r = getattr(torch, op)(x, -1)
        else:
            r = getattr(torch, op)(x, -1)
        out.copy_(r.reshape(out.shape))
    else:
        out.copy_(_elementwise(op, ins, attrs))


def _run_fused(fused: dict, dtype: str, ins: list[torch.Tensor], out: torch.Tensor) -> None:
    """A fused task as the device runs it: the steps in order on values of the
    compute type (float for f16 and bf16), literals rounded to the dtype first."""
    torch_dtype = TORCH_DTYPES[dtype]
    compute = torch.float32 if dtype in ("f16", "bf16") else torch_dtype
    steps: list[torch.Tensor] = []
    for step in fused["steps"]:
        operands = []
        for kind, value in step["operands"]:
            if kind == "input":
                operands.append(ins[value].to(compute))
            elif kind == "step":
                operands.append(steps[value])
            else:
                number = float(value) if torch_dtype.is_floating_point else int(value)
                operands.append(torch.tensor(number, dtype=torch_dtype).to(compute))
        attrs = {k: float(v) for k, v in step["attributes"].items()}
        result = _elementwise(step["op"], operands, attrs)
        steps.append(result.to(compute).expand(out.shape))
    out.copy_(steps[-1])


def run_reference(program: Program, args: Sequence[torch.Tensor],
                  shuffle_seed: Optional[int] = None) -> list[torch.Tensor]:
    """Runs `program` on the CPU for inputs `args`; returns its results.
    With `shuffle_seed`, tasks run in a random order allowed by their deps."""
    storages: list[tuple[torch.Tensor, int]] = []  # (tensor, storage offset of element 0)
    outputs: list[torch.Tensor] = []
    for b in program.buffers:
        if b.kind == INPUT:
            t = args[b.index]
            storages.append((t, t.storage_offset()))
        elif b.kind == CONSTANT:
            storages.append((b.tensor.cpu() if b.tensor.device.type != "cpu" else b.tensor,
                             b.tensor.storage_offset()))
        else:
            elements = max(b.span_bytes // ITEM_SIZES[b.dtype], 1)
            flat = torch.full((elements,), float("nan") if b.dtype in ("f32", "f64", "f16", "bf16") else 0,
                              dtype=TORCH_DTYPES[b.dtype])
            storages.append((flat, 0))
            if b.kind == "output":
                outputs.append(torch.as_strided(flat, b.sizes, b.strides))

    def view(v: View) -> torch.Tensor:
        base, offset = storages[v.buffer]
        return torch.as_strided(base, v.sizes, v.strides, offset + v.offset)

    order = list(range(len(program.tasks)))
    if shuffle_seed is not None:
        rng, done, order = random.Random(shuffle_seed), set(), []
        while len(order) < len(program.tasks):
            ready = [i for i in range(len(program.tasks))
                     if i not in done and all(d in done for d in program.tasks[i].deps)]
            pick = rng.choice(ready)
            done.add(pick)
            order.append(pick)
    from ._packs import STANDARD_OPERATORS

    for i in order:
        task = program.tasks[i]
        if task.fused is not None:
            n_in = task.fused["num_inputs"]
            _run_fused(task.fused, task.dtype, [view(v) for v in task.tensors[:n_in]],
                       view(task.tensors[n_in]))
            continue
        n_in = STANDARD_OPERATORS[task.op].inputs
        ins = [view(v) for v in task.tensors[:n_in]]
        out = view(task.tensors[n_in])
        attrs = {k: float(v) for k, v in task.attributes.items()}
        _run_task(task.op, ins, out, attrs)
    results = []
    for r in program.results:
        source = (args[r.index] if r.kind == 0 else
                  program.buffers_of(CONSTANT)[r.index].tensor if r.kind == 1 else outputs[r.index])
        results.append(source if r.same else
                       torch.as_strided(source, r.sizes, r.strides, source.storage_offset() + r.storage_offset))
    return results
