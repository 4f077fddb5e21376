"""The coverage table: aten overloads -> standard-pack operators.

`TABLE[overload]` is the rule that lowers one node: it receives the Lowering,
the fx node (its meta['val'] gives eager's output layout) and the arguments by
schema name, emits tasks and returns the node's value (a View, or a tuple of
them). `COVERAGE[overload]` lists the operators a rule may emit (docs and
tests). A rule raises Unsupported when its arguments are outside what the
packs can do (dtype, rank, options); the graph then runs eagerly.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional, Sequence

import torch

from ._lowering import (Lowering, Unsupported, View, _NotComputed, drop_dims, dtype_name,
                        expand, node_meta, permute)

Rule = Callable[[Lowering, Any, dict], Any]
TABLE: dict[str, Rule] = {}
COVERAGE: dict[str, tuple[str, ...]] = {}


def register(names: Sequence[str], operators: Sequence[str]):
    def decorate(rule: Rule) -> Rule:
        for name in names:
            TABLE[name] = rule
            COVERAGE[name] = tuple(operators)
        return rule

    return decorate


def _meta(node) -> torch.Tensor:
    val = node_meta(node)
    if not isinstance(val, torch.Tensor):
        raise Unsupported("expected a tensor result")
    return val


def _promoted(values: Sequence[Any], node) -> str:
    """torch's result type of `values` (views and Python numbers)."""
    metas = []
    for arg, value in zip(node.args, values):
        if isinstance(value, View):
            metas.append(_meta(arg))
        else:
            metas.append(value)
    return dtype_name(torch.result_type(*metas) if len(metas) == 2 else metas[0].dtype)


def _elementwise(ctx: Lowering, node, op: str, operands: Sequence[Any],
                 attributes: Optional[dict] = None, compute: Optional[str] = None,
                 target: Optional[View] = None, operand_dtypes: Optional[Sequence[str]] = None):
    meta = _meta(node)
    out = target if target is not None else ctx.buffer_like(meta)
    compute = compute or out.dtype
    views = [ctx.operand(v, (operand_dtypes[i] if operand_dtypes else None) or compute, out.sizes)
             for i, v in enumerate(operands)]
    if out.numel:
        if out.dtype == compute or op in _BOOL_RESULT:
            ctx.emit(op, compute, views, [out], attributes)
        else:  # in-place into a tensor of another dtype: compute, then cast
            tmp = ctx.new_buffer(compute, out.sizes)
            ctx.emit(op, compute, views, [tmp], attributes)
            ctx.emit("cast", compute, [tmp], [out], out_dtype=out.dtype)
    return out


_BOOL_RESULT = {"eq", "ne", "lt", "gt", "le", "ge", "logical_and", "logical_or", "logical_xor",
                "logical_not"}
UNARY = {
    "neg": "neg", "abs": "abs", "relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh",
    "exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "reciprocal": "reciprocal",
    "erf": "erf", "sign": "sign", "floor": "floor", "ceil": "ceil", "round": "round",
    "silu": "silu",
}


def _unary(op: str) -> Rule:
    def rule(ctx, node, a, inplace=False):
        target = a["self"] if inplace else None
        return _elementwise(ctx, node, op, [a["self"]], target=target)

    return rule


def _inplace(rule: Rule) -> Rule:
    return lambda ctx, node, a: rule(ctx, node, a, inplace=True)


for _name, _op in UNARY.items():
    register([f"aten.{_name}.default"], [_op])(_unary(_op))
    register([f"aten.{_name}_.default"], [_op])(_inplace(_unary(_op)))


@register(["aten.gelu.default"], ["gelu", "gelu_tanh"])
def _gelu(ctx, node, a, inplace=False):
    approximate = a.get("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise Unsupported(f"gelu approximate='{approximate}'")
    op = "gelu" if approximate == "none" else "gelu_tanh"
    return _elementwise(ctx, node, op, [a["self"]], target=a["self"] if inplace else None)


register(["aten.gelu_.default"], ["gelu", "gelu_tanh"])(_inplace(_gelu))


def _binary(op: str, alpha: bool = False, reverse: bool = False, bool_result: bool = False):
    def rule(ctx, node, a, inplace=False):
        x, y = a["self"], a["other"]
        attributes = {"alpha": a["alpha"]} if alpha and a.get("alpha", 1) != 1 else None
        if reverse:
            x, y = y, x
        compute = _promoted([a["self"], a["other"]], node) if bool_result else None
        target = a["self"] if inplace else None
        if target is not None and compute is None:
            compute = target.dtype
        return _elementwise(ctx, node, op, [x, y], attributes, compute=compute, target=target)

    return rule


BINARY = {
    "add": ("add", True), "sub": ("sub", True), "mul": ("mul", False), "div": ("div", False),
    "maximum": ("maximum", False), "minimum": ("minimum", False),
}
COMPARE = ["eq", "ne", "lt", "gt", "le", "ge"]
LOGICAL = ["logical_and", "logical_or", "logical_xor"]

for _name, (_op, _alpha) in BINARY.items():
    overloads = ["Tensor", "Scalar"] if _name in ("add", "sub", "mul", "div") else ["default"]
    for _overload in overloads:
        register([f"aten.{_name}.{_overload}"], [_op, "cast"])(_binary(_op, _alpha))
        if _overload != "default":  # aten has no maximum_ / minimum_
            register([f"aten.{_name}_.{_overload}"], [_op, "cast"])(_inplace(_binary(_op, _alpha)))
register(["aten.rsub.Scalar", "aten.rsub.Tensor"], ["sub"])(_binary("sub", True, reverse=True))
for _name in COMPARE:
    register([f"aten.{_name}.Tensor", f"aten.{_name}.Scalar"], [_name, "cast"])(
        _binary(_name, bool_result=True))
for _name in LOGICAL:
    register([f"aten.{_name}.default"], [_name])(_binary(_name, bool_result=True))


@register(["aten.logical_not.default"], ["logical_not"])
def _logical_not(ctx, node, a):
    return _elementwise(ctx, node, "logical_not", [a["self"]], compute=a["self"].dtype)


@register(["aten.bitwise_not.default"], ["logical_not"])
def _bitwise_not(ctx, node, a):
    if a["self"].dtype != "bool":
        raise Unsupported("bitwise_not of integers (only bool maps to logical_not)")
    return _logical_not(ctx, node, a)


@register(["aten.bitwise_and.Tensor", "aten.bitwise_or.Tensor", "aten.bitwise_xor.Tensor"],
          ["logical_and", "logical_or", "logical_xor"])
def _bitwise_logical(ctx, node, a):
    if _meta(node).dtype != torch.bool:
        raise Unsupported("bitwise operations on integers (only bool maps to logical ops)")
    op = {"and": "logical_and", "or": "logical_or", "xor": "logical_xor"}[
        str(node.target).split(".")[1].split("_")[1]]
    return _elementwise(ctx, node, op, [a["self"], a["other"]], compute="bool")


@register(["aten.pow.Tensor_Scalar", "aten.pow.Tensor_Tensor", "aten.pow.Scalar"],
          ["pow", "square", "sqrt", "reciprocal", "copy"])
def _pow(ctx, node, a, inplace=False):
    base, exponent = a["self"], a["exponent"]
    target = base if inplace else None
    if isinstance(base, View) and isinstance(exponent, (int, float)) and not isinstance(exponent, bool):
        special = {2: "square", 0.5: "sqrt", -1: "reciprocal", 1: "copy"}.get(exponent)
        if special is not None:
            return _elementwise(ctx, node, special, [base], target=target)
    return _elementwise(ctx, node, "pow", [base, exponent], target=target)


register(["aten.pow_.Scalar", "aten.pow_.Tensor"], ["pow", "square", "sqrt", "reciprocal", "copy"])(
    _inplace(_pow))


def _limit(dtype: str, high: bool) -> float:
    if dtype in ("f32", "f16", "bf16", "f64"):
        return 1.7976931348623157e308 if high else -1.7976931348623157e308
    info = torch.iinfo({"i8": torch.int8, "u8": torch.uint8, "i32": torch.int32,
                        "i64": torch.int64}.get(dtype, torch.int64))
    return float(info.max if high else info.min)


def _clamp(ctx, node, a, lo, hi, inplace=False):
    meta = _meta(node)
    dtype = dtype_name(meta.dtype)
    for v in (lo, hi):
        if v is not None and not isinstance(v, (int, float)):
            raise Unsupported("clamp with tensor bounds")
    low = _limit(dtype, False) if lo is None or lo == -math.inf else float(lo)
    high = _limit(dtype, True) if hi is None or hi == math.inf else float(hi)
    if math.isnan(low) or math.isnan(high):
        raise Unsupported("clamp with a NaN bound")
    return _elementwise(ctx, node, "clamp", [a["self"]], {"lo": low, "hi": high},
                        target=a["self"] if inplace else None)


register(["aten.clamp.default"], ["clamp"])(lambda c, n, a: _clamp(c, n, a, a["min"], a["max"]))
register(["aten.clamp_.default"], ["clamp"])(
    lambda c, n, a: _clamp(c, n, a, a["min"], a["max"], inplace=True))
register(["aten.clamp_min.default"], ["clamp"])(lambda c, n, a: _clamp(c, n, a, a["min"], None))
register(["aten.clamp_max.default"], ["clamp"])(lambda c, n, a: _clamp(c, n, a, None, a["max"]))


@register(["aten.where.self"], ["where"])
def _where(ctx, node, a):
    return _elementwise(ctx, node, "where", [a["condition"], a["self"], a["other"]],
                        operand_dtypes=["bool", None, None])


@register(["aten.masked_fill.Scalar", "aten.masked_fill.Tensor"], ["where"])
def _masked_fill(ctx, node, a):
    value = a["value"]
    if isinstance(value, View) and value.sizes != ():
        raise Unsupported("masked_fill with a value that is not a scalar")
    return _elementwise(ctx, node, "where", [a["mask"], value, a["self"]],
                        operand_dtypes=["bool", None, None])


# ---- copies, casts, creation ----


@register(["aten.fill_.Scalar", "aten.fill.Scalar"], ["fill", "copy"])
def _fill(ctx, node, a):
    value = a["value"]
    if isinstance(value, View):
        raise Unsupported("fill with a tensor value")
    out = a["self"] if "_" in str(node.target).split(".")[1] else ctx.buffer_like(_meta(node))
    if out.numel:
        ctx.fill(out, value)
    return out


@register(["aten.clone.default", "aten.lift_fresh_copy.default", "aten.copy.default",
           "aten.alias_copy.default"], ["copy", "cast"])
def _clone(ctx, node, a):
    source = a["src"] if "src" in a else a["self"]
    meta = _meta(node)
    out = ctx.buffer_like(meta)
    _copy_into(ctx, source, out)
    return out


def _copy_into(ctx: Lowering, source: Any, out: View) -> None:
    if out.numel == 0:
        return
    if isinstance(source, View) and source.dtype != out.dtype:
        ctx.emit("cast", source.dtype, [expand(source, out.sizes)], [out], out_dtype=out.dtype)
    else:
        ctx.emit("copy", out.dtype, [ctx.operand(source, out.dtype, out.sizes)], [out])


@register(["aten.copy_.default"], ["copy", "cast"])
def _copy_(ctx, node, a):
    _copy_into(ctx, a["src"], a["self"])
    return a["self"]


@register(["aten._to_copy.default"], ["copy", "cast"])
def _to_copy(ctx, node, a):
    meta = _meta(node)
    if meta.device != ctx.device:
        raise Unsupported(f"copy to another device ({meta.device})")
    out = ctx.buffer_like(meta)
    _copy_into(ctx, a["self"], out)
    return out


def _created(ctx: Lowering, node) -> View:
    meta = _meta(node)
    if meta.device != ctx.device:
        raise Unsupported(f"a tensor created on {meta.device}, the program runs on {ctx.device}")
    return ctx.buffer_like(meta)


@register(["aten.full.default", "aten.full_like.default", "aten.scalar_tensor.default",
           "aten.zeros.default", "aten.ones.default", "aten.zeros_like.default",
           "aten.ones_like.default", "aten.new_zeros.default", "aten.new_ones.default",
           "aten.new_full.default"], ["fill", "copy"])
def _full(ctx, node, a):
    out = _created(ctx, node)
    name = str(node.target)
    if "zeros" in name:
        value = 0
    elif "ones" in name:
        value = 1
    else:
        value = a.get("fill_value", a.get("s"))
    if isinstance(value, View):
        raise Unsupported("fill with a tensor value")
    if out.numel:
        ctx.fill(out, value)
    return out


@register(["aten.empty.memory_format", "aten.empty_like.default", "aten.empty_strided.default",
           "aten.new_empty.default"], [])
def _empty(ctx, node, a):
    return _created(ctx, node)


@register(["aten.arange.default", "aten.arange.start", "aten.arange.start_step"], ["arange"])
def _arange(ctx, node, a):
    out = _created(ctx, node)
    start = a.get("start", 0)
    step = a.get("step", 1)
    if out.numel:
        ctx.emit("arange", out.dtype, [], [out], {"start": float(start), "step": float(step)})
    return out


@register(["aten.cat.default"], ["cat", "copy", "cast"])
def _cat(ctx, node, a):
    meta = _meta(node)
    out = ctx.buffer_like(meta)
    tensors = [t for t, arg in zip(a["tensors"], node.args[0]) if tuple(_meta(arg).shape) != (0,)]
    rank = len(out.sizes)
    dim = a["dim"] % rank if rank else 0
    if len(tensors) == 2 and out.numel:
        views = [ctx.cast(t, out.dtype) for t in tensors]
        ctx.emit("cat", out.dtype, views, [out], {"dim": dim})
        return out
    start = 0
    for t in tensors:
        length = t.sizes[dim]
        sizes = out.sizes[:dim] + (length,) + out.sizes[dim + 1:]
        part = View(out.buffer, out.offset + start * out.strides[dim], out.dtype, sizes, out.strides)
        _copy_into(ctx, t, part)
        start += length
    return out


@register(["aten.index_select.default"], ["index_select"])
def _index_select(ctx, node, a):
    out = ctx.buffer_like(_meta(node))
    index = ctx.cast(a["index"], "i64")
    if len(index.sizes) != 1:
        raise Unsupported("index_select with an index that is not 1-D")
    dim = a["dim"] % max(len(out.sizes), 1)
    if out.numel:
        ctx.emit("index_select", out.dtype, [a["self"], index], [out], {"dim": dim})
    return out


@register(["aten.gather.default"], ["gather"])
def _gather(ctx, node, a):
    out = ctx.buffer_like(_meta(node))
    dim = a["dim"] % max(len(out.sizes), 1)
    if out.numel:
        ctx.emit("gather", out.dtype, [a["self"], ctx.cast(a["index"], "i64")], [out], {"dim": dim})
    return out


from . import _aten_more  # noqa: E402,F401  (views, reductions, normalization, matmul)
