"""Built-in lowerings (nn family): ``fractional_max_pool2d`` / ``fractional_max_pool3d``.

Deterministic given ``random_samples`` ([N, C, n], one sample per spatial axis, width first for
2-d and depth first for 3-d, as torch reads them). Window starts on an axis of input size
``in``, output size ``out`` and pool size ``k`` follow torch's ``generate_intervals``, computed
in the input's dtype: ``alpha = (in - k) / (out - 1)``, start ``i`` is
``int((i + u) * alpha) - int(u * alpha)`` and the last start is ``in - k``. Each (plane, output
cell) gathers its ``k1 * ... * kn`` taps from the plane flattened; the maximum wins, ties take
the first tap and a NaN wins (the last NaN of the window), like torch's scan. Indices are flat
plane indices.
"""

from __future__ import annotations

from collections.abc import Callable

from coreai_core import DType, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._nn_utils import (
    add_batch,
    const,
    const64,
    drop_batch,
    leading_shape,
    ntuple,
    static_sizes,
)
from coreai_torch.utils import cast_to

LOWERINGS = LoweringSet("nn_pooling_fractional")
reg = LOWERINGS.register_torch_lowering

# which component of random_samples drives each spatial axis (outermost first)
_SAMPLE_OF_AXIS = {2: (1, 0), 3: (0, 1, 2)}


def _starts(u: Value, size: int, out: int, pool: int) -> Value:
    """Window starts [N, C, out] (int64) from the samples ``u`` [N, C] (input dtype)."""
    dtype = u.type.element_type
    if out == 1:
        return coreai.broadcast_to(const64([size - pool]),
                                   leading_shape(u, 2, [1]))
    alpha = coreai.broadcasting_divide(const(size - pool, dtype), const(out - 1, dtype))
    u3 = coreai.expand_dims(u, [2])
    steps = coreai.broadcasting_add(u3, const([float(i) for i in range(out - 1)], dtype))
    scaled = cast_to(coreai.trunc(coreai.broadcasting_mul(steps, alpha)), DType.int64)
    base = cast_to(coreai.trunc(coreai.broadcasting_mul(u3, alpha)), DType.int64)
    firsts = coreai.broadcasting_sub(scaled, base)
    last = coreai.broadcast_to(const64([size - pool]), leading_shape(u, 2, [1]))
    return coreai.concat([firsts, last], axis=2)


def _fractional_max(n: int) -> Callable[..., list[Value]]:
    name = f"fractional_max_pool{n}d"

    def lowering(self: Value, kernel_size: list[int], output_size: list[int],
                 random_samples: Value) -> list[Value]:
        pools = ntuple(kernel_size, n, "kernel_size")
        outs = ntuple(output_size, n, "output_size")
        x, added = add_batch(self, n)
        sizes = static_sizes(x, list(range(2, n + 2)), f"{name} input")
        for size, out, pool in zip(sizes, outs, pools, strict=True):
            if pool > size or out + pool - 1 > size:
                raise ValueError(f"{name}: output size {outs} with kernel {pools} does not fit "
                                 f"the input sizes {sizes} (need output + kernel - 1 <= input)")
        samples = cast_to(random_samples, x.type.element_type)
        # flat plane position of each tap: [N, C, o1, k1, ..., on, kn], built axis by axis
        pos: Value | None = None
        for axis in range(n):
            u = coreai.gather(samples, const64(_SAMPLE_OF_AXIS[n][axis]), axis=2)
            starts = _starts(u, sizes[axis], outs[axis], pools[axis])
            taps = coreai.broadcasting_add(coreai.expand_dims(starts, [3]),
                                           const64([list(range(pools[axis]))]))
            if pos is None:
                pos = taps
                continue
            # pos [N, C, ...prev] * size + taps, with taps' two axes appended after prev
            prev_rank = pos.type.rank
            pos = coreai.broadcasting_add(
                coreai.broadcasting_mul(coreai.expand_dims(pos, [prev_rank, prev_rank + 1]),
                                        const64(sizes[axis])),
                coreai.expand_dims(taps, list(range(2, prev_rank))))
        assert pos is not None
        rank = pos.type.rank
        perm = [0, 1, *(2 + 2 * i for i in range(n)), *(3 + 2 * i for i in range(n))]
        pos = coreai.transpose(pos, perm)
        count, width = 1, 1
        for o, k in zip(outs, pools, strict=True):
            count, width = count * o, width * k
        assert rank == 2 + 2 * n
        total = 1
        for s in sizes:
            total *= s
        flat_pos = coreai.reshape(pos, leading_shape(pos, 2, [count * width]))
        planes = coreai.reshape(x, leading_shape(x, 2, [total]))
        y = coreai.gather_along_axis(planes, flat_pos, axis=2)
        y = coreai.reshape(y, leading_shape(y, 2, [*outs, width]))
        pos = coreai.reshape(pos, leading_shape(pos, 2, [*outs, width]))
        values = coreai.reduce_max(y, axes=[-1])
        local = coreai.argmax(y, axis=-1)
        if y.type.element_type.is_float:
            nan = coreai.isnan(y)
            last = coreai.argmax(coreai.reverse(cast_to(nan, DType.int8), axes=[-1]), axis=-1)
            last = coreai.broadcasting_sub(const64(width - 1), last)
            local = coreai.broadcasting_where(coreai.any_(nan, axes=[-1]), last, local)
        chosen = coreai.gather_along_axis(pos, coreai.expand_dims(local, [-1]), axis=-1)
        indices = coreai.shrink_dims(chosen, [pos.type.rank - 1])
        return [drop_batch(values, added), drop_batch(indices, added)]

    lowering.__doc__ = (f"{name}(Tensor self, int[{n}] kernel_size, int[{n}] output_size, "
                        "Tensor random_samples) -> (Tensor, Tensor)")
    lowering.__name__ = f"aten_{name}_default"
    return lowering


reg("aten::fractional_max_pool2d.default")(_fractional_max(2))
reg("aten::fractional_max_pool3d.default")(_fractional_max(3))

__all__ = ["LOWERINGS"]
