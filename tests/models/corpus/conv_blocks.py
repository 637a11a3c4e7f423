"""Corpus: hand-built convolutional families that no library here provides (no torchvision,
no timm), rebuilt with plain torch at toy size. Batch-norm statistics and affine parameters
are randomized (:func:`tests.models.builders.randomized`) so that a wrong batch-norm fold
changes the numbers."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from tests.models.builders import Builder, Built, randomized


def block(fn: Callable[[], nn.Module], *shape: int) -> Builder:
    """A builder: ``fn()`` under seed 0 with randomized batch norms, on a seeded input."""
    def build() -> Built:
        torch.manual_seed(0)
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(3))
        return randomized(fn()), (x,)

    return build


def conv_bn(cin: int, cout: int, k: int = 1, stride: int = 1, groups: int = 1,
            act: type[nn.Module] | None = None) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups,
                                         bias=False), nn.BatchNorm2d(cout)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


class SqueezeExcite(nn.Module):
    """Global pool, reduce, activation, expand, gate (sigmoid or hard-sigmoid)."""

    def __init__(self, c: int, r: int, act: type[nn.Module] = nn.ReLU,
                 gate: type[nn.Module] = nn.Hardsigmoid) -> None:
        super().__init__()
        self.reduce, self.expand = nn.Conv2d(c, r, 1), nn.Conv2d(r, c, 1)
        self.act, self.gate = act(), gate()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gate(self.expand(self.act(self.reduce(x.mean((2, 3), keepdim=True)))))


class IssueBlock(nn.Module):
    """The reproducer of issue 17: a MobileNetV3 inverted residual, hard-swish after
    conv + batch norm, a hard-sigmoid squeeze-excite gate."""

    def __init__(self, c: int = 24, e: int = 144, r: int = 40) -> None:
        super().__init__()
        self.pw = nn.Conv2d(c, e, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(e)
        self.dw = nn.Conv2d(e, e, 5, padding=2, groups=e, bias=False)
        self.bn2 = nn.BatchNorm2d(e)
        self.se_r, self.se_e = nn.Conv2d(e, r, 1), nn.Conv2d(r, e, 1)
        self.pwl = nn.Conv2d(e, c, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.hardswish(self.bn1(self.pw(x)))
        y = F.hardswish(self.bn2(self.dw(y)))
        g = F.hardsigmoid(self.se_e(torch.relu(self.se_r(y.mean((2, 3), keepdim=True)))))
        return x + self.bn3(self.pwl(y * g))


class InvertedResidual(nn.Module):
    """MobileNetV3 / EfficientNet MBConv: expand, depthwise, squeeze-excite, project."""

    def __init__(self, cin: int, e: int, cout: int, k: int, stride: int,
                 act: type[nn.Module], se_act: type[nn.Module], gate: type[nn.Module]) -> None:
        super().__init__()
        self.expand = conv_bn(cin, e, 1, act=act) if e != cin else nn.Identity()
        self.dw = conv_bn(e, e, k, stride, groups=e, act=act)
        self.se = SqueezeExcite(e, max(4, e // 4), se_act, gate)
        self.project = conv_bn(e, cout)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.project(self.se(self.dw(self.expand(x))))
        return x + y if self.residual else y


def mobilenet_v3() -> nn.Module:
    def ir(cin: int, e: int, cout: int, k: int, s: int) -> InvertedResidual:
        return InvertedResidual(cin, e, cout, k, s, nn.Hardswish, nn.ReLU, nn.Hardsigmoid)

    return nn.Sequential(conv_bn(3, 16, 3, 2, act=nn.Hardswish), ir(16, 16, 16, 3, 2),
                         ir(16, 72, 24, 3, 2), ir(24, 88, 24, 3, 1), ir(24, 96, 40, 5, 2),
                         conv_bn(40, 96, act=nn.Hardswish), nn.AdaptiveAvgPool2d(1),
                         nn.Conv2d(96, 128, 1), nn.Hardswish(), nn.Flatten(),
                         nn.Linear(128, 10))


class LCNetBlock(nn.Module):
    """PP-LCNet: depthwise conv-bn-hardswish, optional SE, pointwise conv-bn-hardswish."""

    def __init__(self, cin: int, cout: int, k: int, stride: int, se: bool) -> None:
        super().__init__()
        self.dw = conv_bn(cin, cin, k, stride, groups=cin, act=nn.Hardswish)
        self.se = SqueezeExcite(cin, cin // 4) if se else nn.Identity()
        self.pw = conv_bn(cin, cout, 1, act=nn.Hardswish)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pw(self.se(self.dw(x)))


def lcnet() -> nn.Module:
    return nn.Sequential(conv_bn(3, 16, 3, 2, act=nn.Hardswish), LCNetBlock(16, 32, 3, 1, False),
                         LCNetBlock(32, 32, 3, 2, False), LCNetBlock(32, 64, 5, 2, True),
                         nn.AdaptiveAvgPool2d(1), nn.Conv2d(64, 128, 1), nn.Hardswish(),
                         nn.Flatten(), nn.Linear(128, 10))


def efficientnet() -> nn.Module:
    def mb(cin: int, e: int, cout: int, k: int, s: int) -> InvertedResidual:
        return InvertedResidual(cin, e, cout, k, s, nn.SiLU, nn.SiLU, nn.Sigmoid)

    return nn.Sequential(conv_bn(3, 16, 3, 2, act=nn.SiLU), mb(16, 16, 16, 3, 1),
                         mb(16, 64, 24, 3, 2), mb(24, 96, 24, 5, 1), conv_bn(24, 64, act=nn.SiLU),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


class RegNetY(nn.Module):
    """RegNetY bottleneck: 1x1, grouped 3x3, SE, 1x1; projection shortcut when needed."""

    def __init__(self, cin: int, cout: int, stride: int, group_width: int = 8) -> None:
        super().__init__()
        self.a = conv_bn(cin, cout, 1, act=nn.ReLU)
        self.b = conv_bn(cout, cout, 3, stride, groups=cout // group_width, act=nn.ReLU)
        self.se = SqueezeExcite(cout, cin // 4, gate=nn.Sigmoid)
        self.c = conv_bn(cout, cout)
        self.shortcut = (conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout
                         else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.shortcut(x) + self.c(self.se(self.b(self.a(x)))))


def regnet() -> nn.Module:
    return nn.Sequential(conv_bn(3, 16, 3, 2, act=nn.ReLU), RegNetY(16, 24, 2), RegNetY(24, 24, 1),
                         RegNetY(24, 48, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(48, 10))


class ConvNeXtBlock(nn.Module):
    """Depthwise 7x7, channels-last LayerNorm, MLP with GELU, layer scale, residual."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = nn.LayerNorm(c, eps=1e-6)
        self.fc1, self.fc2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
        self.gamma = nn.Parameter(torch.rand(c) * 0.5 + 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(self.dw(x).permute(0, 2, 3, 1))
        y = self.gamma * self.fc2(F.gelu(self.fc1(y)))
        return x + y.permute(0, 3, 1, 2)


def convnext() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 16, 4, 4), ConvNeXtBlock(16), ConvNeXtBlock(16),
                         nn.Conv2d(16, 32, 2, 2), ConvNeXtBlock(32))


class RepVGGBlock(nn.Module):
    """Training-time RepVGG: 3x3 conv-bn + 1x1 conv-bn + identity bn, summed, ReLU."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.k3, self.k1, self.identity = conv_bn(c, c, 3), conv_bn(c, c, 1), nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.k3(x) + self.k1(x) + self.identity(x))


class MobileOneBlock(nn.Module):
    """MobileOne: several depthwise 3x3 conv-bn branches, a 1x1 "scale" branch, identity bn."""

    def __init__(self, c: int, branches: int = 3) -> None:
        super().__init__()
        self.convs = nn.ModuleList(conv_bn(c, c, 3, groups=c) for _ in range(branches))
        self.scale, self.identity = conv_bn(c, c, 1, groups=c), nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.scale(x) + self.identity(x)
        for conv in self.convs:
            y = y + conv(x)
        return torch.relu(y)


def repvgg() -> nn.Module:
    return nn.Sequential(conv_bn(3, 16, 3, 2, act=nn.ReLU), RepVGGBlock(16), RepVGGBlock(16))


def mobileone() -> nn.Module:
    return nn.Sequential(conv_bn(3, 16, 3, 2, act=nn.ReLU), MobileOneBlock(16),
                         conv_bn(16, 32, 1, act=nn.ReLU), MobileOneBlock(32, 2))


class HRNetFuse(nn.Module):
    """Two resolutions in parallel, fused both ways (strided conv down, 1x1 + upsample up)."""

    def __init__(self, ch: int = 16, cl: int = 32) -> None:
        super().__init__()
        self.stem = conv_bn(3, ch, 3, 2, act=nn.ReLU)
        self.to_low = conv_bn(ch, cl, 3, 2, act=nn.ReLU)
        self.high, self.low = conv_bn(ch, ch, 3, act=nn.ReLU), conv_bn(cl, cl, 3, act=nn.ReLU)
        self.down, self.up = conv_bn(ch, cl, 3, 2), conv_bn(cl, ch, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.stem(x)
        lo = self.low(self.to_low(h))
        h = self.high(h)
        fused_h = torch.relu(h + F.interpolate(self.up(lo), scale_factor=2, mode="nearest"))
        fused_l = torch.relu(lo + self.down(h))
        return fused_h, fused_l


class DenseNet(nn.Module):
    """Dense layers (BN-ReLU-1x1-BN-ReLU-3x3, concatenated) and a transition."""

    def __init__(self, c: int = 16, growth: int = 8, layers: int = 3) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, 2, 1, bias=False)
        self.dense = nn.ModuleList(
            nn.Sequential(nn.BatchNorm2d(c + i * growth), nn.ReLU(),
                          nn.Conv2d(c + i * growth, 4 * growth, 1, bias=False),
                          nn.BatchNorm2d(4 * growth), nn.ReLU(),
                          nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False))
            for i in range(layers))
        out = c + layers * growth
        self.transition = nn.Sequential(nn.BatchNorm2d(out), nn.ReLU(),
                                        nn.Conv2d(out, out // 2, 1, bias=False),
                                        nn.AvgPool2d(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feats = [self.stem(x)]
        for layer in self.dense:
            feats.append(layer(torch.cat(feats, 1)))
        return self.transition(torch.cat(feats, 1))


class Inception(nn.Module):
    """Inception module: 1x1, 1x1-3x3, 1x1-3x3-3x3 and pool-1x1 branches, concatenated."""

    def __init__(self, cin: int = 16) -> None:
        super().__init__()
        self.stem = conv_bn(3, cin, 3, 2, act=nn.ReLU)
        self.b1 = conv_bn(cin, 8, 1, act=nn.ReLU)
        self.b2 = nn.Sequential(conv_bn(cin, 8, 1, act=nn.ReLU), conv_bn(8, 12, 3, act=nn.ReLU))
        self.b3 = nn.Sequential(conv_bn(cin, 4, 1, act=nn.ReLU), conv_bn(4, 6, 3, act=nn.ReLU),
                                conv_bn(6, 6, 3, act=nn.ReLU))
        self.b4 = nn.Sequential(nn.MaxPool2d(3, 1, 1), conv_bn(cin, 6, 1, act=nn.ReLU))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        return torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(x)], 1)


class PoolFormerBlock(nn.Module):
    """PoolFormer: GroupNorm, ``AvgPool2d(3, 1, 1, count_include_pad=False) - x`` token
    mixer, 1x1-conv MLP, layer scale on both residuals."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.GroupNorm(1, c), nn.GroupNorm(1, c)
        self.pool = nn.AvgPool2d(3, 1, 1, count_include_pad=False)
        self.mlp = nn.Sequential(nn.Conv2d(c, 4 * c, 1), nn.GELU(), nn.Conv2d(4 * c, c, 1))
        self.scale1 = nn.Parameter(torch.rand(c, 1, 1) + 0.1)
        self.scale2 = nn.Parameter(torch.rand(c, 1, 1) + 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm1(x)
        x = x + self.scale1 * (self.pool(y) - y)
        return x + self.scale2 * self.mlp(self.norm2(x))


def poolformer() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 16, 7, 4, 2), PoolFormerBlock(16), PoolFormerBlock(16))


CONV_BLOCKS: dict[str, Builder] = {
    "issue17_mobilenet_v3_blocks": block(lambda: nn.Sequential(IssueBlock(), IssueBlock()),
                                         1, 24, 8, 8),
    "mobilenet_v3_small": block(mobilenet_v3, 1, 3, 32, 32),
    "lcnet": block(lcnet, 1, 3, 32, 32),
    "efficientnet_blocks": block(efficientnet, 1, 3, 32, 32),
    "regnet_y_blocks": block(regnet, 1, 3, 32, 32),
    "convnext_layer_scale": block(convnext, 1, 3, 32, 32),
    "repvgg": block(repvgg, 1, 3, 32, 32),
    "mobileone": block(mobileone, 1, 3, 32, 32),
    "hrnet_fuse": block(HRNetFuse, 1, 3, 32, 32),
    "densenet": block(DenseNet, 1, 3, 32, 32),
    "inception": block(Inception, 1, 3, 32, 32),
    "poolformer_blocks": block(poolformer, 1, 3, 32, 32),
}
