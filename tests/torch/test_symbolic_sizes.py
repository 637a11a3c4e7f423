"""Lowerings whose sizes are known only at run time: grid_sampler_2d/3d, reflection/replication
padding and adaptive pooling, exported with dynamic (torch.export.Dim) input sizes and
symbolic pad widths, converted once, then run at several sizes other than the export's (1 and
47 included) and compared with torch eager at each."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from coreai_core import Dim
from tests.torch.harness import FnModule, assert_matches, convert, export, flatten, to_numpy
from tests.torch.op_db._entry import tensors

FLOATS = st.sampled_from((torch.float32, torch.float64))


def _dim(name: str, low: int = 1) -> Any:
    return torch.export.Dim(name, min=low, max=64)


def _sizes(data: st.DataObject, count: int, low: int = 1) -> list[int]:
    """``count`` sizes from {low.., 47}; 47 on at most one axis keeps volumes small."""
    small = [data.draw(st.integers(low, low + 4)) for _ in range(count)]
    if data.draw(st.booleans()):
        small[data.draw(st.integers(0, count - 1))] = 47
    return small


def _check_runs(module: torch.nn.Module, program: Any, runs: list[list[torch.Tensor]],
                tol: float) -> None:
    for feeds in runs:
        with torch.no_grad():
            expected = flatten(module(*feeds))
        got = list(program.run([to_numpy(t) for t in feeds]).values())
        assert_matches(expected, got, atol=tol, rtol=tol,
                       what=str([tuple(t.shape) for t in feeds]))


@settings(max_examples=12, deadline=None)
@given(data=st.data(), n=st.sampled_from((2, 3)), padding=st.sampled_from(
    ("zeros", "border", "reflection")), corners=st.booleans(), dtype=FLOATS)
def test_grid_sample_every_size_dynamic(data: st.DataObject, n: int, padding: str,
                                        corners: bool, dtype: torch.dtype) -> None:
    """Batch, input spatial and grid spatial sizes all dynamic; the grid reaches outside the
    input so every padding mode matters (a size-1 axis included)."""
    mode = data.draw(st.sampled_from(("bilinear", "nearest", "bicubic")[:3 if n == 2 else 2]))
    kwargs = {"mode": mode, "padding_mode": padding, "align_corners": corners}
    module = FnModule(F.grid_sample, (torch.zeros(1), torch.zeros(1)), kwargs)
    batch = _dim("batch")
    x_dims = {0: batch, **{2 + i: _dim(f"in{i}") for i in range(n)}}
    g_dims = {0: batch, **{1 + i: _dim(f"out{i}") for i in range(n)}}

    def feeds(b: int, spatial: list[int], out: list[int]) -> list[torch.Tensor]:
        x = data.draw(tensors([b, 2, *spatial], dtype))
        grid = torch.rand(b, *out, n, dtype=dtype) * 2.6 - 1.3
        return [x, grid]

    program = convert(export(module, feeds(2, [4] * n, [3] * n),
                             dynamic_shapes=((x_dims, g_dims),)))
    x_in = next(iter(program.graphs["main"].inputs.values()))
    assert all(isinstance(d, Dim) for d in x_in.type.shape[2:])
    runs = [feeds(data.draw(st.integers(1, 3)), _sizes(data, n), _sizes(data, n))
            for _ in range(3)]
    _check_runs(module, program, runs, 1e-5 if dtype == torch.float32 else 1e-10)


# name -> (fn of x and the pad mode, x's rank)
PADS: dict[str, tuple[Callable[[torch.Tensor, str], torch.Tensor], int]] = {
    "1d": (lambda x, m: F.pad(x, (2, 1), mode=m), 3),
    "2d": (lambda x, m: F.pad(x, (1, 0, 2, 2), mode=m), 4),
    "3d": (lambda x, m: F.pad(x, (1, 2, 0, 1, 2, 0), mode=m), 5),
    "1d_unbatched_crop": (lambda x, m: F.pad(x, (-1, 2), mode=m), 2),
    "symbolic_1d": (lambda x, m: F.pad(x, (x.shape[-1] // 2, 1), mode=m), 3),
    "symbolic_2d_crop": (lambda x, m: F.pad(x, (1 - x.shape[-1] // 2, 2, x.shape[-2] // 2, -1),
                                            mode=m), 4),
    "symbolic_3d": (lambda x, m: F.pad(x, (1, x.shape[-1] - 1, 0, 1, x.shape[-3] // 2, 0),
                                       mode=m), 5),
}


@settings(max_examples=20, deadline=None)
@given(data=st.data(), name=st.sampled_from(sorted(PADS)),
       mode=st.sampled_from(("reflect", "replicate")),
       dtype=st.sampled_from((torch.float32, torch.int64, torch.float16)))
def test_mode_pad_dynamic_sizes(data: st.DataObject, name: str, mode: str,
                                dtype: torch.dtype) -> None:
    """Every dim dynamic; the widths are static or derived from the input's sizes (symbolic,
    negative ones crop). Reflect needs each padded size above its width (torch's rule), so
    its dims start at 3 (``Dim.AUTO`` where torch derives that bound from symbolic widths);
    replicate runs down to size 1."""
    fn, rank = PADS[name]
    module = FnModule(lambda x: fn(x, mode), (torch.zeros(1),), {})
    symbolic = name.startswith("symbolic")
    low = 3 if mode == "reflect" else 1
    dims = {i: torch.export.Dim.AUTO if symbolic and mode == "reflect" else _dim(f"d{i}", low)
            for i in range(rank)}
    example = data.draw(tensors([5] * rank, dtype))
    program = convert(export(module, [example], dynamic_shapes=((dims,),)))
    runs = []
    for _ in range(3):
        shape = _sizes(data, rank, low)
        if symbolic and mode == "reflect":  # Dim.AUTO: sizes 0 and 1 were specialized away
            shape = [max(s, 3) for s in shape]
        runs.append([data.draw(tensors(shape, dtype))])
    _check_runs(module, program, runs, 0.0)


@settings(max_examples=20, deadline=None)
@given(data=st.data(), n=st.sampled_from((1, 2, 3)), kind=st.sampled_from(("max", "avg")),
       dtype=FLOATS, batched=st.booleans())
def test_adaptive_pool_dynamic_input(data: st.DataObject, n: int, kind: str,
                                     dtype: torch.dtype, batched: bool) -> None:
    """Static output size, dynamic input sizes: the windows are computed at run time (sizes
    smaller than, equal to, multiples of and coprime with the output; NaN for max)."""
    outs = [data.draw(st.integers(1, 4)) for _ in range(n)]
    pool = getattr(F, f"adaptive_{kind}_pool{n}d")
    fn = (lambda x: pool(x, outs, return_indices=True)) if kind == "max" else \
        (lambda x: pool(x, outs))
    module = FnModule(fn, (torch.zeros(1),), {})
    lead = [2, 3] if batched else [3]
    rank = len(lead) + n
    dims = {i: _dim(f"d{i}") for i in range(rank) if i != len(lead) - 1}  # channels static
    program = convert(export(module, [torch.randn(*lead, *[7] * n, dtype=dtype)],
                             dynamic_shapes=((dims,),)))
    runs = []
    for _ in range(3):
        spatial = _sizes(data, n)
        shape = [data.draw(st.integers(1, 3)), 3, *spatial] if batched else [3, *spatial]
        x = data.draw(tensors(shape, dtype))
        if kind == "max" and x.numel() and data.draw(st.booleans()):
            x.view(-1)[data.draw(st.integers(0, x.numel() - 1))] = float("nan")
        runs.append([x])
    _check_runs(module, program, runs, 0.0 if kind == "max" else 1e-6)


@settings(max_examples=12, deadline=None)
@given(data=st.data(), mode=st.sampled_from(("sum", "mean", "max")),
       last=st.booleans(), weighted=st.booleans(), padding=st.sampled_from((None, 0, 3)))
def test_embedding_bag_dynamic_indices_and_offsets(data: st.DataObject, mode: str, last: bool,
                                                   weighted: bool, padding: int | None) -> None:
    """The number of indices and of offsets (bags) both dynamic (Dim.AUTO, so from 2); empty
    bags, padding_idx, per_sample_weights (sum) and include_last_offset, up to 47 bags."""
    weighted = weighted and mode == "sum"

    def fn(w: torch.Tensor, i: torch.Tensor, o: torch.Tensor, *p: torch.Tensor) -> Any:
        return F.embedding_bag(i, w, o, mode=mode, include_last_offset=last,
                               per_sample_weights=p[0] if p else None, padding_idx=padding)

    def feeds(n_idx: int, n_bags: int) -> list[torch.Tensor]:
        w = data.draw(tensors([10, 3], torch.float32))
        idx = torch.tensor(data.draw(st.lists(st.integers(0, 9), min_size=n_idx,
                                              max_size=n_idx)), dtype=torch.int64)
        cuts = sorted(data.draw(st.lists(st.integers(0, n_idx), min_size=n_bags - 1,
                                         max_size=n_bags - 1)))
        offsets = torch.tensor([0, *cuts, *([n_idx] if last else [])], dtype=torch.int64)
        return [w, idx, offsets, *([torch.rand(n_idx)] if weighted else [])]

    example = feeds(6, 3)
    module = FnModule(fn, [torch.zeros(1)] * len(example), {})
    auto = torch.export.Dim.AUTO  # torch relates the sizes (e.g. the last offset's guard)
    dims = ({}, {0: auto}, {0: auto}, *([{0: auto}] if weighted else []))
    program = convert(export(module, example, dynamic_shapes=(dims,)))
    runs = [feeds(data.draw(st.integers(2, 47)), data.draw(st.sampled_from((2, 5, 47))))
            for _ in range(3)]
    _check_runs(module, program, runs, 1e-5)
