"""The ``coreai-torch`` command line: convert, run, verify, inspect, ops, demo."""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

# torch.export prints this FutureWarning on every export from its own internals; a CLI user can
# do nothing about it (pyproject's pytest filterwarnings silences the same message in tests)
TORCH_EXPORT_NOISE = r"`isinstance\(treespec, LeafSpec\)` is deprecated"


class CliError(Exception):
    """A user-facing error: printed without a traceback, exit code 2."""


def _load_ep(path: str) -> Any:
    import torch

    p = Path(path)
    if not p.is_file():
        raise CliError(f"{path}: no such file (expected a torch.export.save .pt2 file)")
    try:
        return torch.export.load(str(p))
    except Exception as e:  # torch raises many types for a bad archive
        raise CliError(f"{path}: not a torch.export program ({type(e).__name__}: {e})") from e


def _load_program(path: str) -> Any:
    from coreai_core import load

    if not Path(path).exists():
        raise CliError(f"{path}: no such program (expected a folder written by `convert`)")
    try:
        return load(path)
    except Exception as e:
        raise CliError(f"{path}: cannot load program ({type(e).__name__}: {e})") from e


def _load_npz(path: str) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except FileNotFoundError:
        raise CliError(f"{path}: no such file") from None
    except (ValueError, OSError) as e:
        raise CliError(f"{path}: not a valid .npz file ({e})") from e


def _convert(ep: Any, optimize: bool) -> Any:
    from coreai_torch import TorchConverter, get_decomp_table

    ep = ep.run_decompositions(get_decomp_table())
    program = TorchConverter().add_exported_program(ep).to_coreai()
    if optimize:
        program.optimize()
    return program


def cmd_convert(args: argparse.Namespace) -> int:
    ep = _load_ep(args.model)
    t0 = time.perf_counter()
    program = _convert(ep, not args.no_optimize)
    program.save(args.output)
    print(f"converted {args.model} -> {args.output} in {time.perf_counter() - t0:.2f}s "
          f"({sum(len(g.ops) for g in program.graphs.values())} ops)")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    program = _load_program(args.program)
    inputs = _load_npz(args.inputs)
    outputs = program.run(inputs, entrypoint=args.entrypoint)
    np.savez(args.outputs, **outputs)
    for name, value in outputs.items():
        print(f"{name}: {value.dtype}{list(value.shape)}")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    import torch

    from coreai_torch import verify

    ep = _load_ep(args.model)
    if args.check_passes and args.program:
        raise CliError("--check-passes checks the optimizer on a fresh conversion; drop the "
                       "program folder argument")
    program = _load_program(args.program) if args.program else _convert(ep, not args.check_passes)
    if args.inputs:
        data = _load_npz(args.inputs)
        inputs = [torch.from_numpy(data[n]) for n in program.input_names]
    else:
        example = ep.example_inputs[0] if getattr(ep, "example_inputs", None) else None
        if example is None:
            raise CliError("the .pt2 file has no example inputs; pass --inputs inputs.npz")
        inputs = list(example)
    if args.check_passes and not optimize_checked(program, inputs, args.rtol, args.atol):
        return 1
    report = verify(ep, program, inputs, rtol=args.rtol, atol=args.atol)
    print(report)
    return 0 if report.passed else 1


def optimize_checked(program: Any, inputs: Any, rtol: float, atol: float,
                     entrypoint: str = "main") -> bool:
    """``verify --check-passes``: optimize ``program`` in place with a check after every pass
    on ``inputs`` of ``entrypoint`` (tensors or arrays in input order, or a dict by name) and
    print the report. False when a pass changed the results: the report names the pass,
    rewrite, op and location."""
    from coreai_core.optimizer import Check, OptimizationMismatchError
    from coreai_core.runtime import to_array

    if not isinstance(inputs, dict):
        inputs = dict(zip(program.graphs[entrypoint].input_names, inputs, strict=True))
    arrays = {name: to_array(x) for name, x in inputs.items()}
    check = Check(inputs=arrays, rtol=rtol, atol=atol, entrypoint=entrypoint)
    try:
        report = program.optimize(check=check)
    except OptimizationMismatchError as e:
        print(e.report)
        return False
    print(report.validation)
    return True


def cmd_inspect(args: argparse.Namespace) -> int:
    program = _load_program(args.program)
    for name, g in program.graphs.items():
        print(f"entrypoint @{name}")
        for k, v in g.inputs.items():
            print(f"  input  {k}: {v.type}")
        for k, v in g.state_inputs.items():
            print(f"  state  {k}: {v.type}")
        for k, v in g.output_values.items():
            print(f"  output {k}: {v.type}")
        hist = Counter(op.name for op in g.walk())
        print(f"  {sum(hist.values())} ops:")
        for op, n in hist.most_common():
            print(f"    {n:6d}  {op}")
    nbytes = sum(t.numel * t.element_type.itemsize for t in program.weight_types.values())
    print(f"weights: {len(program.weights)} tensors, {nbytes / 1e6:.2f} MB")
    if args.graph:
        from coreai_core.draw import render_svg

        render_svg(program, args.graph)
        print(f"graph drawn to {args.graph}")
    return 0


def cmd_ops(args: argparse.Namespace) -> int:
    from coreai_torch import TorchConverter

    names = TorchConverter().supported_ops()
    for name in names:
        if not args.filter or args.filter in name:
            print(name)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    import torch

    from coreai_torch import TorchConverter, get_decomp_table, verify
    from coreai_torch.examples import example

    model, inputs = example(args.model)
    t0 = time.perf_counter()
    ep = torch.export.export(model, inputs).run_decompositions(get_decomp_table())
    t1 = time.perf_counter()
    program = TorchConverter().add_exported_program(ep).to_coreai()
    t2 = time.perf_counter()
    report = program.optimize()
    t3 = time.perf_counter()
    result = verify(model, program, inputs)
    t4 = time.perf_counter()
    print(f"demo: {args.model} ({type(model).__name__}, "
          f"{sum(p.numel() for p in model.parameters())} parameters)")
    print(f"  export + decompose  {t1 - t0:7.2f}s  ({len(ep.graph.nodes)} FX nodes)")
    print(f"  convert             {t2 - t1:7.2f}s  ({report.ops_before} ops)")
    print(f"  optimize            {t3 - t2:7.2f}s  ({report.ops_after} ops after "
          f"{report.iterations} iteration(s))")
    print(f"  run + verify        {t4 - t3:7.2f}s")
    print(result)
    return 0 if result.passed else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="coreai-torch", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("convert", help="convert a torch.export .pt2 file to a Core AI program")
    p.add_argument("model")
    p.add_argument("-o", "--output", required=True, help="output program folder")
    p.add_argument("--no-optimize", action="store_true")
    p.set_defaults(fn=cmd_convert)
    p = sub.add_parser("run", help="run a converted program on inputs from an .npz file")
    p.add_argument("program")
    p.add_argument("--inputs", required=True)
    p.add_argument("--outputs", required=True)
    p.add_argument("--entrypoint", default="main")
    p.set_defaults(fn=cmd_run)
    p = sub.add_parser("verify", help="compare a program (or a fresh conversion) with torch")
    p.add_argument("model", help=".pt2 file")
    p.add_argument("program", nargs="?", help="converted program folder (default: convert now)")
    p.add_argument("--inputs", help=".npz with one array per program input")
    p.add_argument("--rtol", type=float, default=1e-3)
    p.add_argument("--atol", type=float, default=1e-4)
    p.add_argument("--check-passes", action="store_true",
                   help="optimize a fresh conversion with a check after every pass and name "
                        "the first pass and rewrite that changes the results")
    p.set_defaults(fn=cmd_verify)
    p = sub.add_parser("inspect", help="op histogram, inputs/outputs and weight bytes")
    p.add_argument("program")
    p.add_argument("--graph", help="draw the graph to this .svg (needs Graphviz's dot)")
    p.set_defaults(fn=cmd_inspect)
    p = sub.add_parser("ops", help="list the supported ops")
    p.add_argument("--filter", default="")
    p.set_defaults(fn=cmd_ops)
    p = sub.add_parser("demo", help="export, convert, optimize, run and verify an example model")
    p.add_argument("--model", default="convnet", choices=["convnet", "transformer"])
    p.set_defaults(fn=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=TORCH_EXPORT_NOISE, category=FutureWarning)
            return args.fn(args)
    except CliError as e:
        print(f"coreai-torch {args.command}: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # a clear one-line message instead of a traceback
        print(f"coreai-torch {args.command}: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
