"""bench/floor.py: each workload's least traffic, its matrix flops and its
floor on a device whose rates were measured (the shared benchmarking.md,
"The floor"), on the CPU."""

import os
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
sys.path.insert(0, BENCH)

import floor  # noqa: E402
import workloads  # noqa: E402


def _case(name):
    return next(c for c in workloads.cases() if c.name == name)


def test_traffic_counts_inputs_parameters_and_outputs_once():
    chain = floor.traffic(_case("chain100_64x64_f32"))
    assert chain == {"bytes_read": 64 * 64 * 4, "bytes_written": 64 * 64 * 4,
                     "bytes": 2 * 64 * 64 * 4, "flops": 0}  # elementwise: no matrix flops
    attention = floor.traffic(_case("attention_small seq=32"))
    q = 8 * 32 * 64 * 4
    assert attention["bytes_read"] == 3 * q and attention["bytes_written"] == q
    assert attention["flops"] == 2 * (2 * 8 * 32 * 32 * 64)  # Q K^T, then P V
    mlp = floor.traffic(_case("mlp_microbatch batch=4"))
    parameters = 4 * (256 * 256 + 256 + 2 * 256) * 4  # Linear weight and bias, LayerNorm's two
    assert mlp["bytes_read"] == 4 * 256 * 4 + parameters
    assert mlp["flops"] == 4 * 2 * 4 * 256 * 256
    decoder = floor.traffic(_case("decoder_step kv_cache=128"))
    assert decoder["bytes_written"] == (256 + 4 * 4 * 64) * 4  # hidden, each layer's new k and v


def test_the_floor_is_the_round_trip_or_the_bytes_whichever_is_longer():
    small = floor.floor_us({"bytes": 32768}, "NVIDIA H200")
    assert small["bound"] == "round trip" and small["floor_us"] == 2.3
    big = floor.floor_us({"bytes": 43 * 10**6}, "NVIDIA H200")  # 10 us at 4.3 TB/s
    assert big["bound"] == "bytes" and big["floor_us"] == pytest.approx(10.0)
    h100 = floor.floor_us({"bytes": 3 * 10**6}, "NVIDIA H100 80GB HBM3")  # no round trip measured
    assert h100["bound"] == "bytes" and h100["floor_us"] == pytest.approx(1.0)
    assert floor.floor_us({"bytes": 1}, "a device never measured") is None


def test_floors_of_a_document_put_each_correct_median_over_its_floor():
    doc = {"device": "NVIDIA H200", "cases": [
        {"case": "chain100_64x64_f32", "variant": "gpuos_compile", "median_us": 23.0,
         "correct": True},
        {"case": "chain100_64x64_f32", "variant": "cuda_graph", "median_us": 115.0,
         "correct": False},  # wrong results: no ratio
        {"case": "chain100_64x64_f32", "variant": "torch_compile", "skipped": "no GPU",
         "correct": False},
        {"case": "not a workload", "variant": "eager", "median_us": 1.0, "correct": True}]}
    rows = floor.floors(doc)
    assert [r["case"] for r in rows] == ["chain100_64x64_f32"]
    assert rows[0]["over_floor"] == {"gpuos_compile": 10.0}
    assert "gpuos_compile" in floor.table(rows, doc["device"])
    unmeasured = floor.floors({**doc, "device": "cpu"})
    assert "floor_us" not in unmeasured[0] and "(no rates)" in floor.table(unmeasured, "cpu")
