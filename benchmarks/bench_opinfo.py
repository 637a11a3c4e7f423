"""Run torch's OpInfo database through export -> convert -> run -> compare with torch eager.

Every OpInfo of ``torch.testing._internal.common_methods_invocations.op_db`` that supports
float32 on CPU gives its float32 samples (``op.sample_inputs("cpu", torch.float32)``). Each
sample becomes a small ``nn.Module`` whose forward takes the sample's tensors (every other
argument is baked in); it is exported, decomposed with ``get_decomp_table()``, converted with
``TorchConverter``, run with ``program.run`` and compared with torch eager.

Prints markdown tables: the totals (OpInfos, samples, exported, verified, verified rate), export
failures by reason (torch's, not the converter's), and converter failures by reason
(``UnsupportedOpsError`` per missing target, ``LoweringError`` per message head, numeric
mismatches, timeouts, and crashes = any other exception, each listed).

Two exceptions to comparing with torch's float32 result, each stated in a table here:
``FLOAT64_REFERENCE`` lists OpInfos whose float32 torch result is measurably less accurate than
the tolerance (checked against mpmath/float64); they are compared with torch's float64 result
rounded to float32, and the case records the reason. ``INVARIANTS`` lists OpInfos whose outputs
are not unique (eigenvectors up to a phase); they are checked by their defining identities.

Run: ``python benchmarks/bench_opinfo.py [--limit N] [--ops abs,add] [--samples K]
[--jobs N] [--timeout 20] [--json out.json] [--jsonl cases.jsonl] [--previous earlier.json]``.
``--samples K`` keeps each OpInfo's first K samples, a deterministic subset (sample generation
is seeded per OpInfo).
Needs ``expecttest`` (torch's testing module imports it; it is in the ``test`` extra).
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import multiprocessing
import re
import signal
import sys
import warnings
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import InputKind

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table

from coreai_torch import LoweringError, TorchConverter, UnsupportedOpsError, get_decomp_table
from coreai_torch.utils import to_numpy

# torch.testing.assert_close's float32 defaults, which every OpInfo test uses unless the OpInfo
# declares a toleranceOverride: the budget torch itself accepts between two float32 kernels.
DEFAULT_RTOL, DEFAULT_ATOL = 1.3e-6, 1e-5

# Outcomes of one sample. "verified", the converter failures and "timeout"/"crash" count as
# exportable cases; the rest are not the converter's business.
CONVERTER_OUTCOMES = ("verified", "unsupported", "lowering_error", "mismatch", "timeout",
                      "crash")
SKIP_OUTCOMES = ("eager_error", "non_tensor_output", "export_failed")


class CaseTimeout(Exception):
    """The per-case alarm fired."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise CaseTimeout


class SampleModule(torch.nn.Module):
    """Calls ``fn`` on a sample with its tensors replaced by the forward's arguments."""

    def __init__(self, fn: Any, leaves: list[Any], spec: Any) -> None:
        super().__init__()
        self.fn = fn
        self.leaves = leaves
        self.spec = spec
        self.slots = [i for i, a in enumerate(leaves) if isinstance(a, torch.Tensor)]

    def forward(self, *tensors: torch.Tensor) -> Any:
        leaves = list(self.leaves)
        for i, t in zip(self.slots, tensors, strict=True):
            leaves[i] = t
        args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        return self.fn(*args, **kwargs)


def load_op_db() -> list[Any]:
    from torch.testing._internal.common_methods_invocations import op_db

    return [op for op in op_db if torch.float32 in op.supported_dtypes("cpu")]


def op_label(op: Any) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def tolerance(op: Any) -> tuple[float, float, str]:
    """(rtol, atol, source): the largest float32 toleranceOverride the OpInfo declares for
    CPU (or any device) tests, else torch's float32 defaults."""
    from torch.testing._internal.common_device_type import toleranceOverride

    rtol, atol, found = DEFAULT_RTOL, DEFAULT_ATOL, False
    for info in op.decorators:
        if getattr(info, "device_type", None) not in (None, "cpu"):
            continue
        for dec in getattr(info, "decorators", ()):
            if isinstance(dec, toleranceOverride) and torch.float32 in dec.d:
                t = dec.d[torch.float32]
                rtol, atol, found = max(rtol, t.rtol), max(atol, t.atol), True
    return rtol, atol, "opinfo" if found else "default"


def _flatten_out(out: Any) -> list[Any]:
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _flatten_out(o)]
    if hasattr(out, "_fields") or hasattr(out, "to_tuple"):
        return _flatten_out(tuple(out))
    return [out]


def _head(text: str, n: int = 90) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:n]


_LOWERING_PREFIX = re.compile(r"^FX node '[^']*' \(([^)]*)\)(?: at \S+)?(?: in lowering \S+)?: ")


def lowering_head(err: LoweringError) -> str:
    """``target: first line of the message`` without the node name, numbers as N."""
    msg = _LOWERING_PREFIX.sub("", str(err).splitlines()[0])
    msg = re.sub(r"\d+", "N", msg)
    return f"{err.target}: {msg[:100]}"


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(x.shape == y.shape and torch.equal(torch.nan_to_num(x), torch.nan_to_num(y))
               for x, y in zip(a, b, strict=True))


def _draws_random(ep: torch.export.ExportedProgram) -> bool:
    return any(torch.Tag.nondeterministic_seeded in getattr(n.target, "tags", ())
               for n in ep.graph.nodes if n.op == "call_function")


def _eager(op: Any, leaves: list[Any], spec: Any, seed: int) -> Any:
    torch.manual_seed(seed)
    copies = [t.clone() if isinstance(t, torch.Tensor) else t for t in leaves]
    args, kwargs = pytree.tree_unflatten(copies, spec)
    with torch.no_grad():
        return op.op(*args, **kwargs)


def compare(got: Sequence[np.ndarray], want: Sequence[torch.Tensor], rtol: float, atol: float,
            values: bool) -> str:
    """'' if ``got`` matches torch's ``want``, else what differs (shape, dtype, values)."""
    if len(got) != len(want):
        return f"{len(got)} outputs, torch has {len(want)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        g, wn = np.asarray(g), to_numpy(w)
        if tuple(g.shape) != tuple(wn.shape):
            return f"output {i}: shape {list(g.shape)} != torch {list(wn.shape)}"
        if g.dtype != wn.dtype:
            return f"output {i}: dtype {g.dtype} != torch {wn.dtype}"
        if not values or g.size == 0:
            continue
        if wn.dtype.kind in "biu":
            if not np.array_equal(g, wn):
                return f"output {i}: values differ ({int((g != wn).sum())} of {g.size})"
            continue
        if wn.dtype.kind == "c":
            gv, wv = g.astype(np.complex128), wn.astype(np.complex128)
        else:
            gv, wv = g.astype(np.float64), wn.astype(np.float64)
        close = np.isclose(gv, wv, rtol=rtol, atol=atol, equal_nan=True)
        if not close.all():
            diff = np.abs(gv - wv)[~close]
            return (f"output {i}: values differ ({int((~close).sum())} of {g.size}, "
                    f"max abs err {float(np.nanmax(diff)) if diff.size else float('nan'):.3g})")
    return ""


# OpInfos whose float32 torch result is less accurate than the tolerance: the reference is
# torch's float64 result on float64 copies of the inputs, rounded to the output dtype, and the
# case records why. Each reason was measured against an independent high-precision value.
FLOAT64_REFERENCE = {
    **dict.fromkeys(("polygamma", "special.polygamma"),
                    "torch's float32 polygamma loses up to 2e-5 relative near the negative "
                    "poles (trigamma(-7.95): 412.7526, exact 412.7442 by mpmath); its float64 "
                    "result is exact to 1e-14"),
    **dict.fromkeys(("matrix_exp", "linalg.matrix_exp"),
                    "torch's float32 matrix_exp is accurate in norm only: next to entries of "
                    "1e5, entries near 10 are off by up to 0.05 (mpmath); float64 torch is "
                    "exact to 4e-10"),
    "_upsample_bilinear2d_aa": "torch's float32 kernel computes its resampling weights in "
                               "float32, up to 86 ulp off; the float64 result is exact",
}


def _as_float64(leaves: list[Any]) -> list[Any]:
    return [t.double() if isinstance(t, torch.Tensor) and t.dtype == torch.float32 else t
            for t in leaves]


def _eig_invariants(inputs: list[torch.Tensor], got: Sequence[np.ndarray],
                    want: Sequence[torch.Tensor], rtol: float, atol: float) -> str:
    """linalg.eig: eigenvalues by value (LAPACK geev's order on both sides); eigenvectors,
    defined only up to a phase per column, by A V = V diag(w) and unit columns."""
    problem = compare(got, want, rtol, atol, values=False) or \
        compare(got[:1], want[:1], rtol, atol, values=True)
    if problem or got[1].size == 0:
        return problem
    a = to_numpy(inputs[0]).astype(np.complex128)
    w, v = (np.asarray(g).astype(np.complex128) for g in got)
    n = a.shape[-1]
    residual = float(np.abs(a @ v - v * w[..., None, :]).max())
    bound = atol + rtol * n * float(np.abs(a).max())
    if residual > bound:
        return f"output 1: |A V - V diag(w)| = {residual:.3g} > {bound:.3g}"
    norm_err = float(np.abs(np.linalg.norm(v, axis=-2) - 1).max())
    if norm_err > atol:
        return f"output 1: eigenvector norms off 1 by {norm_err:.3g}"
    return ""


def _orthonormal_problem(q: np.ndarray, what: str, atol: float) -> str:
    """Whether the columns of ``q`` [..., m, k] are orthonormal (to ``atol`` per entry)."""
    gram = np.conj(np.swapaxes(q, -1, -2)) @ q
    err = float(np.abs(gram - np.eye(q.shape[-1])).max()) if gram.size else 0.0
    return f"{what}: columns off orthonormal by {err:.3g}" if err > 10 * atol else ""


def _eigh_invariants(inputs: list[torch.Tensor], got: Sequence[np.ndarray],
                     want: Sequence[torch.Tensor], rtol: float, atol: float) -> str:
    """linalg.eigh: eigenvalues by value; eigenvectors (a sign per column, any basis of a
    repeated eigenvalue's space) by A V = V diag(w) and orthonormal columns."""
    problem = compare(got, want, rtol, atol, values=False) or \
        compare(got[:1], want[:1], rtol, atol, values=True)
    if problem or len(got) < 2 or got[1].size == 0:
        return problem
    a = to_numpy(inputs[0]).astype(np.complex128)

    def hermitian(lower: bool) -> np.ndarray:  # the matrix eigh reads from one triangle
        t = np.tril(a) if lower else np.triu(a)
        return t + np.conj(np.swapaxes(np.tril(a, -1) if lower else np.triu(a, 1), -1, -2))

    def residual(m: np.ndarray, w: np.ndarray, v: np.ndarray) -> float:
        return float(np.abs(m @ v - v * w[..., None, :]).max())

    # the sample's UPLO is not passed here: use the triangle torch's own result decomposes
    tw, tv = (to_numpy(t).astype(np.complex128) for t in want[:2])
    m = min((hermitian(True), hermitian(False)), key=lambda h: residual(h, tw.real, tv))
    w, v = np.asarray(got[0]).astype(np.float64), np.asarray(got[1]).astype(np.complex128)
    err = residual(m, w, v)
    bound = atol + rtol * a.shape[-1] * float(np.abs(a).max())
    if err > bound:
        return f"output 1: |A V - V diag(w)| = {err:.3g} > {bound:.3g}"
    return _orthonormal_problem(v, "output 1", atol)


def _svd_invariants(conjugate_v: bool) -> Any:
    """svd (U, S, V) / linalg.svd (U, S, Vh): singular values by value; singular vectors (a
    sign or phase per pair, any basis of a repeated value's spaces) by orthonormal columns and
    A = U[..., :k] diag(S) Vh[..., :k, :]."""
    def check(inputs: list[torch.Tensor], got: Sequence[np.ndarray],
              want: Sequence[torch.Tensor], rtol: float, atol: float) -> str:
        problem = compare(got, want, rtol, atol, values=False) or \
            compare(got[1:2], want[1:2], rtol, atol, values=True)
        if problem or got[0].size == 0 or got[2].size == 0:
            return problem
        a = to_numpy(inputs[0]).astype(np.complex128)
        u, s = np.asarray(got[0]).astype(np.complex128), np.asarray(got[1]).astype(np.float64)
        vh = np.asarray(got[2]).astype(np.complex128)
        if conjugate_v:  # torch.svd returns V
            vh = np.conj(np.swapaxes(vh, -1, -2))
        k = s.shape[-1]
        rebuilt = (u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :]
        residual = float(np.abs(rebuilt - a).max())
        bound = atol + rtol * k * float(np.abs(a).max())
        if residual > bound:
            return f"|U diag(S) Vh - A| = {residual:.3g} > {bound:.3g}"
        return _orthonormal_problem(u, "output 0", atol) or \
            _orthonormal_problem(np.conj(np.swapaxes(vh, -1, -2)), "output 2", atol)

    return check


# OpInfos whose outputs are not unique: compared by invariants instead of raw values.
INVARIANTS = {"linalg.eig": _eig_invariants, "linalg.eigh": _eigh_invariants,
              "svd": _svd_invariants(conjugate_v=True),
              "linalg.svd": _svd_invariants(conjugate_v=False)}


def run_sample(op: Any, index: int, sample: Any, timeout: int) -> dict[str, Any]:
    """Export, convert, run and compare one sample; the outcome as a JSON-able dict."""
    case: dict[str, Any] = {"op": op_label(op), "sample": index}
    leaves, spec = pytree.tree_flatten(((sample.input, *sample.args), sample.kwargs))
    tensors = [t for t in leaves if isinstance(t, torch.Tensor)]
    case["inputs"] = [list(t.shape) for t in tensors]
    try:
        want1 = _eager(op, leaves, spec, seed=0)
        want2 = _eager(op, leaves, spec, seed=1)
    except Exception as e:
        return {**case, "outcome": "eager_error", "reason": f"{type(e).__name__}: {_head(str(e))}"}
    outs1, outs2 = _flatten_out(want1), _flatten_out(want2)
    if not all(isinstance(t, torch.Tensor) for t in outs1):
        kinds = sorted({type(t).__name__ for t in outs1 if not isinstance(t, torch.Tensor)})
        return {**case, "outcome": "non_tensor_output", "reason": ", ".join(kinds)}
    # Random ops (a second seed changes the result) and ops whose output is uninitialised
    # memory (empty*) are compared by shape and dtype only.
    random = op.has_nondeterministic_output or not _same(outs1, outs2)
    if op.name in FLOAT64_REFERENCE and not random:
        wide = _flatten_out(_eager(op, _as_float64(leaves), spec, seed=0))
        outs1 = [w.to(t.dtype) for w, t in zip(wide, outs1, strict=True)]
        case["reference"] = f"float64: {FLOAT64_REFERENCE[op.name]}"
    rtol, atol, tol_source = tolerance(op)
    case["tol"] = [rtol, atol, tol_source]
    module = SampleModule(op.op, leaves, spec)
    phase = "export"
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(timeout)
    try:
        try:
            ep = torch.export.export(module, tuple(t.clone() for t in tensors))
            phase = "decompose"
            ep = ep.run_decompositions(get_decomp_table())
        except CaseTimeout:
            raise
        except Exception as e:
            return {**case, "outcome": "export_failed", "phase": phase,
                    "reason": f"{type(e).__name__}: {_head(str(e))}"}
        # OpInfos of random ops reseed inside the op (wrapper_set_seed), so a second eager call
        # cannot tell: a node tagged nondeterministic_seeded marks them too
        random = random or _draws_random(ep)
        case["random"] = random
        phase = "convert"
        try:
            program = TorchConverter(progress=False).add_exported_program(ep).to_coreai()
        except UnsupportedOpsError as e:
            return {**case, "outcome": "unsupported",
                    "targets": [o.qualified_name for o in e.ops],
                    "reason": ", ".join(o.qualified_name for o in e.ops)}
        except LoweringError as e:
            return {**case, "outcome": "lowering_error", "reason": lowering_head(e),
                    "message": str(e)[:500]}
        phase = "run"
        # ep's user inputs are the forward's tensors in order; the converter makes the ones
        # the op mutates (in-place variants) named state instead of inputs
        sig = ep.graph_signature
        by_name = dict(zip([s.arg.name for s in sig.input_specs
                            if s.kind == InputKind.USER_INPUT], tensors, strict=True))
        feeds = {n: to_numpy(by_name[n]) for n in program.input_names}
        state = {k: v.copy() for k, v in program.state.items()}
        state.update({n: to_numpy(t) for n, t in by_name.items() if n in state})
        got = list(program.run(feeds, state=state, seed=0).values())
        phase = "compare"
        check = INVARIANTS.get(op_label(op))
        if check is not None and not random:
            case["invariants"] = True
            problem = check(tensors, got, outs1, rtol, atol)
        else:
            problem = compare(got, outs1, rtol, atol, values=not random)
    except CaseTimeout:
        return {**case, "outcome": "timeout", "phase": phase, "reason": f"> {timeout} s in {phase}"}
    except Exception as e:
        return {**case, "outcome": "crash", "phase": phase,
                "reason": f"{type(e).__name__}: {_head(str(e), 200)}"}
    finally:
        signal.alarm(0)
    if problem:
        return {**case, "outcome": "mismatch", "reason": problem}
    return {**case, "outcome": "verified"}


def run_opinfo(op: Any, samples: int | None, timeout: int) -> list[dict[str, Any]]:
    """Every (or the first ``samples``) float32 CPU sample of ``op``; sample generation is
    seeded by the OpInfo's name so that a subset is the same on every run."""
    torch.manual_seed(zlib.crc32(op_label(op).encode()))
    results = []
    it: Iterator[Any] = iter(op.sample_inputs("cpu", torch.float32))
    try:
        for i, sample in enumerate(itertools.islice(it, samples)):
            results.append(run_sample(op, i, sample, timeout))
    except Exception as e:  # the OpInfo's own sample generator failed
        results.append({"op": op_label(op), "sample": len(results), "outcome": "eager_error",
                        "reason": f"sample_inputs: {type(e).__name__}: {_head(str(e))}"})
    return results


_OPS: list[Any] = []


def _worker(args: tuple[int, int | None, int]) -> list[dict[str, Any]]:
    index, samples, timeout = args
    torch.set_num_threads(1)
    return run_opinfo(_OPS[index], samples, timeout)


def _progress(done: int, total: int, chunk: list[dict[str, Any]]) -> None:
    if chunk:
        outcomes = collections.Counter(r["outcome"] for r in chunk)
        print(f"[{done}/{total}] {chunk[0]['op']}: {dict(outcomes)}", file=sys.stderr, flush=True)


def _examples(ops: Sequence[str], n: int = 4) -> str:
    uniq = sorted(set(ops))
    return ", ".join(uniq[:n]) + (f", … (+{len(uniq) - n})" if len(uniq) > n else "")


def report(results: list[dict[str, Any]], n_ops: int) -> dict[str, Any]:
    """Print the markdown tables; return the totals."""
    by = collections.Counter(r["outcome"] for r in results)
    exportable = sum(by[o] for o in CONVERTER_OUTCOMES)
    rate = by["verified"] / exportable if exportable else 0.0
    totals = {"opinfos": n_ops, "samples": len(results), "exportable": exportable,
              "verified_rate": rate, **{o: by[o] for o in CONVERTER_OUTCOMES + SKIP_OUTCOMES}}
    shape_only = sum(1 for r in results if r["outcome"] == "verified" and r.get("random"))
    wide = sum(1 for r in results if r["outcome"] == "verified" and r.get("reference"))
    invariant = sum(1 for r in results if r["outcome"] == "verified" and r.get("invariants"))
    print("## Totals\n")
    print_table(["what", "count"], [
        ["OpInfos tried", n_ops],
        ["samples tried", len(results)],
        ["eager error (sample rejected by torch itself)", by["eager_error"]],
        ["skipped: output is not tensors", by["non_tensor_output"]],
        ["export failed (torch.export / run_decompositions)", by["export_failed"]],
        ["exportable cases", exportable],
        ["verified", by["verified"]],
        ["  of which random, shape/dtype only", shape_only],
        ["  of which against torch's float64 result (FLOAT64_REFERENCE)", wide],
        ["  of which by invariants (INVARIANTS)", invariant],
        ["verified rate (of exportable)", f"{100 * rate:.1f} %"],
        ["UnsupportedOpsError", by["unsupported"]],
        ["LoweringError", by["lowering_error"]],
        ["numeric mismatch", by["mismatch"]],
        ["timeout", by["timeout"]],
        ["crash (any other exception)", by["crash"]],
    ])

    def grouped(outcome: str, key: str = "reason") -> list[list[Any]]:
        groups: dict[str, list[str]] = collections.defaultdict(list)
        for r in results:
            if r["outcome"] == outcome:
                groups[r[key]].append(r["op"])
        return [[reason, len(ops), _examples(ops)]
                for reason, ops in sorted(groups.items(), key=lambda kv: -len(kv[1]))]

    rows = grouped("export_failed")
    if rows:
        print("\n## Export failures by reason (not converter failures)\n")
        print_table(["reason", "cases", "OpInfos"], rows)
    targets: dict[str, list[str]] = collections.defaultdict(list)
    for r in results:
        for t in r.get("targets", ()) if r["outcome"] == "unsupported" else ():
            targets[t].append(r["op"])
    print("\n## Converter failures by reason\n")
    rows = [["UnsupportedOpsError", t, len(ops), _examples(ops)]
            for t, ops in sorted(targets.items(), key=lambda kv: -len(kv[1]))]
    rows += [["LoweringError", *row] for row in grouped("lowering_error")]
    mism: dict[str, list[str]] = collections.defaultdict(list)
    for r in results:
        if r["outcome"] == "mismatch":
            mism[r["op"]].append(r["reason"])
    rows += [["numeric mismatch", f"{op}: {reasons[0]}", len(reasons), op]
             for op, reasons in sorted(mism.items())]
    rows += [["timeout", *row] for row in grouped("timeout")]
    rows += [["crash", f"{r['op']}[{r['sample']}] in {r['phase']}: {r['reason']}", 1, r["op"]]
             for r in results if r["outcome"] == "crash"]
    if rows:
        print_table(["class", "reason", "cases", "OpInfos"], rows)
    else:
        print("none")
    return totals


def _load_cases(path: Path) -> tuple[list[dict[str, Any]], set[str]]:
    """The cases of a --json or --jsonl file and the OpInfos they cover."""
    text = path.read_text()
    if path.suffix == ".jsonl":
        cases = [json.loads(line) for line in text.splitlines() if line.strip()]
    else:
        cases = json.loads(text)["cases"]
    return cases, {c["op"] for c in cases}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="first N OpInfos only")
    parser.add_argument("--ops", default="", help="comma-separated OpInfo names "
                        "(name or name.variant)")
    parser.add_argument("--samples", type=int, default=None, help="first K samples per OpInfo")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--timeout", type=int, default=20, help="seconds per case")
    parser.add_argument("--json", default="", help="write per-case results here")
    parser.add_argument("--jsonl", default="", help="append each OpInfo's cases here, one "
                        "JSON line per case, as soon as it is done (watch or triage a long "
                        "run while it runs; a stopped run keeps what it did)")
    parser.add_argument("--previous", default="", help="a --json (or --jsonl) file of an "
                        "earlier run: its cases of the OpInfos not run now are kept and "
                        "reported too (re-run a few OpInfos of a long run after a fix)")
    parser.add_argument("--resume", action="store_true", help="with --previous: run only "
                        "the OpInfos it lacks (continue a stopped --jsonl run)")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning)
    ops = load_op_db()
    if args.ops:
        wanted = set(args.ops.split(","))
        ops = [op for op in ops if op.name in wanted or op_label(op) in wanted]
    ops = ops[:args.limit]
    if args.resume and args.previous:
        _, finished = _load_cases(Path(args.previous))
        ops = [op for op in ops if op_label(op) not in finished]
    _OPS[:] = ops
    tasks = [(i, args.samples, args.timeout) for i in range(len(ops))]
    results: list[dict[str, Any]] = []
    stream = open(args.jsonl, "a") if args.jsonl else None  # noqa: SIM115 (closed below)

    def done_with(done: int, chunk: list[dict[str, Any]]) -> None:
        results.extend(chunk)
        _progress(done, len(tasks), chunk)
        if stream is not None:
            stream.writelines(json.dumps(c) + "\n" for c in chunk)
            stream.flush()

    try:
        if args.jobs > 1:
            with multiprocessing.get_context("fork").Pool(args.jobs,
                                                          maxtasksperchild=20) as pool:
                for done, chunk in enumerate(pool.imap(_worker, tasks), 1):
                    done_with(done, chunk)
        else:
            for done, task in enumerate(tasks, 1):
                done_with(done, _worker(task))
    finally:
        if stream is not None:
            stream.close()
    n_ops = len(ops)
    if args.previous:
        earlier_cases, earlier_ops = _load_cases(Path(args.previous))
        rerun = {op_label(op) for op in ops}
        results = [c for c in earlier_cases if c["op"] not in rerun] + results
        n_ops = len(rerun | earlier_ops)
    totals = report(results, n_ops)
    if args.json:
        Path(args.json).write_text(json.dumps({"totals": totals, "cases": results}, indent=1))
    return totals


if __name__ == "__main__":
    main()
