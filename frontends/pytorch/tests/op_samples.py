"""One small function per aten overload of the coverage table (gpuos._aten),
with inputs that exercise broadcasting, views and non-contiguous layouts.
Used by the CPU tests (lowering + reference interpreter vs eager) and the GPU
tests (gpuos.compile vs eager). `sample(name, device)` -> (fn, args)."""

from __future__ import annotations

import torch

F = torch.nn.functional


def _r(*shape, device="cpu", dtype=torch.float32, positive=False):
    g = torch.Generator().manual_seed(hash(shape) % 1000)
    t = torch.randn(*shape, generator=g, dtype=torch.float64)
    if positive:
        t = t.abs() + 0.5
    return t.to(dtype).to(device)


def _i(*shape, high=10, device="cpu", dtype=torch.int64):
    g = torch.Generator().manual_seed(7)
    return torch.randint(0, high, shape, generator=g).to(dtype).to(device)


UNARY_FUNCS = {
    "neg": torch.neg, "abs": torch.abs, "relu": torch.relu, "sigmoid": torch.sigmoid,
    "tanh": torch.tanh, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal, "erf": torch.erf, "sign": torch.sign,
    "floor": torch.floor, "ceil": torch.ceil, "round": torch.round, "silu": F.silu,
}
POSITIVE = {"log", "sqrt", "rsqrt", "reciprocal"}


def _samples(d):
    x = lambda *s, **k: _r(*s, device=d, **k)  # noqa: E731
    s = {}
    for name, fn in UNARY_FUNCS.items():
        pos = name in POSITIVE
        # non-contiguous input: a transposed view
        s[f"aten.{name}.default"] = (lambda a, fn=fn: fn(a.t()), [x(6, 5, positive=pos)])
        s[f"aten.{name}_.default"] = (lambda a, fn=fn: getattr(a.clone(), fn.__name__ + "_")()
                                      if hasattr(a, fn.__name__ + "_") else fn(a),
                                      [x(4, 3, positive=pos)])
    s["aten.silu_.default"] = (lambda a: F.silu(a.clone(), inplace=True), [x(4, 3)])
    s["aten.gelu.default"] = (lambda a: F.gelu(a) + F.gelu(a, approximate="tanh"), [x(4, 8)])
    s["aten.gelu_.default"] = (lambda a: torch.ops.aten.gelu_(a.clone()), [x(4, 8)])
    for name in ("add", "sub", "mul", "div"):
        op = getattr(torch, name)
        s[f"aten.{name}.Tensor"] = (lambda a, b, op=op: op(a, b), [x(4, 1, 5), x(3, 1)])
        s[f"aten.{name}.Scalar"] = (lambda a, n=name: getattr(torch.ops.aten, n).Scalar(a, 3),
                                    [x(2, 3)])
        s[f"aten.{name}_.Tensor"] = (lambda a, b, n=name: getattr(a.clone(), n + "_")(b),
                                     [x(4, 5), x(5)])
        s[f"aten.{name}_.Scalar"] = (lambda a, n=name: getattr(torch.ops.aten, n + "_").Scalar(a.clone(), 2),
                                     [x(4, 5)])
    s["aten.add.Tensor"] = (lambda a, b: torch.add(a, b, alpha=2) + 1, [x(4, 1, 5), x(3, 1)])
    s["aten.div.Tensor"] = (lambda a, b: a / b, [_i(3, 4, device=d), _i(4, device=d) + 1])
    s["aten.maximum.default"] = (lambda a, b: torch.maximum(a, b), [x(3, 4), x(4)])
    s["aten.minimum.default"] = (lambda a, b: torch.minimum(a, b), [x(3, 4), x(3, 1)])
    s["aten.rsub.Scalar"] = (lambda a: 1 - a, [x(3, 4)])
    s["aten.rsub.Tensor"] = (lambda a, b: torch.rsub(a, b, alpha=2), [x(3, 4), x(4)])
    for name in ("eq", "ne", "lt", "gt", "le", "ge"):
        op = getattr(torch, name)
        s[f"aten.{name}.Tensor"] = (lambda a, b, op=op: op(a.round(), b.round()), [x(3, 4), x(4)])
        s[f"aten.{name}.Scalar"] = (lambda a, op=op: op(a, 0.25), [x(3, 4)])
    for name in ("logical_and", "logical_or", "logical_xor"):
        op = getattr(torch, name)
        s[f"aten.{name}.default"] = (lambda a, b, op=op: op(a > 0, b), [x(3, 4), x(4)])
    s["aten.logical_not.default"] = (lambda a: torch.logical_not(a > 0), [x(3, 4)])
    s["aten.bitwise_not.default"] = (lambda a: ~(a > 0), [x(3, 4)])
    for name in ("and", "or", "xor"):
        s[f"aten.bitwise_{name}.Tensor"] = (
            lambda a, b, n=name: getattr(torch, f"bitwise_{n}")(a > 0, b > 0), [x(3, 4), x(4)])
    s["aten.pow.Tensor_Scalar"] = (lambda a: a ** 2 + a ** 3 + a.abs() ** 0.5, [x(3, 4)])
    s["aten.pow.Tensor_Tensor"] = (lambda a, b: a ** b, [x(3, 4, positive=True), x(4)])
    s["aten.pow.Scalar"] = (lambda a: 2 ** a, [x(3, 4)])
    s["aten.clamp.default"] = (lambda a: a.clamp(-0.5, 0.5) + a.clamp(min=0.1), [x(3, 4)])
    s["aten.clamp_.default"] = (lambda a: a.clone().clamp_(max=0.2), [x(3, 4)])
    s["aten.clamp_min.default"] = (lambda a: torch.ops.aten.clamp_min(a, 0.0), [x(3, 4)])
    s["aten.clamp_max.default"] = (lambda a: torch.ops.aten.clamp_max(a, 0.0), [x(3, 4)])
    s["aten.where.self"] = (lambda c, a, b: torch.where(c > 0, a, b), [x(3, 4), x(4), x(3, 1)])
    s["aten.masked_fill.Scalar"] = (lambda a, m: a.masked_fill(m > 0, float("-inf")).softmax(-1),
                                    [x(3, 4), x(4)])
    s["aten.masked_fill.Tensor"] = (lambda a, m: a.masked_fill(m > 0, torch.tensor(5.0, device=d)),
                                    [x(3, 4), x(4)])
    # copies, casts, creation
    s["aten.clone.default"] = (lambda a: a.t().contiguous(), [x(3, 4)])
    s["aten.lift_fresh_copy.default"] = (lambda a: a + torch.tensor([1.0, 2.0, 3.0, 4.0], device=d),
                                         [x(3, 4)])
    s["aten.copy.default"] = (lambda a, b: torch.ops.aten.copy(a, b), [x(3, 4), x(4)])
    s["aten.fill.Scalar"] = (lambda a: torch.ops.aten.fill.Scalar(a, 2.0) * a, [x(3, 4)])
    s["aten.alias_copy.default"] = (lambda a: torch.ops.aten.alias_copy(a), [x(3, 4)])
    s["aten.copy_.default"] = (lambda a, b: a.clone().copy_(b.to(torch.float64)), [x(3, 4), x(4)])
    s["aten._to_copy.default"] = (lambda a: a.to(torch.float64) + a.to(torch.int32), [x(3, 4) * 4])
    s["aten.full.default"] = (lambda a: a + torch.full((3, 4), 2.5, device=d), [x(3, 4)])
    s["aten.full_like.default"] = (lambda a: torch.full_like(a, 7) * a, [x(3, 4)])
    s["aten.scalar_tensor.default"] = (lambda a: a + torch.ops.aten.scalar_tensor(3.0, device=d),
                                       [x(3, 4)])
    s["aten.zeros.default"] = (lambda a: a + torch.zeros(4, device=d), [x(3, 4)])
    s["aten.ones.default"] = (lambda a: a + torch.ones(4, device=d), [x(3, 4)])
    s["aten.zeros_like.default"] = (lambda a: torch.zeros_like(a) - a, [x(3, 4)])
    s["aten.ones_like.default"] = (lambda a: torch.ones_like(a) - a, [x(3, 4)])
    s["aten.new_zeros.default"] = (lambda a: a.new_zeros(3, 4) + a, [x(3, 4)])
    s["aten.new_ones.default"] = (lambda a: a.new_ones(3, 4) + a, [x(3, 4)])
    s["aten.new_full.default"] = (lambda a: a.new_full((3, 4), 0.5) + a, [x(3, 4)])
    s["aten.empty.memory_format"] = (lambda a: torch.empty(3, 4, device=d).fill_(1.5) + a, [x(3, 4)])
    s["aten.empty_like.default"] = (lambda a: torch.empty_like(a).copy_(a) * 2, [x(3, 4)])
    s["aten.empty_strided.default"] = (
        lambda a: torch.empty_strided((3, 4), (1, 3), device=d).copy_(a) + 1, [x(3, 4)])
    s["aten.new_empty.default"] = (lambda a: a.new_empty(3, 4).copy_(a) + 1, [x(3, 4)])
    s["aten.arange.default"] = (lambda a: a + torch.arange(4, device=d), [x(3, 4)])
    s["aten.arange.start"] = (lambda a: a + torch.arange(2, 6, device=d), [x(3, 4)])
    s["aten.arange.start_step"] = (lambda a: a + torch.arange(0.0, 2.0, 0.5, device=d), [x(3, 4)])
    s["aten.cat.default"] = (lambda a, b: torch.cat([a, b.t()], 1) + torch.cat([a, a, a], 0).sum(),
                             [x(3, 4), x(2, 3)])
    s["aten.index_select.default"] = (lambda a, i: torch.index_select(a, 1, i),
                                      [x(3, 5), _i(4, high=5, device=d)])
    s["aten.gather.default"] = (lambda a, i: torch.gather(a, 1, i), [x(3, 5), _i(3, 2, high=5, device=d)])
    # views
    s["aten.t.default"] = (lambda a: a.t() * 2, [x(3, 4)])
    s["aten.transpose.int"] = (lambda a: a.transpose(0, 2) + 1, [x(2, 3, 4)])
    s["aten.permute.default"] = (lambda a: a.permute(2, 0, 1).exp(), [x(2, 3, 4)])
    s["aten.view.default"] = (lambda a: (a + 1).view(4, 3), [x(3, 4)])
    s["aten._unsafe_view.default"] = (lambda a: (a.t() + 1).reshape(12), [x(3, 4)])
    s["aten.expand.default"] = (lambda a: a.expand(3, 4) * 1.5, [x(1, 4)])
    s["aten.unsqueeze.default"] = (lambda a: a.unsqueeze(1) + a, [x(3, 4)])
    s["aten.squeeze.dim"] = (lambda a: a.squeeze(1) * 3, [x(3, 1, 4)])
    s["aten.squeeze.dims"] = (lambda a: torch.ops.aten.squeeze.dims(a, [1, 3]) * 3, [x(3, 1, 4, 1)])
    s["aten.squeeze.default"] = (lambda a: torch.ops.aten.squeeze.default(a) * 3, [x(3, 1, 4)])
    s["aten.slice.Tensor"] = (lambda a: a[:, 1:4:2] * 2, [x(3, 6)])
    s["aten.select.int"] = (lambda a: a[1] + a[:, 2].sum(), [x(3, 4)])
    s["aten.alias.default"] = (lambda a: torch.ops.aten.alias(a) * 2, [x(3, 4)])
    s["aten.detach.default"] = (lambda a: a.detach() * 2, [x(3, 4)])
    # reshape's view of a transposed 4-d tensor (a matmul's batch dimensions merged)
    s["aten._reshape_alias.default"] = (
        lambda a: torch.ops.aten._reshape_alias(a.transpose(-2, -1), (6, 5, 4), (20, 1, 5)) * 2,
        [x(2, 3, 4, 5)])
    s["aten.as_strided.default"] = (lambda a: a.as_strided((2, 2), (1, 4), 1) * 2, [x(3, 4)])
    s["aten.diagonal.default"] = (lambda a: torch.ops.aten.diagonal(a) * 2, [x(4, 4)])
    s["aten.unfold.default"] = (lambda a: a.unfold(1, 2, 1) * 2, [x(3, 4)])
    s["aten.split.Tensor"] = (lambda a: [t * 2 for t in torch.ops.aten.split.Tensor(a, 2, 1)], [x(3, 5)])
    s["aten.split_with_sizes.default"] = (lambda a: [t + 1 for t in a.split([1, 3], 1)], [x(3, 4)])
    s["aten.unbind.int"] = (lambda a: [t * 2 for t in a.unbind(0)], [x(3, 4)])
    # reductions
    s["aten.sum.dim_IntList"] = (lambda a: a.sum((0, 2), keepdim=True) + a.sum(1).sum(), [x(2, 3, 4)])
    s["aten.sum.default"] = (lambda a, i: a.sum() + i.sum(), [x(2, 3), _i(3, device=d, dtype=torch.int32)])
    s["aten.fill_.Scalar"] = (lambda a: torch.empty(3, 4, device=d).fill_(1.5) + a, [x(3, 4)])
    s["aten.pow_.Scalar"] = (lambda a: a.clone().pow_(2) + a.clone().pow_(3), [x(3, 4)])
    s["aten.pow_.Tensor"] = (lambda a, b: a.clone().abs().pow_(b), [x(3, 4), x(4)])
    s["aten.mean.dim"] = (lambda a: a.mean(-1) + a.t().mean(0), [x(3, 4)])
    s["aten.mean.default"] = (lambda a: a.mean(), [x(3, 4)])
    s["aten.prod.dim_int"] = (lambda a: a.prod(1, keepdim=True), [x(3, 4)])
    s["aten.prod.default"] = (lambda a: a.prod(), [x(3, 4)])
    s["aten.amax.default"] = (lambda a: a.amax((0, 1)), [x(3, 4, 2)])
    s["aten.amin.default"] = (lambda a: a.amin(1, keepdim=True), [x(3, 4)])
    s["aten.argmax.default"] = (lambda a: a.argmax(1) + a.argmax(), [x(3, 4)])
    s["aten.var.correction"] = (lambda a: a.var(1) + a.var(0, correction=0, keepdim=True).sum(), [x(3, 4)])
    s["aten.max.dim"] = (lambda a: a.max(1)[0] + a.max(1)[1], [x(3, 4)])
    # softmax, normalization
    s["aten._softmax.default"] = (lambda a: a.softmax(0) + a.softmax(-1), [x(3, 4)])
    s["aten._log_softmax.default"] = (lambda a: a.log_softmax(1), [x(3, 4)])
    s["aten.native_layer_norm.default"] = (
        lambda a, w, b: F.layer_norm(a, [8], w, b) + F.layer_norm(a, [8]), [x(3, 8), x(8), x(8)])
    # matrix products
    s["aten.mm.default"] = (lambda a, b: a @ b.t(), [x(5, 7), x(3, 7)])
    s["aten.bmm.default"] = (lambda a, b: torch.bmm(a, b), [x(2, 3, 4), x(2, 4, 5)])
    s["aten.addmm.default"] = (lambda a, w, b: F.linear(a, w, b) + torch.addmm(b, a, w.t(), beta=0.5),
                               [x(4, 6), x(5, 6), x(5)])
    s["aten.baddbmm.default"] = (lambda c, a, b: torch.baddbmm(c, a, b), [x(4), x(2, 3, 5), x(2, 5, 4)])
    return s


# Functions whose graphs gpuos cannot run (op -> the overload that is recorded).
UNSUPPORTED = {
    "min_dim": ((lambda a: a.min(1)[0]), "aten.min.dim"),
    "cumsum": ((lambda a: a.cumsum(0) + 1), "aten.cumsum.default"),
    "layer_norm_stats": ((lambda a: torch.ops.aten.native_layer_norm(a, [4], None, None, 1e-5)[1]),
                         "output"),
}


def sample(name: str, device: str = "cpu"):
    return _samples(device)[name]


def all_samples(device: str = "cpu"):
    return _samples(device)
