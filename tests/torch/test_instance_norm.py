"""instance_norm through nn.InstanceNorm1d/2d/3d modules and F.instance_norm: outputs and the
updated running statistics match torch eager, with the program decomposed by
get_decomp_table() or left undecomposed (the converter's on-the-fly decomposition).

aten::instance_norm is not lowered natively: its composite kernel updates the running
statistics in place although its schema says it is functional, so it must be decomposed
(functionalization then turns the update into state writes).
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from coreai_torch import TorchConverter
from tests.torch.harness import FnModule, assert_matches, to_numpy
from tests.torch.op_db._entry import sizes, tensors

MODULES = {1: torch.nn.InstanceNorm1d, 2: torch.nn.InstanceNorm2d, 3: torch.nn.InstanceNorm3d}
TOL = 1e-4  # statistics over up to 47*4*4 elements; see NORM_TOL in tests/torch/op_db/nn.py


@st.composite
def instance_inputs(draw: Any, spatial_dims: int, batched: bool = True,
                    ) -> tuple[torch.Tensor, int]:
    dtype = draw(st.sampled_from((torch.float32, torch.float64)))
    c = draw(sizes(1, 4, allow_47=False))
    spatial = [draw(sizes(1, 4, allow_47=False)) for _ in range(spatial_dims)]
    if draw(st.integers(0, 4)) == 0:
        spatial[0] = 47
    if int(np.prod(spatial)) == 1:  # torch needs more than one spatial element per instance
        spatial[-1] = 2
    lead = (draw(sizes(1, 3, allow_47=False)),) if batched else ()
    return draw(tensors((*lead, c, *spatial), dtype, low=-3.0, high=5.0)), c


def _converted(module: torch.nn.Module, inputs: list[torch.Tensor], decompose: bool) -> Any:
    return TorchConverter().add_pytorch_module(module, args=tuple(inputs),
                                               decompose=decompose).to_coreai()


@settings(max_examples=25, deadline=None)
@given(data=st.data(), spatial_dims=st.sampled_from((1, 2, 3)), batched=st.booleans(),
       affine=st.booleans(), track=st.booleans(), train=st.booleans(),
       decompose=st.booleans())
def test_instance_norm_module(data: st.DataObject, spatial_dims: int, batched: bool,
                              affine: bool, track: bool, train: bool, decompose: bool) -> None:
    """Each module form, batched or not, affine or not, with or without running statistics,
    train or eval; two calls, so the running statistics the first call updates are used."""
    x, c = data.draw(instance_inputs(spatial_dims, batched))
    module = MODULES[spatial_dims](c, affine=affine, track_running_stats=track,
                                   momentum=data.draw(st.sampled_from((0.1, 0.5))),
                                   eps=data.draw(st.sampled_from((1e-5, 1e-3)))).to(x.dtype)
    with torch.no_grad():
        for t in (*module.parameters(), *module.buffers()):
            if t.is_floating_point():
                t.copy_(data.draw(tensors(tuple(t.shape), t.dtype, low=0.2, high=2.0)))
    module.train(train)
    reference = copy.deepcopy(module)
    program = _converted(module, [x], decompose)
    for step in range(2):
        x_step = x * (step + 1) - step
        with torch.no_grad():
            expected = [reference(x_step)]
        got = list(program.run([to_numpy(x_step)]).values())
        assert_matches(expected, got, atol=TOL, rtol=TOL, what=f"call {step}")
        buffers = dict(reference.named_buffers())
        for name in program.state_names:
            assert_matches([buffers[name]], [program.state[name]], atol=TOL, rtol=TOL,
                           what=f"{name} after call {step}")
    assert len(program.state_names) == (2 if track and train else 0)


def _instance_norm(x: torch.Tensor, running_mean: Any, running_var: Any, weight: Any,
                   bias: Any, use_input_stats: bool, momentum: float, eps: float) -> Any:
    return F.instance_norm(x, running_mean, running_var, weight, bias,
                           use_input_stats=use_input_stats, momentum=momentum, eps=eps)


@settings(max_examples=25, deadline=None)
@given(data=st.data(), spatial_dims=st.sampled_from((1, 2, 3)), stats=st.booleans(),
       use_input_stats=st.booleans(), affine=st.booleans(), decompose=st.booleans())
def test_functional_instance_norm(data: st.DataObject, spatial_dims: int, stats: bool,
                                  use_input_stats: bool, affine: bool, decompose: bool) -> None:
    """F.instance_norm with running statistics as inputs (updated in place when
    use_input_stats: the program holds them as state), weight and bias."""
    if not stats:
        use_input_stats = True  # torch requires running statistics otherwise
    x, c = data.draw(instance_inputs(spatial_dims))
    channel = [data.draw(tensors((c,), x.dtype, low=0.2, high=2.0)) for _ in range(4)]
    running = channel[:2] if stats else [None, None]
    weight, bias = channel[2:] if affine else (None, None)
    args = [x, *running, weight, bias, use_input_stats, 0.3, 1e-5]
    module = FnModule(_instance_norm, args, {})
    inputs = [a for a in args if isinstance(a, torch.Tensor)]
    program = _converted(module, inputs, decompose)
    mutated = stats and use_input_stats
    feeds = [to_numpy(t) for t in inputs]
    state = None
    if mutated:  # the running statistics are state, not inputs
        state = dict(zip(program.state_names, feeds[1:3], strict=True))
        feeds = [feeds[0], *feeds[3:]]
    eager = [t.clone() for t in inputs]
    with torch.no_grad():
        expected = [module(*eager)]
    got = list(program.run(feeds, state=state).values())
    assert_matches(expected, got, atol=TOL, rtol=TOL, what="output")
    if state is not None:
        assert_matches(eager[1:3], list(state.values()), atol=TOL, rtol=TOL,
                       what="running statistics")
