"""Coverage table, continued: views, reductions, softmax, layer_norm, matmul."""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch

from ._aten import _meta, register
from ._lowering import Unsupported, View, _NotComputed, drop_dims, expand, permute
from ._packs import TORCH_DTYPES

# ---- views: new descriptors of the same buffer, computed from eager's layout ----

VIEWS = [
    "aten.t.default", "aten.transpose.int", "aten.permute.default", "aten.view.default",
    "aten._unsafe_view.default", "aten.expand.default", "aten.unsqueeze.default",
    "aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default", "aten.slice.Tensor",
    "aten.select.int", "aten.alias.default", "aten.detach.default", "aten.as_strided.default",
    "aten.diagonal.default", "aten.unfold.default",
]
MULTI_VIEWS = ["aten.split.Tensor", "aten.split_with_sizes.default", "aten.unbind.int"]


def _on_meta(view: View) -> torch.Tensor:
    """A tensor on the meta device with `view`'s exact layout (offset included)."""
    span = sum((s - 1) * st for s, st in zip(view.sizes, view.strides)) + 1
    if any(s == 0 for s in view.sizes):
        span = 1
    storage = torch.empty(view.offset + span, dtype=TORCH_DTYPES[view.dtype], device="meta")
    return storage.as_strided(view.sizes, view.strides, view.offset)


def _from_meta(parent: View, result: torch.Tensor) -> View:
    if result.dtype != TORCH_DTYPES[parent.dtype]:
        raise Unsupported("a view that reinterprets the element type")
    return View(parent.buffer, result.storage_offset(), parent.dtype, tuple(result.shape),
                tuple(result.stride()))


def _apply_on_meta(node, a: dict) -> Any:
    """Runs the view op on a meta tensor laid out like our value: torch's own
    view rules then give sizes, strides and offset for gpuos's actual layout
    (which may differ from eager's where an intermediate is contiguous)."""
    parent = a["self"]
    if not isinstance(parent, View):
        raise Unsupported("a view of something that is not a tensor")
    try:
        return parent, node.target(**dict(a, self=_on_meta(parent)))
    except RuntimeError as error:
        raise Unsupported(f"the view does not apply to gpuos's layout: {error}") from None


@register(VIEWS, [])
def _view(ctx, node, a):
    parent, result = _apply_on_meta(node, a)
    return _from_meta(parent, result)


@register(MULTI_VIEWS, [])
def _multi_view(ctx, node, a):
    parent, results = _apply_on_meta(node, a)
    return tuple(_from_meta(parent, r) for r in results)


@register(["aten._reshape_alias.default"], [])
def _reshape_alias(ctx, node, a):
    """`reshape`'s view where eager could take one (what reshape calls
    below autograd, e.g. a matmul's batch dimensions merged): an as_strided
    with the strides `view` gives eager's layout. Lowered as `view` of
    gpuos's layout, which may differ from eager's; refused where the strides
    are not the view's (then it is not a reshape) or gpuos's layout has no
    such view."""
    parent = a["self"]
    if not isinstance(parent, View):
        raise Unsupported("a view of something that is not a tensor")
    size = list(a["size"])
    try:
        eager_view = _meta(node.args[0]).view(size)
        ours = torch.ops.aten.view.default(_on_meta(parent), size)
    except RuntimeError as error:
        raise Unsupported(f"_reshape_alias that is not a view: {error}") from None
    if tuple(eager_view.stride()) != tuple(a["stride"]):
        raise Unsupported("_reshape_alias whose strides are not reshape's")
    return _from_meta(parent, ours)


# ---- reductions over any dimensions: the reduced ones are permuted last ----


def _dims(dim: Any, rank: int) -> list[int]:
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(rank))
    if isinstance(dim, int):
        dim = [dim]
    return sorted({d % rank for d in dim}) if rank else []


def _reduce(ctx, node, op: str, source: View, dim: Any, keepdim: bool,
            compute: Optional[str] = None, attributes: Optional[dict] = None) -> View:
    meta = _meta(node)
    out = ctx.buffer_like(meta)
    compute = compute or out.dtype
    x = ctx.cast(source, compute)
    rank = len(x.sizes)
    dims = _dims(dim, rank)
    kept = [d for d in range(rank) if d not in dims]
    x = permute(x, kept + dims)
    target = drop_dims(out, dims) if keepdim and rank else out
    if len(target.sizes) != len(kept):
        raise Unsupported(f"reduction output of rank {len(target.sizes)} for {len(kept)} kept dims")
    if out.numel:
        if any(x.sizes[d] == 0 for d in range(len(kept), rank)) and op not in ("sum", "prod"):
            raise Unsupported(f"{op} over an empty dimension")
        ctx.emit(op, compute, [x], [target], attributes)
    return out


def _reduction(op: str, dim_key: Optional[str]):
    def rule(ctx, node, a):
        dim = a.get(dim_key) if dim_key else None
        return _reduce(ctx, node, op, a["self"], dim, bool(a.get("keepdim", False)))

    return rule


register(["aten.sum.dim_IntList", "aten.sum.default"], ["sum", "cast"])(_reduction("sum", "dim"))
register(["aten.mean.dim", "aten.mean.default"], ["mean", "cast"])(_reduction("mean", "dim"))
register(["aten.prod.dim_int", "aten.prod.default"], ["prod", "cast"])(_reduction("prod", "dim"))
register(["aten.amax.default"], ["amax"])(_reduction("amax", "dim"))
register(["aten.amin.default"], ["amin"])(_reduction("amin", "dim"))


@register(["aten.argmax.default"], ["argmax"])
def _argmax(ctx, node, a):
    source = a["self"]
    if a.get("dim") is None and len(source.sizes) > 1 and a.get("keepdim"):
        raise Unsupported("argmax over all dimensions with keepdim")
    return _reduce(ctx, node, "argmax", source, a.get("dim"), bool(a.get("keepdim", False)),
                   compute=source.dtype)


@register(["aten.var.correction"], ["var"])
def _var(ctx, node, a):
    correction = a.get("correction")
    correction = 1 if correction is None else correction
    return _reduce(ctx, node, "var", a["self"], a.get("dim"), bool(a.get("keepdim", False)),
                   attributes={"correction": float(correction)})


@register(["aten.max.dim"], ["amax", "argmax"])
def _max_dim(ctx, node, a):
    metas = node.meta.get("val")
    values = ctx.buffer_like(metas[0])
    indices = ctx.buffer_like(metas[1])
    source, keepdim = a["self"], bool(a.get("keepdim", False))
    dims = _dims(a["dim"], len(source.sizes))
    kept = [d for d in range(len(source.sizes)) if d not in dims]
    x = permute(source, kept + dims)
    for out, op in ((values, "amax"), (indices, "argmax")):
        target = drop_dims(out, dims) if keepdim else out
        if out.numel:
            ctx.emit(op, source.dtype, [x], [target])
    return values, indices


# ---- softmax and normalization along one dimension ----


def _softmax(op: str):
    def rule(ctx, node, a):
        if a.get("half_to_float"):
            raise Unsupported("softmax with half_to_float")
        meta = _meta(node)
        out = ctx.buffer_like(meta)
        x = ctx.cast(a["self"], out.dtype)
        rank = len(out.sizes)
        if rank == 0:
            raise Unsupported("softmax of a scalar")
        dim = a["dim"] % rank
        order = [d for d in range(rank) if d != dim] + [dim]
        if out.numel:
            ctx.emit(op, out.dtype, [permute(x, order)], [permute(out, order)])
        return out

    return rule


register(["aten._softmax.default"], ["softmax", "cast"])(_softmax("softmax"))
register(["aten._log_softmax.default"], ["log_softmax", "cast"])(_softmax("log_softmax"))


@register(["aten.native_layer_norm.default"], ["layer_norm"])
def _layer_norm(ctx, node, a):
    shape = list(a["normalized_shape"])
    metas = node.meta.get("val")
    out = ctx.buffer_like(metas[0])
    if len(shape) != 1:
        raise Unsupported(f"layer_norm over {len(shape)} dimensions (the pack normalizes the last)")
    n = shape[0]
    dtype = out.dtype

    def affine(value: Any, default: float) -> View:
        if value is None:
            return expand(ctx.scalar(default, dtype), [n])
        return ctx.cast(value, dtype)

    weight, bias = affine(a["weight"], 1.0), affine(a["bias"], 0.0)
    if len(weight.sizes) != 1 or len(bias.sizes) != 1:
        raise Unsupported("layer_norm weight or bias that is not 1-D")
    if out.numel:
        ctx.emit("layer_norm", dtype, [ctx.cast(a["input"], dtype), weight, bias], [out],
                 {"eps": float(a["eps"])})
    why = "layer_norm's mean and rstd outputs (used by autograd) are not computed"
    return out, _NotComputed(why), _NotComputed(why)


# ---- matrix products ----


def _matmul(ctx, node, op: str, x: Any, y: Any) -> View:
    out = ctx.buffer_like(_meta(node))
    if out.numel:
        ctx.emit(op, out.dtype, [ctx.cast(x, out.dtype), ctx.cast(y, out.dtype)], [out])
    return out


register(["aten.mm.default"], ["matmul"])(lambda c, n, a: _matmul(c, n, "matmul", a["self"], a["mat2"]))
register(["aten.bmm.default"], ["bmm"])(lambda c, n, a: _matmul(c, n, "bmm", a["self"], a["mat2"]))


def _addmm(fused: str, plain: str, first: str, second: str):
    """out = beta * self + alpha * (first x second) as ONE task: `fused`
    (addmm / baddbmm, the bias added in the matmul's store), or `plain`
    (matmul / bmm) when beta == 0 and alpha == 1. beta == 0 ignores self's
    values, NaN included, as eager does: the task then reads a stride-0 zero
    instead of self (no dependency on self's producer either)."""

    def rule(ctx, node, a):
        alpha, beta = a.get("alpha", 1), a.get("beta", 1)
        if beta == 0 and alpha == 1:
            return _matmul(ctx, node, plain, a[first], a[second])
        out = ctx.buffer_like(_meta(node))
        if out.numel:
            dtype = out.dtype
            bias = (expand(ctx.scalar(0.0, dtype), out.sizes) if beta == 0 else
                    ctx.operand(a["self"], dtype, out.sizes))
            ctx.emit(fused, dtype, [ctx.cast(a[first], dtype), ctx.cast(a[second], dtype), bias],
                     [out], {"alpha": float(alpha), "beta": float(beta)})
        return out

    return rule


register(["aten.addmm.default"], ["addmm", "matmul"])(_addmm("addmm", "matmul", "mat1", "mat2"))
register(["aten.baddbmm.default"], ["baddbmm", "bmm"])(_addmm("baddbmm", "bmm", "batch1", "batch2"))
