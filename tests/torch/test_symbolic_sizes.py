"""Lowerings whose sizes are known only at run time (grid_sampler_2d/3d, reflection/replication
padding, adaptive pooling, embedding_bag, writes into views of a mutated input, roll,
diagonal, logcumsumexp, group_norm), exported with dynamic (torch.export.Dim) input sizes and
symbolic widths or shifts, converted once, then run at several sizes other than the export's
(1 and 47 included; Dim.AUTO dims start at 2) and compared with torch eager at each. The paths
that still need static sizes fail naming the op and the workaround."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from coreai_core import Dim
from coreai_torch import get_decomp_table
from coreai_torch.errors import LoweringError
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


def _copy_into_row(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x.select(0, 1).copy_(y)


def _copy_into_last_column(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x.select(1, x.shape[1] - 1).copy_(y)
    return x * 2


def _setitem_columns(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x[:, 1:3] = y
    return x.neg()


# name -> (fn mutating its first input, y's shape from x's (rows, cols))
INPUT_WRITES: dict[str, tuple[Callable[..., torch.Tensor], Callable[[int, int], list[int]]]] = {
    "select_row": (_copy_into_row, lambda n, k: [k]),
    "select_last_column": (_copy_into_last_column, lambda n, k: [n]),
    "setitem_columns": (_setitem_columns, lambda n, k: [n, 2]),
}


@settings(max_examples=12, deadline=None)
@given(data=st.data(), name=st.sampled_from(sorted(INPUT_WRITES)), dtype=FLOATS,
       decompose=st.booleans())
def test_in_place_copy_into_a_view_of_a_dynamic_user_input(data: st.DataObject, name: str,
                                                           dtype: torch.dtype,
                                                           decompose: bool) -> None:
    """``x.select(0, i).copy_(y)`` and ``x[:, a:b] = y`` on a user input with both dims
    dynamic (Dim.AUTO, so sizes from 2; the column slice needs 3): the mutated input is state
    typed with the input's dynamic dims, so runs at other sizes (47 included) write into it
    and return what torch eager returns; the state ends as torch's mutated input."""
    fn, y_shape = INPUT_WRITES[name]
    low = 3 if name == "setitem_columns" else 2
    module = FnModule(fn, (torch.zeros(1), torch.zeros(1)), {})
    auto = torch.export.Dim.AUTO

    def feeds(n: int, k: int) -> list[torch.Tensor]:
        return [data.draw(tensors([n, k], dtype)), data.draw(tensors(y_shape(n, k), dtype))]

    example = feeds(4, 5)
    dims = ({0: auto, 1: auto}, dict.fromkeys(range(len(y_shape(4, 5))), auto))
    ep = torch.export.export(module, tuple(t.clone() for t in example), dynamic_shapes=(dims,))
    if decompose:
        ep = ep.run_decompositions(get_decomp_table())
    program = convert(ep)
    (state_name,) = program.state_names
    assert all(isinstance(d, Dim)
               for d in program.graphs["main"].state_inputs[state_name].type.shape)
    for n, k in [(2 if low == 2 else 3, 47), (47, low), *[_sizes(data, 2, low) for _ in range(2)]]:
        x, y = feeds(n, k)
        state = {state_name: to_numpy(x).copy()}
        eager_x = x.clone()
        with torch.no_grad():
            expected = flatten(module(eager_x, y))
        got = list(program.run([to_numpy(y)], state=state).values())
        what = f"x {tuple(x.shape)}"
        assert_matches(expected, got, atol=0.0, rtol=0.0, what=what)
        assert_matches([eager_x], [state[state_name]], atol=0.0, rtol=0.0, what=f"state {what}")


def _roll_case(data: st.DataObject, rank: int) -> Callable[[torch.Tensor], torch.Tensor]:
    if data.draw(st.booleans()):  # flattened
        shift = data.draw(st.integers(-60, 60))
        return lambda x: torch.roll(x, shift)
    dims = data.draw(st.lists(st.integers(-rank, rank - 1), min_size=1, max_size=rank))
    shifts = [data.draw(st.integers(-60, 60)) for _ in dims]
    if data.draw(st.booleans()):  # a shift that is a symbolic size
        return lambda x: torch.roll(x, [x.shape[0] // 2 + s for s in shifts], dims)
    return lambda x: torch.roll(x, shifts, dims)


def _diagonal_case(data: st.DataObject, rank: int) -> Callable[[torch.Tensor], torch.Tensor]:
    offset = data.draw(st.integers(-4, 4))
    d1, d2 = data.draw(st.permutations(range(rank)))[:2]
    return lambda x: torch.diagonal(x, offset, d1, d2)


def _logcumsumexp_case(data: st.DataObject, rank: int,
                       ) -> Callable[[torch.Tensor], torch.Tensor]:
    dim = data.draw(st.integers(-rank, rank - 1))
    return lambda x: torch.logcumsumexp(x, dim)


# name -> draws the fn applied to an input of the given rank
SCANS: dict[str, Callable[[st.DataObject, int], Callable[[torch.Tensor], torch.Tensor]]] = {
    "roll": _roll_case, "diagonal": _diagonal_case, "logcumsumexp": _logcumsumexp_case,
}


@settings(max_examples=20, deadline=None)
@given(data=st.data(), name=st.sampled_from(sorted(SCANS)), rank=st.sampled_from((1, 2, 3)),
       dtype=FLOATS)
def test_roll_diagonal_logcumsumexp_dynamic_sizes(data: st.DataObject, name: str, rank: int,
                                                  dtype: torch.dtype) -> None:
    """Every dim dynamic (Dim with min 1): roll by static or symbolic shifts (flattened or
    on drawn dims), diagonal at a drawn offset and dim pair, logcumsumexp along a drawn dim
    (a loop over the run-time size), checked before and after ``optimize()`` at sizes other
    than the export's (1 and 47 included)."""
    rank = max(rank, 2) if name == "diagonal" else rank
    module = FnModule(SCANS[name](data, rank), (torch.zeros(1),), {})

    def draw(shape: list[int]) -> torch.Tensor:  # +-inf and NaN included
        return data.draw(tensors(shape, dtype, low=-30, high=30, special=True))

    # example sizes 8: a diagonal of length 0 or 1 at export (|offset| >= 7) is specialized
    program = convert(export(module, [draw([8] * rank)],
                             dynamic_shapes=(({i: _dim(f"d{i}") for i in range(rank)},),)))
    runs = [[draw(shape)] for shape in ([1] * rank, [47] + [2] * (rank - 1), _sizes(data, rank))]
    tol = 0.0 if name != "logcumsumexp" else 1e-6 if dtype == torch.float32 else 1e-12
    _check_runs(module, program, runs, tol)
    program.optimize()
    _check_runs(module, program, runs, tol)


@settings(max_examples=12, deadline=None)
@given(data=st.data(), groups=st.sampled_from((1, 2, 3, 6)), n=st.sampled_from((1, 2, 3)),
       affine=st.booleans(), dtype=FLOATS)
def test_group_norm_dynamic_batch_and_spatial_sizes(data: st.DataObject, groups: int, n: int,
                                                    affine: bool, dtype: torch.dtype) -> None:
    """Channels static (they define the groups), batch and every spatial dim dynamic."""
    weight, bias = (torch.randn(6, dtype=dtype), torch.randn(6, dtype=dtype)) if affine else \
        (None, None)
    module = FnModule(lambda x: F.group_norm(x, groups, weight, bias), (torch.zeros(1),), {})
    dims = {i: _dim(f"d{i}") for i in range(n + 2) if i != 1}
    program = convert(export(module, [data.draw(tensors([2, 6, *[4] * n], dtype))],
                             dynamic_shapes=((dims,),)))
    runs = [[data.draw(tensors([b, 6, *spatial], dtype))]
            for b, spatial in ((1, [47] + [1] * (n - 1)), (3, [1] * n),
                               (data.draw(st.integers(1, 3)), _sizes(data, n)))]
    # the op-db's group_norm reason: torch accumulates the statistics differently
    _check_runs(module, program, runs, 1e-4 if dtype == torch.float32 else 1e-10)


# name -> (fn, example input, its dynamic dims, the op named by the error)
STATIC_ONLY: dict[str, tuple[Callable[[torch.Tensor], Any], torch.Tensor, dict[int, Any], str]] = {
    "topk_symbolic_k": (lambda x: torch.topk(x, x.shape[1] // 2, 1), torch.randn(3, 6),
                        {1: torch.export.Dim.AUTO}, "aten::topk.default"),
    "integer_avg_pool": (lambda x: F.avg_pool2d(x, 2), torch.randint(0, 9, (1, 2, 6, 6)),
                         {2: torch.export.Dim.AUTO}, "aten::avg_pool2d.default"),
    "group_norm_channels": (lambda x: F.group_norm(x, 1), torch.randn(2, 4, 5),
                            {1: torch.export.Dim.AUTO}, "aten::native_group_norm.default"),
}


@pytest.mark.parametrize("name", sorted(STATIC_ONLY))
def test_static_only_paths_name_the_op_and_the_workaround(name: str) -> None:
    """What still needs a static size fails at conversion naming the op, the dynamic size and
    how to avoid it (export that dim static)."""
    fn, example, dims, target = STATIC_ONLY[name]
    module = FnModule(fn, (torch.zeros(1),), {})
    ep = export(module, [example], dynamic_shapes=((dims,),))
    with pytest.raises(LoweringError, match="export those dims static") as info:
        convert(ep)
    assert target in str(info.value) and ("symbolic" in str(info.value) or "?" in str(info.value))
