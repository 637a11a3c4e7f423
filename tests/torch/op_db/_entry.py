"""The op-database entry type and the hypothesis strategies entries are built from."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
import torch
from hypothesis import strategies as st

FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
INT_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)
ALL_DTYPES = (*FLOAT_DTYPES, *INT_DTYPES, torch.bool)

# dtype strategies shared by the family modules
FLOATS = st.sampled_from(FLOAT_DTYPES)
NUMERIC = st.sampled_from((*FLOAT_DTYPES, *INT_DTYPES))
SIGNED = st.sampled_from((*FLOAT_DTYPES, torch.int8, torch.int16, torch.int32, torch.int64))
ANY = st.sampled_from(ALL_DTYPES)

# why entries on complex inputs are not run in float16/bfloat16 by tests/torch/test_op_db_half.py
COMPLEX_NO_HALF = ("complex values, for which torch has no bfloat16 type and only an "
                   "experimental complex32")

# Default comparison tolerance per dtype, with the reason.
# float32/float64: numpy and torch may differ by a few ulps in transcendental functions.
# float16/bfloat16: torch rounds each op's float32 result once to half precision; our
# kernels do the same but a different float32 intermediate can land on the other side of
# a half-precision rounding boundary, i.e. one ulp of the half type.
DEFAULT_TOL = {
    # complex: the tolerance of the parts' type, on the modulus of the difference
    torch.complex128: (1e-7, 1e-7),
    torch.complex64: (1e-5, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-5, 1e-5),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1.6e-2),
    # float8 results come from one rounding of an exact float32 value (quantize): exact
    torch.float8_e4m3fn: (0.0, 0.0),
    torch.float8_e5m2: (0.0, 0.0),
}


@attrs.frozen
class Sample:
    """Positional inputs (tensors or Python values) and keyword attributes for ``fn``."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any] = attrs.field(factory=dict)

    def __repr__(self) -> str:
        def show(a: Any) -> str:
            if isinstance(a, torch.Tensor):
                return f"Tensor({list(a.shape)}, {a.dtype})"
            return repr(a)

        args = ", ".join(show(a) for a in self.args)
        return f"Sample({args}; {self.kwargs})"


@attrs.frozen
class OpEntry:
    """One lowered target, how to call it from torch, and how to compare.

    ``fn(*tensors, **kwargs)`` calls torch; tensor args of a Sample become the exported
    module's inputs, other args are baked in as constants. ``atol/rtol`` override the
    per-dtype default and need ``tol_reason``. ``compare`` replaces the value comparison
    (e.g. for ops whose index outputs are ambiguous under ties). ``reference``, called like
    ``fn``, computes the expected values instead of ``fn`` where torch's CPU result depends on
    the machine (see ``tests/reference.py``). ``no_half`` says why the entry is not run in
    float16/bfloat16 by ``tests/torch/test_op_db_half.py`` (empty: it is run there).
    """

    target: str
    fn: Callable[..., Any]
    samples: st.SearchStrategy[Sample]
    atol: float | None = None
    rtol: float | None = None
    tol_reason: str = ""
    compare: Callable[[Any, Any, Sample], None] | None = None
    name: str = ""
    reference: Callable[..., Any] | None = None
    no_half: str = ""

    @property
    def id(self) -> str:
        return self.name or self.target

    def __attrs_post_init__(self) -> None:
        if (self.atol is not None or self.rtol is not None) and not self.tol_reason:
            raise ValueError(f"{self.target}: a custom tolerance needs tol_reason")


class EntrySet(list[OpEntry]):
    """A family module's entries; ``add`` builds one ``OpEntry`` and appends it.

    ``defaults`` are ``OpEntry`` fields every entry of the set gets unless the ``add`` call
    gives its own (e.g. the FFT family's tolerance). Family modules bind ``add = ENTRIES.add``.
    """

    def __init__(self, **defaults: Any) -> None:
        super().__init__()
        self.defaults = defaults

    def add(self, target: str, fn: Any, samples: st.SearchStrategy[Sample],
            **fields: Any) -> OpEntry:
        """Appends ``OpEntry(target, fn, samples, **defaults, **fields)`` and returns it."""
        entry = OpEntry(target, fn, samples, **{**self.defaults, **fields})
        self.append(entry)
        return entry


def by_id(entries: Iterable[OpEntry], ids: Iterable[str]) -> list[OpEntry]:
    """The entries named by ``ids`` (an entry's ``id``: its name, else its target), in order."""
    wanted = list(ids)
    found = {e.id: e for e in entries if e.id in wanted}
    missing = [i for i in wanted if i not in found]
    if missing:
        raise ValueError(f"no op-database entries with ids {missing}")
    return [found[i] for i in wanted]


# -- strategies ---------------------------------------------------------------------------------

def sizes(min_size: int = 1, max_size: int = 6, allow_47: bool = True,
          ) -> st.SearchStrategy[int]:
    """Dimension sizes: mostly small, sometimes 1, sometimes the odd size 47."""
    choices = st.integers(min_size, max_size)
    if allow_47:
        choices = st.one_of(choices, st.just(47)) if min_size <= 47 else choices
    if min_size <= 1:
        choices = st.one_of(st.just(1), choices)
    return choices


def shapes(min_rank: int = 0, max_rank: int = 4, min_size: int = 1, max_size: int = 6,
           ) -> st.SearchStrategy[tuple[int, ...]]:
    """Shapes whose total size stays small even with a 47."""
    @st.composite
    def build(draw: Any) -> tuple[int, ...]:
        rank = draw(st.integers(min_rank, max_rank))
        dims = [draw(sizes(min_size, max_size, allow_47=False)) for _ in range(rank)]
        if rank and draw(st.integers(0, 5)) == 0:
            dims[draw(st.integers(0, rank - 1))] = 47
        return tuple(dims)

    return build()


def broadcastable(shape: tuple[int, ...]) -> st.SearchStrategy[tuple[int, ...]]:
    """A shape that broadcasts against ``shape`` (trailing subset, some dims set to 1)."""
    @st.composite
    def build(draw: Any) -> tuple[int, ...]:
        keep = draw(st.integers(0, len(shape)))
        tail = list(shape[len(shape) - keep:])
        return tuple(1 if draw(st.booleans()) else d for d in tail)

    return build()


def tensors(shape: Sequence[int], dtype: torch.dtype, *, low: float = -4.0,
            high: float = 4.0, special: bool = False) -> st.SearchStrategy[torch.Tensor]:
    """A random tensor drawn through a seed (fast for any size).

    ``special`` mixes in 0, +-inf and NaN for float dtypes.
    """
    @st.composite
    def build(draw: Any) -> torch.Tensor:
        seed = draw(st.integers(0, 2**31 - 1))
        g = torch.Generator().manual_seed(seed)
        if dtype == torch.bool:
            return torch.rand(tuple(shape), generator=g) > 0.5
        if dtype.is_complex:
            part = torch.float32 if dtype == torch.complex64 else torch.float64
            re, im = (draw(tensors(shape, part, low=low, high=high, special=special))
                      for _ in range(2))
            return torch.complex(re, im)
        if dtype.is_floating_point:
            t = torch.rand(tuple(shape), generator=g, dtype=torch.float64) * (high - low) + low
            if special and t.numel():
                mask = torch.rand(tuple(shape), generator=g)
                t[mask < 0.05] = float("nan")
                t[(mask >= 0.05) & (mask < 0.08)] = float("inf")
                t[(mask >= 0.08) & (mask < 0.11)] = -float("inf")
                t[(mask >= 0.11) & (mask < 0.15)] = 0.0
            return t.to(dtype)
        info = torch.iinfo(dtype)
        lo, hi = max(int(low), info.min), min(int(high), info.max)
        return torch.randint(lo, hi + 1, tuple(shape), generator=g, dtype=torch.int64).to(dtype)

    return build()


def positive(shape: Sequence[int], dtype: torch.dtype) -> st.SearchStrategy[torch.Tensor]:
    return tensors(shape, dtype, low=0.1, high=4.0)


# -- complex variants ---------------------------------------------------------------------------

_COMPLEX_OF = {torch.float32: torch.complex64, torch.float64: torch.complex128}


def _complexify(sample: Sample, seed: int, imag: float) -> Sample:
    """``sample`` with each float32/float64 tensor given an imaginary part in [-imag, imag].

    float16/bfloat16 tensors become complex64 (torch has no complex bfloat16 and its
    complex32 is experimental); integer and bool tensors (indices, masks) stay as they are.
    """
    g = torch.Generator().manual_seed(seed)

    def convert(a: Any) -> Any:
        if not isinstance(a, torch.Tensor) or not a.dtype.is_floating_point:
            return a
        real = a if a.dtype == torch.float64 else a.to(torch.float32)
        im = (torch.rand(a.shape, generator=g, dtype=torch.float64) * 2 - 1) * imag
        return torch.complex(real, im.to(real.dtype))

    return Sample(tuple(convert(a) for a in sample.args), dict(sample.kwargs))


def _has_float_tensor(sample: Sample) -> bool:
    return any(isinstance(a, torch.Tensor) and a.dtype.is_floating_point for a in sample.args)


def complex_variant(entry: OpEntry, *, imag: float = 2.0, **changes: Any) -> OpEntry:
    """The entry again, on complex inputs: the floating tensors of its samples get an
    imaginary part (see ``_complexify``); ``changes`` replace fields (tolerance, compare, fn).

    Samples without a floating tensor are filtered out, so an entry must draw floats often.
    """
    samples = st.tuples(entry.samples.filter(_has_float_tensor),
                        st.integers(0, 2**31 - 1)).map(lambda p: _complexify(p[0], p[1], imag))
    fields = {"name": f"{entry.id}[complex]", "samples": samples,
              "no_half": "complex inputs: torch has no complex bfloat16 and its complex32 "
                         "(complex float16) is experimental", **changes}
    return attrs.evolve(entry, **fields)


def complex_variants(entries: Sequence[OpEntry], targets: Sequence[str], **changes: Any,
                     ) -> list[OpEntry]:
    """``complex_variant`` of every entry whose target is in ``targets`` (each must match)."""
    chosen = [e for e in entries if e.target in set(targets)]
    unmatched = set(targets) - {e.target for e in chosen}
    if unmatched:
        raise ValueError(f"complex_variants: no entries for {sorted(unmatched)}")
    return [complex_variant(e, **changes) for e in chosen]


# -- half-precision variants --------------------------------------------------------------------

HALF_DTYPES = (torch.float16, torch.bfloat16)


def _to_half(sample: Sample, dtype: torch.dtype) -> Sample:
    """``sample`` with its float32/float64 tensors (and none other) cast to ``dtype``."""
    def convert(a: Any) -> Any:
        if isinstance(a, torch.Tensor) and a.dtype in (torch.float32, torch.float64):
            return a.to(dtype)
        return a

    return Sample(tuple(convert(a) for a in sample.args),
                  {k: convert(v) for k, v in sample.kwargs.items()})


def in_float32(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A reference for half-precision inputs: ``fn`` on the inputs upcast to float32, each
    floating output rounded once to the dtype ``fn`` returns on the inputs themselves.

    For ops whose torch half kernel rounds intermediates (accumulates in half, rounds a
    mean before centring on it, ...), so its result is not the correctly rounded one.
    """
    def reference(*args: Any, **kwargs: Any) -> Any:
        def up(a: Any) -> Any:
            half = isinstance(a, torch.Tensor) and a.dtype in HALF_DTYPES
            return a.float() if half else a

        shaped = fn(*args, **kwargs)
        exact = fn(*(up(a) for a in args), **{k: up(v) for k, v in kwargs.items()})
        if isinstance(shaped, torch.Tensor):
            return exact.to(shaped.dtype)
        return type(shaped)(e.to(s.dtype) for e, s in zip(exact, shaped, strict=True))

    return reference


def half_variant(entry: OpEntry, *, dtypes: Sequence[torch.dtype] = HALF_DTYPES,
                 **changes: Any) -> OpEntry:
    """The entry again on half-precision inputs: the float32/float64 tensors of each sample
    are cast to one of ``dtypes``; ``changes`` replace fields (e.g. ``reference=in_float32(fn)``
    with its reason in a comment, or a tolerance with ``tol_reason``).

    Samples without a float32/float64 tensor are filtered out.
    """
    def has_float(sample: Sample) -> bool:
        return any(isinstance(a, torch.Tensor) and a.dtype in (torch.float32, torch.float64)
                   for a in sample.args)

    samples = st.tuples(entry.samples.filter(has_float), st.sampled_from(tuple(dtypes))).map(
        lambda p: _to_half(p[0], p[1]))
    fields = {"name": f"{entry.id}[half]", "samples": samples, **changes}
    return attrs.evolve(entry, **fields)
