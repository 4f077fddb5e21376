"""The standard packs' operators as the lowering sees them (operators/*.yaml).

A hand-kept mirror of what the lowering needs to decide, without a GPU, whether
a task can run: inputs, outputs, dtypes and attribute names of each operator.
tests/test_coverage.py checks it against operators/*.yaml, so a change to a
pack that this table misses fails CI.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class OpSpec:
    inputs: int
    outputs: int
    dtype_names: str  # space-separated gpuos dtype names
    attributes: tuple[str, ...] = ()

    @property
    def dtypes(self) -> frozenset[str]:
        return frozenset(self.dtype_names.split())


STANDARD_OPERATORS: dict[str, OpSpec] = {
    "gelu": OpSpec(1, 1, "f32 f16 bf16 f64"),
    "gelu_tanh": OpSpec(1, 1, "f32 f16 bf16 f64"),
    "silu": OpSpec(1, 1, "f32 f16 bf16 f64"),
    "add": OpSpec(2, 1, "f32 f16 bf16 f64 i32 i64", ('alpha',)),
    "sub": OpSpec(2, 1, "f32 f16 bf16 f64 i32 i64", ('alpha',)),
    "mul": OpSpec(2, 1, "f32 f16 bf16 f64 i32 i64"),
    "div": OpSpec(2, 1, "f32 f16 bf16 f64"),
    "neg": OpSpec(1, 1, "f32 f16 bf16 f64 i8 i32 i64"),
    "abs": OpSpec(1, 1, "f32 f16 bf16 f64 i8 i32 i64"),
    "relu": OpSpec(1, 1, "f32 f16 bf16 f64 i32 i64"),
    "sigmoid": OpSpec(1, 1, "f32 f16 bf16 f64"),
    "tanh": OpSpec(1, 1, "f32 f16 bf16 f64"),
    "exp": OpSpec(1, 1, "f32 f16 bf16 f64"),
    "log": OpSpec(1, 1, "f32 f16 bf16 f64"),
    "sqrt": OpSpec(1, 1, "f32 f16 bf16 f64"),
    "pow": OpSpec(2, 1, "f32 f16 bf16 f64"),
    "maximum": OpSpec(2, 1, "f32 f16 bf16 f64 i32 i64"),
    "minimum": OpSpec(2, 1, "f32 f16 bf16 f64 i32 i64"),
    "clamp": OpSpec(1, 1, "f32 f16 bf16 f64 i32 i64", ('lo', 'hi')),
    "where": OpSpec(3, 1, "f32 f16 bf16 f64 i8 u8 i32 i64 bool"),
    "eq": OpSpec(2, 1, "f32 f16 bf16 f64 i8 u8 i32 i64 bool"),
    "lt": OpSpec(2, 1, "f32 f16 bf16 f64 i8 u8 i32 i64"),
    "gt": OpSpec(2, 1, "f32 f16 bf16 f64 i8 u8 i32 i64"),
    "copy": OpSpec(1, 1, "f32 f16 bf16 f64 i8 u8 i32 i64 bool"),
    "cast": OpSpec(1, 1, "f32 f16 bf16 f64 i8 u8 i32 i64 bool"),
    "fill": OpSpec(0, 1, "f32 f16 bf16 f64 i8 u8 i32 i64 bool", ('value',)),
    "arange": OpSpec(0, 1, "f32 f16 bf16 f64 i32 i64", ('start', 'step')),
    "cat": OpSpec(2, 1, "f32 f16 bf16 f64 i8 u8 i32 i64 bool", ('dim',)),
    "index_select": OpSpec(2, 1, "f32 f16 bf16 f64 i8 u8 i32 i64 bool", ('dim',)),
    "gather": OpSpec(2, 1, "f32 f16 bf16 f64 i8 u8 i32 i64 bool", ('dim',)),
    "matmul": OpSpec(2, 1, "f32 f16 bf16 f64"),
    "bmm": OpSpec(2, 1, "f32 f16 bf16 f64"),
    "addmm": OpSpec(3, 1, "f32 f16 bf16 f64", ('alpha', 'beta')),
    "baddbmm": OpSpec(3, 1, "f32 f16 bf16 f64", ('alpha', 'beta')),
    "fused_addmm": OpSpec(6, 1, "f32 f16 bf16 f64",
                          ('alpha', 'beta', 'norm', 'eps', 'activation', 'add_residual')),
    "logical_and": OpSpec(2, 1, "bool f32 f16 bf16 f64 i8 u8 i32 i64"),
    "logical_or": OpSpec(2, 1, "bool f32 f16 bf16 f64 i8 u8 i32 i64"),
    "logical_xor": OpSpec(2, 1, "bool f32 f16 bf16 f64 i8 u8 i32 i64"),
    "logical_not": OpSpec(1, 1, "bool f32 f16 bf16 f64 i8 u8 i32 i64"),
    "ne": OpSpec(2, 1, "f32 f16 bf16 f64 i8 u8 i32 i64 bool"),
    "le": OpSpec(2, 1, "f32 f16 bf16 f64 i8 u8 i32 i64 bool"),
    "ge": OpSpec(2, 1, "f32 f16 bf16 f64 i8 u8 i32 i64 bool"),
    "erf": OpSpec(1, 1, "f32 f16 bf16 f64"),
    "rsqrt": OpSpec(1, 1, "f32 f16 bf16 f64"),
    "reciprocal": OpSpec(1, 1, "f32 f16 bf16 f64"),
    "square": OpSpec(1, 1, "f32 f16 bf16 f64 i32 i64"),
    "sign": OpSpec(1, 1, "f32 f16 bf16 f64 i8 i32 i64"),
    "floor": OpSpec(1, 1, "f32 f16 bf16 f64"),
    "ceil": OpSpec(1, 1, "f32 f16 bf16 f64"),
    "round": OpSpec(1, 1, "f32 f16 bf16 f64"),
    "softmax": OpSpec(1, 1, "f32 f16 bf16 f64"),
    "log_softmax": OpSpec(1, 1, "f32 f16 bf16 f64"),
    "layer_norm": OpSpec(3, 1, "f32 f16 bf16 f64", ('eps', 'activation')),
    "rms_norm": OpSpec(2, 1, "f32 f16 bf16 f64", ('eps',)),
    "sum": OpSpec(1, 1, "f32 f16 bf16 f64 i32 i64"),
    "mean": OpSpec(1, 1, "f32 f16 bf16 f64"),
    "prod": OpSpec(1, 1, "f32 f16 bf16 f64 i32 i64"),
    "amax": OpSpec(1, 1, "f32 f16 bf16 f64 i8 u8 i32 i64"),
    "amin": OpSpec(1, 1, "f32 f16 bf16 f64 i8 u8 i32 i64"),
    "argmax": OpSpec(1, 1, "f32 f16 bf16 f64 i32 i64"),
    "var": OpSpec(1, 1, "f32 f16 bf16 f64", ('correction',)),
}

# gpuos dtype names (core/include/gpuos/dtype.h) of torch dtypes.
GPUOS_DTYPES: dict[torch.dtype, str] = {
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float64: "f64",
    torch.int8: "i8",
    torch.uint8: "u8",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.bool: "bool",
}
TORCH_DTYPES: dict[str, torch.dtype] = {name: dtype for dtype, name in GPUOS_DTYPES.items()}
ITEM_SIZES: dict[str, int] = {
    "f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i8": 1, "u8": 1, "i32": 4, "i64": 8, "bool": 1,
}
