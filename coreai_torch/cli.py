"""The coreai-torch command line: convert, run, verify, inspect, ops, demo, llm.

Exit codes: 0 success; 1 the check failed (verify, demo: results differ; ops: no op matches);
2 bad command line, files or inputs (see the error line); 3 converting or running failed;
130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import enum
import math
import shutil
import sys
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from coreai_core import CoreAIError, DType, Program, RuntimeInputError
from coreai_core.runtime import to_array
from coreai_torch._cli_io import (
    CliError,
    bind_inputs,
    entry_graph,
    load_arrays,
    load_exported_program,
    load_program,
    one_line,
    output_path,
    replacing,
    storable,
    write_npz,
)
from coreai_torch._cli_llm import add_llm_parser
from coreai_torch.errors import UnsupportedOpsError

__all__ = ["CliError", "ExitCode", "build_parser", "main"]


class ExitCode(enum.IntEnum):
    """The exit codes of ``coreai-torch`` (documented in docs/cli.md)."""

    OK = 0
    CHECK_FAILED = 1  # verify/demo: results differ; ops: nothing matches the filter
    BAD_INPUT = 2  # command line, files or inputs: fix them and retry
    FAILED = 3  # conversion or execution raised (unsupported op, kernel error, a bug)
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as shells report it)


# torch.export prints this FutureWarning on every export from its own internals; a CLI user can
# do nothing about it (pyproject's pytest filterwarnings silences the same message in tests)
TORCH_EXPORT_NOISE = r"`isinstance\(treespec, LeafSpec\)` is deprecated"


def _convert(ep: Any, optimize: bool) -> Any:
    from coreai_torch import TorchConverter, get_decomp_table

    ep = ep.run_decompositions(get_decomp_table())
    program = TorchConverter().add_exported_program(ep).to_coreai()
    if optimize:
        program.optimize()
    return program


def _save(program: Program, out: Path) -> None:
    try:
        program.save(out)
    except (OSError, ValueError, CoreAIError) as e:  # a non-artifact folder in the way, ...
        raise CliError(f"{out}: cannot save the program ({one_line(str(e))})") from e


def cmd_convert(args: argparse.Namespace) -> int:
    aimodel = args.format == "aimodel"
    if aimodel:
        export = _aimodel_exporter()
    out = output_path(args.output, suffix=".aimodel" if aimodel else None, force=args.force,
                      folder=True)
    ep = load_exported_program(args.model)
    t0 = time.perf_counter()
    program = _convert(ep, not args.no_optimize)
    if aimodel:
        export(program, out)
    else:
        _save(program, out)
    print(f"converted {args.model} -> {out} in {time.perf_counter() - t0:.2f}s "
          f"({sum(len(g.ops) for g in program.graphs.values())} ops)")
    return ExitCode.OK


def _aimodel_exporter() -> Any:
    """``coreai_torch.aimodel.export_aimodel``, or a CliError saying which extra to install."""
    from coreai_torch.errors import MissingExtraError

    try:
        from coreai_torch.aimodel import export_aimodel
    except MissingExtraError as e:
        raise CliError(str(e)) from None
    return export_aimodel


def cmd_run(args: argparse.Namespace) -> int:
    out = output_path(args.outputs, suffix=".npz", force=args.force)
    data = load_arrays(args.inputs)
    program = load_program(args.program)
    inputs = bind_inputs(program, args.entrypoint, data, args.inputs)
    outputs = program.run(inputs, entrypoint=args.entrypoint)
    stored = {name: storable(value) for name, value in outputs.items()}
    write_npz(out, stored)
    for name, value in outputs.items():
        note = "" if stored[name] is value else f" (stored as {stored[name].dtype})"
        print(f"{name}: {DType.of(value.dtype)}{list(value.shape)}{note}")
    print(f"outputs written to {out}")
    return ExitCode.OK


def _to_torch(a: np.ndarray) -> Any:
    """``a`` as a torch tensor (torch reads no ml_dtypes array: bfloat16 goes via float32)."""
    import torch

    wide = storable(a)
    tensor = torch.from_numpy(np.ascontiguousarray(wide))
    return tensor if wide is a else tensor.to(DType.of(a.dtype).torch)


def cmd_verify(args: argparse.Namespace) -> int:
    from coreai_torch import verify

    data = load_arrays(args.inputs) if args.inputs else None
    if args.check_passes and args.program:
        raise CliError("--check-passes checks the optimizer on a fresh conversion; drop the "
                       "program folder argument")
    given = load_program(args.program) if args.program else None
    ep = load_exported_program(args.model)
    example = ep.example_inputs[0] if getattr(ep, "example_inputs", None) else None
    if data is None and example is None:
        raise CliError(f"{args.model} holds no example inputs; pass --inputs inputs.npz")
    program = given if given is not None else _convert(ep, not args.check_passes)
    inputs: Any
    if data is not None:
        inputs = {name: _to_torch(a)
                  for name, a in bind_inputs(program, args.entrypoint, data, args.inputs).items()}
    else:
        inputs = list(example or ())
        names = entry_graph(program, args.entrypoint).input_names
        if len(inputs) != len(names):
            raise CliError(f"{args.model} holds {len(inputs)} example inputs but the program "
                           f"takes {names}; pass --inputs inputs.npz")
        bind_inputs(program, args.entrypoint,
                    {n: to_array(x) for n, x in zip(names, inputs, strict=True)},
                    f"{args.model}'s example inputs")
    if args.check_passes and not optimize_checked(program, inputs, args.rtol, args.atol,
                                                  args.entrypoint):
        return ExitCode.CHECK_FAILED
    report = verify(ep, program, inputs, rtol=args.rtol, atol=args.atol, entrypoint=args.entrypoint)
    print(report)
    passed = report.passed
    if args.precision is not None:
        passed = _precision_check(program, inputs, args) and passed
    return ExitCode.OK if passed else ExitCode.CHECK_FAILED


def _precision_check(program: Program, inputs: Any, args: argparse.Namespace) -> bool:
    """``verify --precision``: the program computed in float16/bfloat16 against float32."""
    from coreai_torch.precision import precision_report

    report = precision_report(program, inputs, args.precision, rtol=args.precision_rtol,
                              atol=args.precision_atol, entrypoint=args.entrypoint)
    print(report)
    if not report.passed and report.keep_passes:
        print(f"fix: program.to_precision({args.precision!r}, keep={list(report.keep)!r})")
    return report.passed


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
    graph_out = None
    if args.graph:
        graph_out = output_path(args.graph, suffix=".svg", force=args.force)
        if shutil.which("dot") is None:
            raise CliError("--graph needs Graphviz's `dot` on PATH (e.g. `apt-get install "
                           "graphviz`); without it, leave out --graph")
    program = load_program(args.program)
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
    nbytes = sum((t.numel or 0) * t.element_type.itemsize for t in program.weight_types.values())
    print(f"weights: {len(program.weights)} tensors, {nbytes / 1e6:.2f} MB")
    if graph_out is not None:
        from coreai_core.draw import render_svg

        with replacing(graph_out) as tmp:
            render_svg(program, str(tmp))
        print(f"graph drawn to {graph_out}")
    return ExitCode.OK


def cmd_ops(args: argparse.Namespace) -> int:
    from coreai_torch import TorchConverter

    names = [n for n in TorchConverter().supported_ops() if args.filter in n]
    if not names:
        print(f"coreai-torch ops: no supported op contains {args.filter!r}", file=sys.stderr)
        return ExitCode.CHECK_FAILED
    print("\n".join(names))
    return ExitCode.OK


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
    return ExitCode.OK if result.passed else ExitCode.CHECK_FAILED


class _UsageError(CliError):
    """A malformed command line, reported for the (sub)command whose parser saw it."""

    def __init__(self, prog: str, message: str) -> None:
        self.prog = prog
        super().__init__(f"{message} (see `{prog} --help`)")


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors raised (one line, exit 2) instead of printed with usage."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(self.prog, message)


def _tolerance(text: str) -> float:
    """A tolerance option: a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a tolerance is a finite number >= 0")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="coreai-torch", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traceback", action="store_true",
                        help="on an error, also print the Python traceback (for bug reports)")
    sub = parser.add_subparsers(dest="command", required=True)
    force_help = "replace the output if it exists (atomically)"
    p = sub.add_parser("convert", help="convert a torch.export .pt2 file to a Core AI program")
    p.add_argument("model", help=".pt2 file written by torch.export.save")
    p.add_argument("-o", "--output", required=True,
                   help="output program folder (or NAME.aimodel with --format aimodel)")
    p.add_argument("--format", choices=("coreai", "aimodel"), default="coreai",
                   help="coreai: a program folder (default); aimodel: an asset for Apple's "
                        "Core AI runtime (needs pip install 'coreai-torch[coreai]')")
    p.add_argument("--no-optimize", action="store_true")
    p.add_argument("--force", action="store_true", help=force_help)
    p.set_defaults(fn=cmd_convert)
    p = sub.add_parser("run", help="run a converted program on inputs from an .npz file")
    p.add_argument("program")
    p.add_argument("--inputs", required=True,
                   help=".npz with one array per input name (.npy for a one-input program)")
    p.add_argument("--outputs", required=True, help=".npz file to write the outputs to")
    p.add_argument("--entrypoint", default="main")
    p.add_argument("--force", action="store_true", help=force_help)
    p.set_defaults(fn=cmd_run)
    p = sub.add_parser("verify", help="compare a program (or a fresh conversion) with torch")
    p.add_argument("model", help=".pt2 file")
    p.add_argument("program", nargs="?", help="converted program folder (default: convert now)")
    p.add_argument("--inputs", help=".npz with one array per program input (.npy for one)")
    p.add_argument("--rtol", type=_tolerance, default=1e-3)
    p.add_argument("--atol", type=_tolerance, default=1e-4)
    p.add_argument("--entrypoint", default="main")
    p.add_argument("--check-passes", action="store_true",
                   help="optimize a fresh conversion with a check after every pass and name "
                        "the first pass and rewrite that changes the results")
    p.add_argument("--precision", choices=("float16", "bfloat16"),
                   help="also run the program computing in this precision (like a device) "
                        "against float32 and report the first op that breaks and the ops to "
                        "keep in float32")
    p.add_argument("--precision-rtol", type=_tolerance, default=1e-2,
                   help="relative error budget of --precision (default 1e-2)")
    p.add_argument("--precision-atol", type=_tolerance, default=1e-2,
                   help="absolute error budget of --precision (default 1e-2)")
    p.set_defaults(fn=cmd_verify)
    p = sub.add_parser("inspect", help="op histogram, inputs/outputs and weight bytes")
    p.add_argument("program")
    p.add_argument("--graph", help="draw the graph to this .svg (needs Graphviz's dot)")
    p.add_argument("--force", action="store_true", help=force_help)
    p.set_defaults(fn=cmd_inspect)
    p = sub.add_parser("ops", help="list the supported ops")
    p.add_argument("--filter", default="", help="only the ops whose name contains this")
    p.set_defaults(fn=cmd_ops)
    p = sub.add_parser("demo", help="export, convert, optimize, run and verify an example model")
    p.add_argument("--model", default="convnet", choices=["convnet", "transformer"])
    p.set_defaults(fn=cmd_demo)
    add_llm_parser(sub)
    return parser


def _bad_input(e: Exception) -> str:
    """One line for a problem the user can fix: a file that cannot be used, bad inputs, ..."""
    if isinstance(e, OSError) and e.strerror:  # e.g. a name too long for the file system
        where = f"{e.filename}: " if e.filename else ""
        return f"{where}{e.strerror}"
    return one_line(str(e))


def _failure(e: Exception) -> str:
    """One line for an error raised by the work itself (conversion, a kernel, ...)."""
    if isinstance(e, UnsupportedOpsError):
        ops = ", ".join(f"{op.qualified_name} ({op.count}x, e.g. node {op.example_node!r}"
                        + (f" at {op.source})" if op.source else ")") for op in e.ops)
        return (f"{len(e.ops)} op(s) have no lowering: {ops}; register lowerings on a "
                f"TorchConverter in Python (docs/custom-op-lowering.md)")
    return f"{type(e).__name__}: {one_line(str(e))}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on ``argv`` (default ``sys.argv[1:]``) and return the exit code.

    Every error is one line on stderr, ``coreai-torch <command>: error: ...``, with the
    exit codes of :class:`ExitCode` (see docs/cli.md).
    """
    try:
        args = build_parser().parse_args(argv)
    except _UsageError as e:
        print(f"{e.prog}: error: {e}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    except SystemExit as e:  # --help
        return e.code if isinstance(e.code, int) else ExitCode.BAD_INPUT
    prefix = f"coreai-torch {args.command}" + (
        f" {args.llm_command}" if args.command == "llm" else "")
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=TORCH_EXPORT_NOISE, category=FutureWarning)
            return int(args.fn(args))
    except KeyboardInterrupt:
        print(f"{prefix}: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except (CliError, RuntimeInputError, OSError) as e:  # inputs are checked before running
        _print_error(prefix, _bad_input(e), args.traceback)
        return ExitCode.BAD_INPUT
    except Exception as e:  # a clear one-line message instead of a traceback
        _print_error(prefix, _failure(e), args.traceback)
        return ExitCode.FAILED


def _print_error(prefix: str, message: str, with_traceback: bool) -> None:
    if with_traceback:
        traceback.print_exc(file=sys.stderr)
    print(f"{prefix}: error: {message}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
