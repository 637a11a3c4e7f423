"""The seed guide's two examples, as users paste them (only the dialect import changed)."""

from __future__ import annotations

import numpy as np
import torch


def test_custom_op_scaled_add() -> None:
    import torch.nn as nn

    @torch.library.custom_op("my_lib::scaled_add", mutates_args=())
    def scaled_add(x: torch.Tensor, y: torch.Tensor, scale: float) -> torch.Tensor:
        """Eager implementation: runs on CPU during normal PyTorch inference."""
        return x + scale * y

    @scaled_add.register_fake
    def _(x: torch.Tensor, y: torch.Tensor, scale: float) -> torch.Tensor:
        """Abstract implementation: called by torch.export to infer output shapes."""
        return torch.empty_like(x)

    class ScaledAddModel(nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return torch.ops.my_lib.scaled_add(x, y, 0.5)

    from coreai_torch import get_decomp_table

    model = ScaledAddModel().eval()
    example_inputs = (torch.randn(4, 8), torch.randn(4, 8))

    exported = torch.export.export(model, args=example_inputs)
    exported = exported.run_decompositions(get_decomp_table())

    from coreai_core.dialects import coreai
    from coreai_torch import TorchConverter
    from coreai_torch._utils import get_operands

    converter = TorchConverter()

    @converter.register_torch_lowering("my_lib::scaled_add.default")
    def lower_scaled_add(values_map, node, loc):
        x, y = get_operands(values_map, node, [0, 1], loc)
        scale = node.args[2]  # plain Python float

        scale_val = coreai.constant(scale, dtype=x.type.element_type)
        scaled_y = coreai.broadcasting_mul(y, scale_val, loc=loc)
        return coreai.broadcasting_add(x, scaled_y, loc=loc)

    coreai_program = converter.add_exported_program(
        exported,
        input_names=["x", "y"],
        output_names=["result"],
    ).to_coreai()
    coreai_program.optimize()

    text = str(coreai_program)
    assert "coreai.broadcasting_mul" in text and "coreai.broadcasting_add" in text

    x, y = example_inputs
    out = coreai_program.run({"x": x.numpy(), "y": y.numpy()})
    assert list(out) == ["result"]
    np.testing.assert_allclose(out["result"], model(x, y).numpy(), rtol=1e-6, atol=1e-6)


def test_override_adaptive_avg_pool2d() -> None:
    import numpy as np
    import torch
    import torch.nn as nn

    from coreai_core.dialects import coreai
    from coreai_torch import TorchConverter, get_decomp_table
    from coreai_torch._utils import get_operand

    # A model that uses adaptive_avg_pool2d
    class PoolModel(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.adaptive_avg_pool2d(x, (1, 1))

    pool_model = PoolModel().eval()
    pool_input = (torch.randn(1, 3, 8, 8),)
    pool_exported = torch.export.export(pool_model, args=pool_input)
    pool_exported = pool_exported.run_decompositions(get_decomp_table())

    converter = TorchConverter()
    calls = []

    @converter.register_torch_lowering(
        "aten::_adaptive_avg_pool2d.default", allow_override=True
    )
    def lower_adaptive_avg_pool2d_static(values_map, node, loc):
        calls.append(node.name)
        x = get_operand(values_map, node, 0, loc)
        output_h, output_w = node.args[1]
        input_h, input_w = x.type.shape[2], x.type.shape[3]
        stride_h, stride_w = input_h // output_h, input_w // output_w
        kernel_h = input_h - (output_h - 1) * stride_h
        kernel_w = input_w - (output_w - 1) * stride_w
        return coreai.broadcasting_divide(
            coreai.sumpool2d(
                x,
                kernel_size=np.array([kernel_h, kernel_w], dtype=np.uint32),
                strides=np.array([stride_h, stride_w], dtype=np.uint32),
                dilation=coreai.constant([1, 1], dtype=np.uint32),
            ),
            coreai.cast(float(kernel_h * kernel_w), x.type.element_type),
        )

    coreai_program = converter.add_exported_program(pool_exported).to_coreai()
    coreai_program.optimize()

    assert calls, "the override was bypassed: _adaptive_avg_pool2d never reached the converter"
    assert "coreai.sumpool" in str(coreai_program)
    (x,) = pool_input
    (out,) = coreai_program.run({coreai_program.input_names[0]: x.numpy()}).values()
    np.testing.assert_allclose(out, pool_model(x).numpy(), rtol=1e-5, atol=1e-6)
