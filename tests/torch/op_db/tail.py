"""Op-database entries: _trilinear (bilinear), addbmm, as_strided_scatter, empty_permuted,
tril/triu_indices, one_hot, _to_copy over every dtype pair and memory format, with_effects."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from tests.torch.op_db._entry import (
    ALL_DTYPES,
    FLOAT_DTYPES,
    EntrySet,
    Sample,
    shapes,
    sizes,
    tensors,
)

aten = torch.ops.aten

ENTRIES = EntrySet()

MATMUL_REASON = ("torch's CPU kernels sum products in a blocked order; the runtime sums in "
                 "another order, so float32 results differ by a few ulps of the sum's "
                 "magnitude and half types by one rounding of the float32 sum")


add = ENTRIES.add


def _small(max_size: int = 5) -> st.SearchStrategy[int]:
    return sizes(1, max_size)


# -- _trilinear / addbmm --------------------------------------------------------------------------

@st.composite
def _bilinear(draw: Any) -> Sample:
    dtype = draw(st.sampled_from((torch.float32, torch.float64)))
    lead = list(draw(shapes(1, 2, max_size=4)))
    i, j, o = draw(sizes()), draw(_small()), draw(_small())
    args = (draw(tensors([*lead, i], dtype, low=-2, high=2)),
            draw(tensors([*lead, j], dtype, low=-2, high=2)),
            draw(tensors([o, i, j], dtype, low=-2, high=2)))
    if draw(st.booleans()):
        args = (*args, draw(tensors([o], dtype)))
    return Sample(args)


add("aten::_trilinear.default", F.bilinear, _bilinear(), atol=1e-4, rtol=1e-4,
    tol_reason=MATMUL_REASON)


@st.composite
def _trilinear(draw: Any) -> Sample:
    """Direct calls: three 2-d inputs expanded to rank 4, summing a random subset of dims."""
    dtype = draw(st.sampled_from(FLOAT_DTYPES))
    dims = [draw(_small()) for _ in range(4)]
    # each input keeps 2 of the 4 dims, together covering all 4 (a dim expanded in all three
    # inputs is outside _trilinear's contract: torch gives it size 0)
    kepts = [sorted(draw(st.permutations(range(4)))[:2]) for _ in range(2)]
    missing = sorted(set(range(4)) - set(kepts[0]) - set(kepts[1]))
    others = [d for d in draw(st.permutations(range(4))) if d not in missing]
    kepts.append(sorted([*missing, *others[:2 - len(missing)]]))
    out = []
    expands = []
    for kept in kepts:
        expand = [d for d in range(4) if d not in kept]
        shape = [dims[d] for d in kept]
        out.append(draw(tensors(shape, dtype, low=-2, high=2)))
        expands.append(expand)
    sumdim = sorted(draw(st.lists(st.integers(0, 3), max_size=3, unique=True)))
    return Sample(tuple(out), {"expand1": expands[0], "expand2": expands[1],
                               "expand3": expands[2], "sumdim": sumdim,
                               "unroll_dim": draw(st.integers(0, 3))})


def _trilinear_call(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, **kw: Any) -> Any:
    return aten._trilinear(a, b, c, kw["expand1"], kw["expand2"], kw["expand3"], kw["sumdim"],
                           kw["unroll_dim"])


add("aten::_trilinear.default", _trilinear_call, _trilinear(), name="_trilinear.direct",
    atol=2e-2, rtol=2e-2, tol_reason=MATMUL_REASON)


@st.composite
def _addbmm(draw: Any, dtypes: tuple[torch.dtype, ...]) -> Sample:
    dtype = draw(st.sampled_from(dtypes))
    b, n, m, p = draw(_small()), draw(sizes()), draw(_small()), draw(_small())
    self_shape = draw(st.sampled_from(([n, p], [p], [1, p], [n, 1], [])))
    kwargs: dict[str, Any] = {}
    if draw(st.booleans()):
        kwargs["beta"] = draw(st.sampled_from((0, 2, -1) if not dtype.is_floating_point
                                              else (0, 0.5, 2)))
    if draw(st.booleans()):
        kwargs["alpha"] = draw(st.sampled_from((3, -1) if not dtype.is_floating_point
                                               else (0.5, -1.5)))
    special = dtype.is_floating_point and kwargs.get("beta") == 0
    return Sample((draw(tensors(self_shape, dtype, special=special)),
                   draw(tensors([b, n, m], dtype)), draw(tensors([b, m, p], dtype))), kwargs)


add("aten::addbmm.default", torch.addbmm, _addbmm((torch.float32, torch.float64, torch.int64,
                                                   torch.int32, torch.int16)),
    atol=1e-4, rtol=1e-4, tol_reason=MATMUL_REASON)
add("aten::addbmm.default", torch.addbmm, _addbmm((torch.float16, torch.bfloat16)),
    name="addbmm.half", atol=6e-2, rtol=3e-2, tol_reason=MATMUL_REASON)


# -- as_strided_scatter ---------------------------------------------------------------------------

@st.composite
def _as_strided_scatter(draw: Any) -> Sample:
    """A non-overlapping strided view: a sub-grid of a contiguous tensor, possibly transposed."""
    dtype = draw(st.sampled_from(ALL_DTYPES))
    shape = list(draw(shapes(1, 3)))
    x = draw(tensors(shape, dtype))
    contiguous = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        contiguous[i] = contiguous[i + 1] * shape[i + 1]
    view = [draw(st.integers(1, s)) for s in shape]
    step = [draw(st.integers(1, max(1, s // v))) for s, v in zip(shape, view, strict=True)]
    stride = [c * k for c, k in zip(contiguous, step, strict=True)]
    spans = [(v - 1) * k for v, k in zip(view, step, strict=True)]
    offset_dims = [draw(st.integers(0, s - 1 - sp)) for s, sp in zip(shape, spans, strict=True)]
    offset = sum(o * c for o, c in zip(offset_dims, contiguous, strict=True))
    order = draw(st.permutations(range(len(shape))))
    size = [view[i] for i in order]
    stride = [stride[i] for i in order]
    src = draw(tensors(size, dtype))
    kwargs: dict[str, Any] = {"size": size, "stride": stride}
    if offset or draw(st.booleans()):
        kwargs["storage_offset"] = offset
    return Sample((x, src), kwargs)


add("aten::as_strided_scatter.default", torch.as_strided_scatter, _as_strided_scatter())


# -- factories ------------------------------------------------------------------------------------

@st.composite
def _empty_permuted(draw: Any) -> Sample:
    shape = list(draw(shapes(0, 4)))
    layout = list(draw(st.permutations(range(len(shape)))))
    dtype = draw(st.sampled_from(ALL_DTYPES))
    return Sample((draw(tensors(shape, dtype)),), {"layout": layout})


def _empty_permuted_call(x: torch.Tensor, layout: list[int]) -> torch.Tensor:
    # torch leaves the contents unspecified: only the shape and dtype are compared, by
    # filling the result through a mask that keeps x
    e = torch.empty_permuted(x.shape, layout, dtype=x.dtype)
    return torch.where(torch.ones_like(x, dtype=torch.bool), x, e)


add("aten::empty_permuted.default", _empty_permuted_call, _empty_permuted())


@st.composite
def _triangle(draw: Any) -> Sample:
    row, col = draw(sizes(0, 6)), draw(sizes(0, 6))
    offset = draw(st.integers(-row - 1, col + 1))
    dtype = draw(st.sampled_from((torch.int64, torch.int32)))
    return Sample((draw(tensors([], dtype, low=0, high=3)),),
                  {"row": row, "col": col, "offset": offset})


def _tril(x: torch.Tensor, row: int, col: int, offset: int) -> torch.Tensor:
    return torch.tril_indices(row, col, offset, dtype=x.dtype) + x


def _triu(x: torch.Tensor, row: int, col: int, offset: int) -> torch.Tensor:
    return torch.triu_indices(row, col, offset, dtype=x.dtype) + x


add("aten::tril_indices.default", _tril, _triangle())
add("aten::triu_indices.default", _triu, _triangle())


@st.composite
def _one_hot(draw: Any) -> Sample:
    shape = draw(shapes(0, 3))
    classes = draw(st.sampled_from((1, 3, 7, 47)))
    x = draw(tensors(shape, torch.int64, low=0, high=classes - 1))
    return Sample((x,), {"num_classes": classes})


# one_hot is CompositeImplicit: export traces it into eq(x[..., None], arange(num_classes))
add("aten::eq.Tensor", F.one_hot, _one_hot(), name="one_hot")


# -- _to_copy: every dtype pair, memory formats ---------------------------------------------------

def _to_all(x: torch.Tensor, dsts: tuple[torch.dtype, ...]) -> tuple[torch.Tensor, ...]:
    return tuple(x.to(d) for d in dsts)


def _to_copy_from(src: torch.dtype) -> st.SearchStrategy[Sample]:
    @st.composite
    def build(draw: Any) -> Sample:
        # float -> uint8 of a negative value is undefined in C++ (and numpy): uint8 is a
        # destination only for non-negative data
        nonneg = src == torch.uint8 or draw(st.booleans())
        x = draw(tensors(draw(shapes()), src, low=0.0 if nonneg else -4.0, high=4.0))
        dsts = tuple(d for d in ALL_DTYPES if d != src and (nonneg or d != torch.uint8))
        return Sample((x,), {"dsts": dsts})
    return build()


for _src in ALL_DTYPES:
    add("aten::_to_copy.default", _to_all, _to_copy_from(_src),
        name=f"_to_copy.from_{str(_src).removeprefix('torch.')}")


@st.composite
def _to_memory_format(draw: Any) -> Sample:
    rank = draw(st.sampled_from((4, 5)))
    src = draw(st.sampled_from(ALL_DTYPES))
    dst = draw(st.sampled_from((None, *(d for d in ALL_DTYPES if d != src))))
    low = 0.0 if torch.uint8 in (src, dst) else -4.0
    x = draw(tensors(draw(shapes(rank, rank, max_size=3)), src, low=low))
    fmt = draw(st.sampled_from((torch.channels_last if rank == 4 else torch.channels_last_3d,
                                torch.preserve_format, torch.contiguous_format)))
    if draw(st.booleans()):
        x = x.to(memory_format=torch.channels_last if rank == 4 else torch.channels_last_3d)
    return Sample((x,), {"dtype": dst, "memory_format": fmt})


def _to_format(x: torch.Tensor, dtype: torch.dtype | None, memory_format: Any) -> torch.Tensor:
    # a clone keeps a _to_copy in the graph even when nothing else changes
    return aten._to_copy(x, dtype=dtype, memory_format=memory_format)


add("aten::_to_copy.default", _to_format, _to_memory_format(), name="_to_copy.memory_format")


# -- with_effects ---------------------------------------------------------------------------------

@st.composite
def _printed(draw: Any) -> Sample:
    # bool is left out: aten::add.Tensor's lowering rejects bool + bool (elementwise family)
    dtype = draw(st.sampled_from([d for d in ALL_DTYPES if d != torch.bool]))
    return Sample((draw(tensors(draw(shapes()), dtype)),))


def _print_then_double(x: torch.Tensor) -> torch.Tensor:
    aten._print("converted programs drop prints")
    return x + x


add("higher_order::with_effects.default", _print_then_double, _printed())
