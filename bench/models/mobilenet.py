"""MobileNetV2 (width 1.0, 224x224 -> 1000): depthwise + pointwise convs, ReLU6, residual Add."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


def conv_bn_relu6(cin: int, cout: int, k: int = 3, stride: int = 1, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU6())


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.residual = stride == 1 and cin == cout
        layers = [] if expand == 1 else [conv_bn_relu6(cin, hidden, 1)]
        layers += [conv_bn_relu6(hidden, hidden, 3, stride, hidden),
                   nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.block = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x) if self.residual else self.block(x)


# (expansion t, output channels, repeats n, first stride s), as in the MobileNetV2 paper
CFG = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


class MobileNetV2(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        layers, c = [conv_bn_relu6(3, 32, 3, 2)], 32
        for t, cout, n, s in CFG:
            for j in range(n):
                layers.append(InvertedResidual(c, cout, s if j == 0 else 1, t))
                c = cout
        layers.append(conv_bn_relu6(c, 1280, 1))
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(1280, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # adaptive pooling to 1x1 exports as GlobalAveragePool: no spatial size in the graph
        return self.fc(F.adaptive_avg_pool2d(self.features(x), 1).flatten(1))
