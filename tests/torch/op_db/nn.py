"""Op-database entries (nn family): matmuls and other products (_trilinear, addbmm),
convolution, col2im, distances, normalization (dropout is random-family: op_db/random.py).

Pooling, resampling and attention entries are the family's parts ``nn_pooling.py``,
``nn_resample.py`` and ``nn_attention.py``, like their lowerings.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from tests.torch.op_db._entry import (
    FLOAT_DTYPES,
    FLOATS,
    EntrySet,
    OpEntry,
    Sample,
    shapes,
    sizes,
    tensors,
)

aten = torch.ops.aten
MATMUL_DTYPES = st.sampled_from((*FLOAT_DTYPES, torch.int32, torch.int64))

ENTRIES = EntrySet()


add = ENTRIES.add


def dim(max_size: int = 6) -> st.SearchStrategy[int]:
    return sizes(1, max_size)


# -- matrix products -----------------------------------------------------------------------------

def operand(shape: tuple[int, ...], dtype: torch.dtype) -> st.SearchStrategy[torch.Tensor]:
    """Products' operands: floats in [-1.5, 1.5] keep float32 sums of 47+ terms within the
    default tolerance whatever order BLAS adds them in; ints in [-4, 4]."""
    return tensors(shape, dtype, low=-1.5, high=1.5) if dtype.is_floating_point else \
        tensors(shape, dtype)


@st.composite
def mm_samples(draw: Any, batch: bool = False) -> Sample:
    dtype = draw(MATMUL_DTYPES)
    n, k, m = draw(dim()), draw(sizes(1, 6)), draw(dim())
    lead = (draw(st.integers(1, 3)),) if batch else ()
    a = draw(operand((*lead, n, k), dtype))
    b = draw(operand((*lead, k, m), dtype))
    return Sample((a, b))


@st.composite
def matmul_samples(draw: Any) -> Sample:
    """Operands of rank 1-4 (numpy.matmul rules), batch dims sometimes broadcast."""
    dtype = draw(MATMUL_DTYPES)
    k = draw(dim())
    batch = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))

    def shape(rank: int, lhs: bool) -> tuple[int, ...]:
        if rank == 1:
            return (k,)
        lead = batch[4 - rank:] if rank > 2 else ()
        if lead and draw(st.booleans()):
            lead = (1, *lead[1:])
        return (*lead, draw(dim()), k) if lhs else (*lead, k, draw(dim()))

    a = draw(operand(shape(draw(st.integers(1, 4)), True), dtype))
    b = draw(operand(shape(draw(st.integers(1, 4)), False), dtype))
    return Sample((a, b))


@st.composite
def addmm_samples(draw: Any) -> Sample:
    dtype = draw(MATMUL_DTYPES)
    n, k, m = draw(dim()), draw(dim()), draw(dim())
    bias_shape = draw(st.sampled_from(((n, m), (m,), (1, m), (n, 1), ())))
    bias = draw(operand(bias_shape, dtype))
    if dtype.is_floating_point:
        beta, alpha = draw(st.sampled_from((1, 0, 0.5, -2.0))), draw(st.sampled_from((1, 0.5, 3)))
    else:
        beta, alpha = draw(st.sampled_from((1, 0, 2))), draw(st.sampled_from((1, -1, 3)))
    return Sample((bias, draw(operand((n, k), dtype)), draw(operand((k, m), dtype))),
                  {"beta": beta, "alpha": alpha})


@st.composite
def linear_samples(draw: Any) -> Sample:
    dtype = draw(FLOATS)
    lead = tuple(draw(dim(4)) for _ in range(draw(st.integers(0, 2))))
    k, m = draw(dim()), draw(dim())
    x = draw(operand((*lead, k), dtype))
    w = draw(operand((m, k), dtype))
    bias = draw(operand((m,), dtype)) if draw(st.booleans()) else None
    return Sample((x, w, bias))


add("aten::mm.default", torch.mm, mm_samples())
add("aten::bmm.default", torch.bmm, mm_samples(batch=True))
add("aten::matmul.default", torch.matmul, matmul_samples())
add("aten::addmm.default", lambda c, a, b, beta, alpha: torch.addmm(c, a, b, beta=beta,
                                                                    alpha=alpha),
    addmm_samples())
add("aten::linear.default", F.linear, linear_samples())


# -- convolution ---------------------------------------------------------------------------------

@st.composite
def conv_samples(draw: Any, transposed: bool,
                 dtypes: tuple = (*FLOAT_DTYPES, torch.int64)) -> Sample:
    n = draw(st.integers(1, 3))
    dtype = draw(st.sampled_from(dtypes))
    groups = draw(st.integers(1, 2))
    cin, cout = groups * draw(st.integers(1, 2)), groups * draw(st.integers(1, 2))
    k = [draw(st.integers(1, 3)) for _ in range(n)]
    stride = [draw(st.integers(1, 2)) for _ in range(n)]
    dil = [draw(st.integers(1, 2)) for _ in range(n)]
    max_size = 47 if n == 1 else (7 if n == 2 else 4)
    if transposed:
        pad = [draw(st.integers(0, dil[i] * (k[i] - 1))) for i in range(n)]
        out_pad = [draw(st.integers(0, max(stride[i], dil[i]) - 1)) for i in range(n)]
        lows = [max(1, (2 * pad[i] + stride[i]) // stride[i]) for i in range(n)]
        spatial = [draw(st.integers(lo, max(lo, max_size))) for lo in lows]
        w_shape = (cin, cout // groups, *k)
    else:
        pad = [draw(st.integers(0, 2)) for _ in range(n)]
        out_pad = [0] * n
        spatial = [draw(st.integers(max(1, dil[i] * (k[i] - 1) + 1 - 2 * pad[i]),
                                    max(max_size, dil[i] * (k[i] - 1) + 1)))
                   for i in range(n)]
        w_shape = (cout, cin // groups, *k)
    batch = () if (not transposed and draw(st.integers(0, 4)) == 0) else (draw(dim(2)),)
    x = draw(operand((*batch, cin, *spatial), dtype))
    w = draw(operand(w_shape, dtype))
    bias = draw(operand((cout,), dtype)) if draw(st.booleans()) else None
    kwargs = {"stride": stride, "padding": pad, "dilation": dil, "groups": groups}
    if transposed:
        kwargs["output_padding"] = out_pad
    return Sample((x, w, bias), kwargs)


def conv(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, **kw: Any) -> torch.Tensor:
    return (F.conv1d, F.conv2d, F.conv3d)[w.dim() - 3](x, w, b, **kw)


def conv_t(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, **kw: Any) -> torch.Tensor:
    return (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[w.dim() - 3](
        x, w, b, **kw)


add("aten::convolution.default", conv, conv_samples(False))
add("aten::convolution.default", conv_t,
    conv_samples(True, (torch.float32, torch.float64, torch.int64)),
    name="convolution[transposed]")
add("aten::convolution.default", conv_t, conv_samples(True, (torch.float16, torch.bfloat16)),
    name="convolution[transposed,half]", atol=0.25, rtol=2e-2,
    tol_reason="torch's CPU transposed convolution accumulates its col2im scatter in the half "
               "type; we accumulate in float32, so small outputs next to large partial sums "
               "differ by about one half-precision ulp of those sums")


@st.composite
def col2im_samples(draw: Any) -> Sample:
    dtype = draw(FLOATS)
    k = [draw(st.integers(1, 3)) for _ in range(2)]
    d = [draw(st.integers(1, 2)) for _ in range(2)]
    p = [draw(st.integers(0, 1)) for _ in range(2)]
    s = [draw(st.integers(1, 2)) for _ in range(2)]
    out = [draw(st.integers(max(1, d[i] * (k[i] - 1) + 1 - 2 * p[i]), 7)) for i in range(2)]
    blocks = [(out[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]
    c = draw(st.integers(1, 3))
    batch = (draw(dim(2)),) if draw(st.booleans()) else ()
    x = draw(tensors((*batch, c * k[0] * k[1], blocks[0] * blocks[1]), dtype))
    return Sample((x,), {"output_size": out, "kernel_size": k, "dilation": d, "padding": p,
                         "stride": s})


add("aten::col2im.default", F.fold, col2im_samples())


# -- distances ------------------------------------------------------------------------------------

@st.composite
def cdist_samples(draw: Any) -> Sample:
    dtype = draw(st.sampled_from((torch.float32, torch.float64)))
    batch = tuple(draw(dim(3)) for _ in range(draw(st.integers(0, 1))))
    p_rows = draw(st.one_of(dim(), st.just(30)))
    m = draw(dim())
    x1 = draw(tensors((*batch, p_rows, m), dtype))
    x2 = draw(tensors((*batch, draw(dim()), m), dtype))
    p = draw(st.sampled_from((0.0, 1.0, 2.0, 3.0, 0.5, float("inf"))))
    mode = draw(st.sampled_from((None, 1, 2))) if p == 2.0 else None
    return Sample((x1, x2, p, mode))


add("aten::_cdist_forward.default", aten._cdist_forward, cdist_samples(), atol=1e-4, rtol=1e-4,
    tol_reason="the matmul form |a|^2+|b|^2-2ab (as in torch) cancels for close points",
    no_half="torch's CPU cdist has no float16/bfloat16 kernel (\"not implemented for 'Half'\")")


@st.composite
def pdist_samples(draw: Any) -> Sample:
    dtype = draw(st.sampled_from((torch.float32, torch.float64)))
    x = draw(tensors((draw(st.integers(1, 7)), draw(dim())), dtype))
    return Sample((x, draw(st.sampled_from((0.0, 1.0, 2.0, 3.0, float("inf"))))))


add("aten::_pdist_forward.default", F.pdist, pdist_samples(),
    no_half="torch's CPU pdist has no float16/bfloat16 kernel (\"not implemented for 'Half'\")")


# -- normalization -------------------------------------------------------------------------------

@st.composite
def norm_input(draw: Any, min_rank: int = 2, max_rank: int = 5,
               dtypes: st.SearchStrategy = FLOATS) -> tuple[torch.Tensor, int]:
    rank = draw(st.integers(min_rank, max_rank))
    c = draw(dim(4))
    spatial = [draw(dim(4)) for _ in range(rank - 2)]
    if spatial and draw(st.integers(0, 4)) == 0:
        spatial[0] = 47
    dtype = draw(dtypes)
    return draw(tensors((draw(dim(3)), c, *spatial), dtype)), c


def _affine(draw: Any, c: int, dtype: torch.dtype) -> tuple[Any, Any]:
    w = draw(tensors((c,), dtype)) if draw(st.booleans()) else None
    b = draw(tensors((c,), dtype)) if draw(st.booleans()) else None
    return w, b


@st.composite
def batch_norm_eval_samples(draw: Any) -> Sample:
    x, c = draw(norm_input())
    w, b = _affine(draw, c, x.dtype)
    mean = draw(tensors((c,), x.dtype))
    var = draw(tensors((c,), x.dtype, low=0.1, high=3.0))
    return Sample((x, mean, var, w, b), {"eps": draw(st.sampled_from((1e-5, 1e-3)))})


@st.composite
def batch_norm_train_samples(draw: Any, dtypes: st.SearchStrategy = FLOATS) -> Sample:
    x, c = draw(norm_input(dtypes=dtypes))
    if x.numel() == x.shape[1]:  # torch needs more than one value per channel
        x = torch.cat([x, x * 0.5 + 1])
    w, b = _affine(draw, c, x.dtype)
    return Sample((x, w, b), {"eps": draw(st.sampled_from((1e-5, 1e-3)))})


@st.composite
def batch_norm_functional_samples(draw: Any) -> Sample:
    # float32/float64 only: for half inputs torch's meta says the updated running stats are
    # float32 while eager returns them in half (and rejects float32 running stats).
    s = draw(batch_norm_train_samples(st.sampled_from((torch.float32, torch.float64))))
    x, w, b = s.args
    c = x.shape[1]
    rm = draw(tensors((c,), x.dtype))
    rv = draw(tensors((c,), x.dtype, low=0.1, high=3.0))
    momentum = draw(st.sampled_from((0.1, 0.5)))
    return Sample((x, w, b, rm, rv, True, momentum, s.kwargs["eps"]))


NORM_TOL = {"atol": 1e-4, "rtol": 1e-4,
            "tol_reason": "statistics over up to 47*4*4 elements: torch accumulates the "
                          "variance in double (batch norm) or with Welford updates"}

add("aten::_native_batch_norm_legit_no_training.default",
    lambda x, m, v, w, b, eps: F.batch_norm(x, m, v, w, b, training=False, eps=eps),
    batch_norm_eval_samples())
add("aten::_native_batch_norm_legit.no_stats",
    lambda x, w, b, eps: F.batch_norm(x, None, None, w, b, training=True, eps=eps),
    batch_norm_train_samples(), **NORM_TOL)
add("aten::_native_batch_norm_legit_functional.default",
    aten._native_batch_norm_legit_functional, batch_norm_functional_samples(), **NORM_TOL,
    no_half="for half inputs torch's meta (the exported graph) says the updated running "
            "statistics are float32 while eager returns them in half; "
            "batch_norm_functional[half] runs half inputs the way a module does")


@st.composite
def batch_norm_functional_half_samples(draw: Any) -> Sample:
    """float16/bfloat16 input with parameters and running statistics in the input's dtype
    or all in float32 (torch's mixed-precision batch norm)."""
    s = draw(batch_norm_train_samples(st.sampled_from((torch.float16, torch.bfloat16))))
    x, w, b = s.args
    stat = draw(st.sampled_from((x.dtype, torch.float32)))
    w, b = (None if v is None else v.to(stat) for v in (w, b))
    rm = draw(tensors((x.shape[1],), stat))
    rv = draw(tensors((x.shape[1],), stat, low=0.1, high=3.0))
    return Sample((x, w, b, rm, rv, True, draw(st.sampled_from((0.1, 0.5))), s.kwargs["eps"]))


def batch_norm_functional_as_module(x: torch.Tensor, w: Any, b: Any, rm: torch.Tensor,
                                    rv: torch.Tensor, *args: Any) -> tuple[torch.Tensor, ...]:
    """The functional batch norm with its outputs in the dtypes a module sees.

    For half inputs torch's meta (hence the exported graph) and its eager kernel disagree on
    the statistics' dtypes: the batch statistics are half in the graph but float32 in eager
    when the running statistics are float32, and the updated running statistics are float32
    in the graph but half in eager when they are half. A module writes the updated running
    statistics back to its buffers, so its graph casts them to the buffers' dtype; the casts
    here do the same, and the batch statistics are compared in the input's dtype.
    """
    y, mean, rstd, new_rm, new_rv = aten._native_batch_norm_legit_functional(
        x, w, b, rm, rv, *args)
    return (y, mean.to(x.dtype), rstd.to(x.dtype), new_rm.to(rm.dtype), new_rv.to(rv.dtype))


def batch_norm_functional_half_reference(x: torch.Tensor, w: Any, b: Any, rm: torch.Tensor,
                                         rv: torch.Tensor, training: bool, momentum: float,
                                         eps: float) -> tuple[torch.Tensor, ...]:
    """``batch_norm_functional_as_module`` computed in float32 and rounded once to the outputs'
    dtypes; like torch, the input is normalized with the saved statistics (rounded to half
    unless the running statistics are float32). torch's bfloat16 kernel centres the input on
    a mean rounded to bfloat16, so for a channel of close values its variance and inverse
    std are off by many ulps (25.0 for 25.52 on two values 0.08 apart)."""
    xf = x.float()
    dims = [0, *range(2, x.dim())]
    mean = xf.mean(dims)
    var = xf.var(dims, unbiased=False)
    rstd = (var + eps).rsqrt()
    saved = rm.dtype if rm.dtype == torch.float32 else x.dtype
    mean, rstd = (v.to(saved).float() for v in (mean, rstd))
    view = (1, -1, *([1] * (x.dim() - 2)))
    y = (xf - mean.view(view)) * rstd.view(view)
    if w is not None:
        y = y * w.float().view(view)
    if b is not None:
        y = y + b.float().view(view)
    n = xf.numel() // x.shape[1]
    unbiased = var * (n / (n - 1))
    new_rm = momentum * mean + (1 - momentum) * rm.float()
    new_rv = momentum * unbiased + (1 - momentum) * rv.float()
    return (y.to(x.dtype), mean.to(x.dtype), rstd.to(x.dtype), new_rm.to(rm.dtype),
            new_rv.to(rv.dtype))


add("aten::_native_batch_norm_legit_functional.default", batch_norm_functional_as_module,
    batch_norm_functional_half_samples(), name="batch_norm_functional[half]",
    reference=batch_norm_functional_half_reference, **NORM_TOL)


@st.composite
def layer_norm_samples(draw: Any) -> Sample:
    dtype = draw(FLOATS)
    shape = tuple(draw(dim(5)) for _ in range(draw(st.integers(1, 4))))
    if draw(st.integers(0, 4)) == 0:
        shape = (*shape[:-1], 47)
    k = draw(st.integers(1, len(shape)))
    x = draw(tensors(shape, dtype))
    w = draw(tensors(shape[-k:], dtype)) if draw(st.booleans()) else None
    b = draw(tensors(shape[-k:], dtype)) if draw(st.booleans()) else None
    return Sample((x, w, b), {"normalized_shape": list(shape[-k:]),
                              "eps": draw(st.sampled_from((1e-5, 1e-2)))})


@st.composite
def group_norm_samples(draw: Any, batch: st.SearchStrategy[int] | None = None) -> Sample:
    dtype = draw(FLOATS)
    groups = draw(st.integers(1, 3))
    c = groups * draw(st.integers(1, 3))
    spatial = tuple(draw(dim(5)) for _ in range(draw(st.integers(0, 3))))
    x = draw(tensors((draw(batch or dim(3)), c, *spatial), dtype))
    w, b = _affine(draw, c, dtype)
    return Sample((x, w, b), {"num_groups": groups, "eps": draw(st.sampled_from((1e-5, 1e-2)))})


def layer_norm(x: torch.Tensor, w: Any, b: Any, normalized_shape: list[int],
               eps: float) -> Any:
    return aten.native_layer_norm(x, normalized_shape, w, b, eps)


def group_norm(x: torch.Tensor, w: Any, b: Any, num_groups: int, eps: float) -> Any:
    n, c = x.shape[:2]
    return aten.native_group_norm(x, w, b, n, c, math.prod(x.shape[2:]), num_groups, eps)


add("aten::native_layer_norm.default", layer_norm, layer_norm_samples(), **NORM_TOL)
add("aten::native_group_norm.default", group_norm, group_norm_samples(), **NORM_TOL)
add("aten::native_group_norm.default", group_norm, group_norm_samples(st.just(0)),
    name="native_group_norm[empty batch]")


# instance_norm is decomposed onto the batch norms above (its composite kernel updates the
# running statistics in place); module forms and the undecomposed program are tested in
# tests/torch/test_instance_norm.py.
INSTANCE_NORM_DTYPES = st.sampled_from((torch.float32, torch.float64, torch.float16))


@st.composite
def instance_norm_samples(draw: Any, mode: str) -> Sample:
    """mode: "no_stats", "input_stats" (running statistics updated, on copies here so the
    update stays inside the call) or "running_stats" (use_input_stats=False)."""
    # not bfloat16: torch's CPU kernel rounds the saved inverse std of some 47-element
    # channels to the other bfloat16 neighbour (ours is the nearer one), as for batch norm
    x, c = draw(norm_input(min_rank=3, dtypes=INSTANCE_NORM_DTYPES))
    if x[0, 0].numel() == 1:  # torch needs more than one spatial element per instance
        x = torch.cat([x, x * 0.5 + 1], dim=-1)
    w, b = _affine(draw, c, x.dtype)
    kwargs = {"momentum": draw(st.sampled_from((0.1, 0.5))),
              "eps": draw(st.sampled_from((1e-5, 1e-3)))}
    if mode == "no_stats":
        return Sample((x, w, b), kwargs)
    stats = (draw(tensors((c,), x.dtype)), draw(tensors((c,), x.dtype, low=0.1, high=3.0)))
    if mode == "input_stats":
        return Sample((x, w, b), {**kwargs, "stats": stats})
    return Sample((x, w, b, *stats), kwargs)


def instance_norm(x: torch.Tensor, w: Any, b: Any, running_mean: Any = None,
                  running_var: Any = None, *, stats: Any = None, **kwargs: Any) -> Any:
    if stats is not None:
        running_mean, running_var = (s.clone() for s in stats)
    return F.instance_norm(x, running_mean, running_var, w, b,
                           use_input_stats=running_mean is None or stats is not None, **kwargs)


for _target, _mode in (("_native_batch_norm_legit.no_stats", "no_stats"),
                       ("_native_batch_norm_legit_functional.default", "input_stats"),
                       ("_native_batch_norm_legit_no_training.default", "running_stats")):
    ENTRIES.append(OpEntry(f"aten::{_target}", instance_norm, instance_norm_samples(_mode),
                           name=f"instance_norm_{_mode}", **NORM_TOL))


MATMUL_REASON = ("torch's CPU kernels sum products in a blocked order; the runtime sums in "
                 "another order, so float32 results differ by a few ulps of the sum's "
                 "magnitude and half types by one rounding of the float32 sum")


def _small(max_size: int = 5) -> st.SearchStrategy[int]:
    return sizes(1, max_size)


# -- _trilinear / addbmm ---------------------------------------------------------------------------

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
