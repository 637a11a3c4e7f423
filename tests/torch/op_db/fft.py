"""Op-database entries (fft family): the FFT lowerings (``_fft_r2c``, ``_fft_c2r``, ``_fft_c2c``)
reached through ``torch.fft``, ``torch.stft`` and ``torch.istft``, with every norm mode, one or
several dims (any order), output sizes that crop or zero-pad, and odd sizes (1, 47)."""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from tests.torch.op_db._entry import EntrySet, Sample, sizes, tensors

REAL = st.sampled_from((torch.float32, torch.float64))
COMPLEX = st.sampled_from((torch.complex64, torch.complex128))
NORMS = st.sampled_from((None, "backward", "ortho", "forward"))
# The transforms are computed in double precision and rounded once; torch's float32 FFT
# rounds in every butterfly stage, so its error grows like log2(n) ulps of the largest
# output (~sqrt(n) * |x| for random data), which these bounds cover up to n ~ 47 * 6 * 6.
FFT_TOL = dict(atol=1e-4, rtol=1e-4,
               tol_reason="torch's float32 FFT rounds at each of its log2(n) stages")

ENTRIES = EntrySet(**FFT_TOL, no_half="torch's CPU FFT (MKL/pocketfft) rejects float16/bfloat16 "
                                   "(\"Unsupported dtype Half\")")
add = ENTRIES.add


@st.composite
def spectral(draw: Any, dtypes: st.SearchStrategy, many: bool, sized: str | None = None,
             ) -> Sample:
    """A tensor of rank 1-3 and the keyword arguments of a torch.fft function.

    ``many``: ``dim`` is a list of 1-3 distinct dims (fftn style), else one dim. ``sized``
    names the size argument (``"n"`` or ``"s"``), drawn to crop, keep or zero-pad.
    """
    rank = draw(st.integers(1, 3))
    shape = [draw(sizes(1, 6, allow_47=False)) for _ in range(rank)]
    shape[draw(st.integers(0, rank - 1))] = draw(st.one_of(sizes(1, 9), st.just(47)))
    x = draw(tensors(tuple(shape), draw(dtypes)))
    kwargs: dict[str, Any] = {"norm": draw(NORMS)}
    if many:
        dims = draw(st.lists(st.integers(-rank, rank - 1), min_size=1, max_size=rank,
                             unique_by=lambda d: d % rank))
        kwargs["dim"] = dims
    else:
        dims = [draw(st.integers(-rank, rank - 1))]
        kwargs["dim"] = dims[0]
    if sized is not None and draw(st.booleans()):
        lengths = [draw(st.integers(1, 2 * shape[d] + 1)) for d in dims]
        kwargs[sized] = lengths if many else lengths[0]
    return Sample((x,), kwargs)


def c2r(fn: Any) -> Any:
    """``fn`` (irfft / irfftn / hfft) with a valid output size: the default 2 * (m - 1) is 0
    for an input of size 1, which torch rejects."""
    def call(x: torch.Tensor, **kw: Any) -> torch.Tensor:
        if "n" not in kw and "s" not in kw and isinstance(kw["dim"], int) \
                and x.shape[kw["dim"]] == 1:
            kw = {**kw, "n": 1}
        if "s" not in kw and isinstance(kw["dim"], list) and x.shape[kw["dim"][-1]] == 1:
            kw = {**kw, "s": [x.shape[d] for d in kw["dim"][:-1]] + [1]}
        return fn(x, **kw)

    return call


# -- _fft_r2c: real input ------------------------------------------------------------------------
R2C = "aten::_fft_r2c.default"
add(R2C, torch.fft.rfft, spectral(REAL, False, "n"), name="rfft")
add(R2C, torch.fft.rfftn, spectral(REAL, True, "s"), name="rfftn")
add(R2C, torch.fft.fft, spectral(REAL, False, "n"), name="fft[real]")  # onesided=False
add(R2C, torch.fft.ihfft, spectral(REAL, False, "n"), name="ihfft")

# -- _fft_c2r: Hermitian input, real output -------------------------------------------------------
C2R = "aten::_fft_c2r.default"
add(C2R, c2r(torch.fft.irfft), spectral(COMPLEX, False, "n"), name="irfft")
add(C2R, c2r(torch.fft.irfftn), spectral(COMPLEX, True, "s"), name="irfftn")
add(C2R, c2r(torch.fft.hfft), spectral(COMPLEX, False, "n"), name="hfft")
add(C2R, c2r(torch.fft.irfft), spectral(REAL, False, "n"), name="irfft[real]")  # cast first

# -- _fft_c2c: complex to complex -----------------------------------------------------------------
C2C = "aten::_fft_c2c.default"
add(C2C, torch.fft.fft, spectral(COMPLEX, False, "n"), name="fft")
add(C2C, torch.fft.ifft, spectral(COMPLEX, False, "n"), name="ifft")
add(C2C, torch.fft.fftn, spectral(COMPLEX, True, "s"), name="fftn")
add(C2C, torch.fft.ifftn, spectral(COMPLEX, True, "s"), name="ifftn")
add(C2C, torch.fft.fftn, spectral(REAL, True, "s"), name="fftn[real]")  # cast, then c2c


# -- stft / istft through their decompositions ----------------------------------------------------
@st.composite
def stft_samples(draw: Any) -> Sample:
    """A signal (1-d or batched) and stft options; window lengths up to n_fft."""
    n_fft = draw(st.sampled_from((4, 8, 15, 16)))
    batch = draw(st.sampled_from(((), (1,), (2,))))
    length = draw(st.one_of(st.integers(n_fft, 3 * n_fft), st.just(47)))
    dtype = draw(REAL)
    x = draw(tensors((*batch, length), dtype))
    win_length = draw(st.sampled_from((None, n_fft, max(1, n_fft - 3))))
    window = None
    if draw(st.booleans()):
        window = torch.hann_window(win_length or n_fft, dtype=dtype)
    kwargs = dict(n_fft=n_fft, hop_length=draw(st.sampled_from((None, 1, n_fft // 4 or 1, 3))),
                  win_length=win_length, window=window, center=draw(st.booleans()),
                  pad_mode=draw(st.sampled_from(("reflect", "constant", "replicate"))),
                  normalized=draw(st.booleans()), onesided=draw(st.booleans()),
                  return_complex=True)
    if not kwargs["center"] and length < n_fft:
        kwargs["center"] = True
    return Sample((x,), kwargs)


def stft(x: torch.Tensor, **kw: Any) -> torch.Tensor:
    return torch.stft(x, **kw)


@st.composite
def istft_samples(draw: Any) -> Sample:
    """The stft of a signal (a spectrogram istft can invert) and matching istft options."""
    n_fft = draw(st.sampled_from((4, 8, 16)))
    hop = draw(st.sampled_from((1, n_fft // 4, n_fft // 2)))
    dtype = draw(REAL)
    batch = draw(st.sampled_from(((), (2,))))
    signal = draw(tensors((*batch, draw(st.one_of(st.integers(n_fft, 4 * n_fft),
                                                  st.just(47)))), dtype))
    center, normalized, onesided = draw(st.booleans()), draw(st.booleans()), draw(st.booleans())
    # without centering, hann's zero first sample leaves the edges unrecoverable (NOLA)
    window = torch.hann_window(n_fft, dtype=dtype) if center else torch.ones(n_fft, dtype=dtype)
    spec = torch.stft(signal, n_fft, hop, window=window, center=center, normalized=normalized,
                      onesided=onesided, return_complex=True)
    length = draw(st.sampled_from((None, signal.shape[-1])))
    return Sample((spec,), dict(n_fft=n_fft, hop_length=hop, window=window, center=center,
                                normalized=normalized, onesided=onesided, length=length))


def istft(spec: torch.Tensor, **kw: Any) -> torch.Tensor:
    if not kw["onesided"]:  # a two-sided spectrum inverts to a complex signal
        return torch.istft(spec, return_complex=True, **kw)
    return torch.istft(spec, **kw)


add(R2C, stft, stft_samples(), name="stft")
add(C2R, istft, istft_samples().filter(lambda s: s.kwargs["onesided"]), name="istft")
add(C2C, istft, istft_samples().filter(lambda s: not s.kwargs["onesided"]),
    name="istft[two-sided]")
