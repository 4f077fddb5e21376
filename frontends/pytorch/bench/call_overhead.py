"""Where the host part of a gpuos.compile call goes (a diagnostic, not a
benchmark): chain100_64x64_f32 (the default `--case`) compiles to one fused
task of about 3 us on the device, so nearly all of a call's time is
overhead; another case of workloads.py (e.g. "mlp_microbatch batch=1") shows
how the host part grows with tasks, tensors and parameters. Medians of
`--calls` calls, in us:

    call_sync        compiled(x) then current_stream().synchronize()
                     (what run_workloads.py times)
    interleaved_cpp, interleaved_python
                     call_sync of two compiled functions of the module, the
                     second built with GPUOS_TORCH_FAST_CALL=0 (its calls run
                     through Python, docs/pytorch.md "The call path"), in
                     alternating blocks of 50 calls (a same-process A/B)
    call             compiled(x) alone (the host until it returns)
    sync_after_call  the synchronize that follows it
    program_run      the native Program.run(inputs) and the synchronize
    program_call     the native Program.run(inputs) until it returns
    empty_strided    torch.empty_strided of the output's layout
    stream_query     torch.cuda.current_stream().query() of an idle stream
    sync_idle        synchronize of an idle stream

`--nested` compiles the case's function with its result wrapped as
{"out": [result]} (a structure FastCallable makes by calling the pytree's
unflatten, ResultKind::kUnflatten), and adds "_nested" to the file's name.

Needs a CUDA device. Writes <out>/call_overhead.json (call_overhead_<case>.json
for another case) and prints it.

    python frontends/pytorch/bench/call_overhead.py --out OUT [--calls 2000] [--case NAME] \
        [--nested]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402

import gpuos  # noqa: E402


def _median_us(fn, calls: int) -> float:
    samples = []
    for _ in range(calls):
        start = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - start) / 1e3)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="directory for call_overhead.json")
    parser.add_argument("--calls", type=int, default=2000, help="timed calls per measure")
    parser.add_argument("--case", default="chain100_64x64_f32",
                        help="a case name of workloads.py")
    parser.add_argument("--nested", action="store_true",
                        help='the result wrapped as {"out": [result]} (a pytree unflatten)')
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("call_overhead.py needs a CUDA device")
    device = torch.device("cuda", 0)
    matching = [c for c in workloads.cases() if c.name == args.case]
    if not matching:
        sys.exit(f"no case {args.case!r}; cases: {', '.join(c.name for c in workloads.cases())}")
    case = matching[0]
    module = workloads.build(case, device)
    if args.nested:
        inner = module
        module = lambda *a: {"out": [inner(*a)]}  # noqa: E731
    generator = torch.Generator().manual_seed(0)
    inputs = case.make_inputs(device, generator)
    x = inputs[0]
    compiled = gpuos.compile(module)
    stream = torch.cuda.current_stream(device)
    with torch.no_grad():
        expected = torch.utils._pytree.tree_leaves(module(*inputs))
        got = torch.utils._pytree.tree_leaves(compiled(*inputs))
        stream.synchronize()
        if len(got) != len(expected) or not all(
                torch.allclose(g, e, rtol=1e-4, atol=1e-4) for g, e in zip(got, expected)):
            sys.exit("gpuos result differs from eager")
        for _ in range(200):
            compiled(*inputs)
        stream.synchronize()

        results = {}
        results["call_sync"] = _median_us(lambda: (compiled(*inputs), stream.synchronize()),
                                          args.calls)
        call, after = [], []
        for _ in range(args.calls):
            start = time.perf_counter_ns()
            compiled(*inputs)
            returned = time.perf_counter_ns()
            stream.synchronize()
            call.append((returned - start) / 1e3)
            after.append((time.perf_counter_ns() - returned) / 1e3)
        results["call"] = statistics.median(call)
        results["sync_after_call"] = statistics.median(after)
        python_path = gpuos.compile(module)
        previous = os.environ.get("GPUOS_TORCH_FAST_CALL")
        os.environ["GPUOS_TORCH_FAST_CALL"] = "0"  # read when its first call takes the program
        try:
            python_path(*inputs)
        finally:
            if previous is None:
                del os.environ["GPUOS_TORCH_FAST_CALL"]
            else:
                os.environ["GPUOS_TORCH_FAST_CALL"] = previous
        if python_path.runs_in_cpp() or not compiled.runs_in_cpp():
            sys.exit("the A/B needs one function on each call path "
                     f"(C++: {compiled.runs_in_cpp()}, {python_path.runs_in_cpp()})")
        timed = {"interleaved_cpp": (compiled, []), "interleaved_python": (python_path, [])}
        for block in range(2 * max(1, args.calls // 50)):
            f, samples = timed["interleaved_cpp" if block % 2 == 0 else "interleaved_python"]
            for _ in range(50):
                start = time.perf_counter_ns()
                f(*inputs)
                stream.synchronize()
                samples.append((time.perf_counter_ns() - start) / 1e3)
        for name, (_, samples) in timed.items():
            results[name] = statistics.median(samples)
        program = compiled._last.program
        results["program_run"] = _median_us(lambda: (program.run(inputs), stream.synchronize()),
                                            args.calls)
        returned = []
        for _ in range(args.calls):
            start = time.perf_counter_ns()
            program.run(inputs)
            returned.append((time.perf_counter_ns() - start) / 1e3)
            stream.synchronize()
        results["program_call"] = statistics.median(returned)
        results["empty_strided"] = _median_us(
            lambda: torch.empty_strided(x.shape, x.stride(), device=device), args.calls)
        results["stream_query"] = _median_us(stream.query, args.calls)
        results["sync_idle"] = _median_us(stream.synchronize, args.calls)
    report = {"diagnostic": "call_overhead", "case": args.case, "nested": args.nested,
              "commit": os.environ.get("GPUOS_COMMIT", "unknown"),
              "device": torch.cuda.get_device_name(device), "calls": args.calls,
              "note": "program_run includes the synchronize; the others are as named",
              "median_us": {k: round(v, 2) for k, v in results.items()}}
    os.makedirs(args.out, exist_ok=True)
    name = "call_overhead.json" if args.case == "chain100_64x64_f32" else \
        "call_overhead_" + args.case.replace(" ", "_").replace("=", "") + ".json"
    if args.nested:
        name = name[:-len(".json")] + "_nested.json"
    with open(os.path.join(args.out, name), "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
