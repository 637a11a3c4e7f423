"""MobileNetV2 (Sandler et al., 2018, "MobileNetV2: Inverted Residuals and Linear
Bottlenecks", Table 2), for the quickstart guide where torchvision is not installed: the same
layers, shapes and forward computation as ``torchvision.models.mobilenet_v2(weights=None)``
(randomly initialized)."""

from __future__ import annotations

import torch
from torch import nn

# (expansion t, output channels c, repeats n, first stride s): the paper's Table 2
_BOTTLENECKS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1)]


def _conv_bn_relu6(cin: int, cout: int, kernel: int = 3, stride: int = 1,
                   groups: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout), nn.ReLU6(inplace=True))


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expansion: int) -> None:
        super().__init__()
        hidden = cin * expansion
        layers: list[nn.Module] = [] if expansion == 1 else [_conv_bn_relu6(cin, hidden, 1)]
        layers += [_conv_bn_relu6(hidden, hidden, stride=stride, groups=hidden),
                   nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.conv = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.residual else self.conv(x)


class MobileNetV2(nn.Module):
    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = [_conv_bn_relu6(3, 32, stride=2)]
        cin = 32
        for t, c, n, s in _BOTTLENECKS:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(_conv_bn_relu6(cin, 1280, 1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


def mobilenet_v2(weights: None = None) -> MobileNetV2:
    if weights is not None:
        raise ValueError("this stand-in for torchvision has no pretrained weights")
    return MobileNetV2()
