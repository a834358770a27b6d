"""The value networks of Sabatelli's thesis and Lubeck's report, as presets over two modules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import torch
from torch import nn

from training.choices import check_choice

ModelKind = Literal["mlp", "cnn"]
Activation = Literal["relu", "elu"]
OptimizerName = Literal["adam", "sgd"]
"""adam, or sgd (Nesterov momentum 0.9)."""
ACTIVATIONS: dict[Activation, type[nn.Module]] = {"relu": nn.ReLU, "elu": nn.ELU}


@dataclass(frozen=True)
class ModelSpec:
    """An architecture: kind (mlp or cnn), layer sizes and the published training recipe."""

    kind: ModelKind
    hidden: tuple[int, ...] = ()
    """MLP hidden widths, or the CNN's fully connected widths after the convolutions."""
    convs: tuple[tuple[int, int], ...] = ()
    """CNN layers: (channels, kernel size), same padding, no pooling."""
    activation: Activation = "relu"
    dropout: float = 0.0
    batch_norm: bool = False
    optimizer: OptimizerName = "adam"
    """adam, or sgd (Nesterov momentum 0.9)."""
    lr: float = 1e-3
    notes: str = ""

    def __post_init__(self):
        check_choice("model kind", self.kind, get_args(ModelKind))
        check_choice("activation", self.activation, get_args(Activation))
        check_choice("optimizer", self.optimizer, get_args(OptimizerName))


PRESETS: dict[str, ModelSpec] = {
    # Sabatelli: the 3-class MLP 1048-500-50, ReLU, dropout 0.2, Adam 1e-3.
    "mlp3": ModelSpec("mlp", hidden=(1048, 500, 50), activation="relu", dropout=0.2, notes="Sabatelli 3-class MLP"),
    # 15 and 20 classes: 2048-2048-1050, ELU.
    "mlp_wide": ModelSpec("mlp", hidden=(2048, 2048, 1050), activation="elu", notes="Sabatelli 15/20-class MLP"),
    # Regression: three hidden layers of 2048, ELU, batch norm, SGD with Nesterov momentum
    # (learning rate ours: 1e-2 diverges on these targets, 1e-3 does not).
    "mlp_regression": ModelSpec(
        "mlp",
        hidden=(2048, 2048, 2048),
        activation="elu",
        batch_norm=True,
        optimizer="sgd",
        lr=1e-3,
        notes="Sabatelli regression MLP",
    ),
    # CNN on bitmap or algebraic input: 20 5x5 filters, 50 3x3 filters, FC 500; ELU, batch norm,
    # dropout 0.3, same padding, no pooling.
    "cnn": ModelSpec(
        "cnn",
        hidden=(500,),
        convs=((20, 5), (50, 3)),
        activation="elu",
        dropout=0.3,
        batch_norm=True,
        notes="Sabatelli CNN",
    ),
    # CNN on the feature input: 7x7, 5x5 and 3x3 convolutions, FC 250 (filter counts are ours:
    # 20, 50, 50, as in the bitmap CNN).
    "cnn_features": ModelSpec(
        "cnn",
        hidden=(250,),
        convs=((20, 7), (50, 5), (50, 3)),
        activation="elu",
        dropout=0.3,
        batch_norm=True,
        notes="Sabatelli CNN on the feature input",
    ),
    # Lubeck: 768 -> hidden -> softmax over win/draw/loss; the hidden width scales with the data.
    "lubeck": ModelSpec("mlp", hidden=(256,), activation="relu", notes="Lubeck WDL network (hidden 256 by default)"),
}


def _block(n_in: int, n_out: int, spec: ModelSpec) -> list[nn.Module]:
    layers: list[nn.Module] = [nn.Linear(n_in, n_out)]
    if spec.batch_norm:
        layers.append(nn.BatchNorm1d(n_out))
    layers.append(ACTIVATIONS[spec.activation]())
    if spec.dropout:
        layers.append(nn.Dropout(spec.dropout))
    return layers


def _head(width: int, n_out: int, spec: ModelSpec) -> list[nn.Module]:
    """The fully connected layers (spec.hidden) and the output layer."""
    layers: list[nn.Module] = []
    for h in spec.hidden:
        layers += _block(width, h, spec)
        width = h
    return layers + [nn.Linear(width, n_out)]


class MLP(nn.Module):
    def __init__(self, n_in: int, n_out: int, spec: ModelSpec):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), *_head(n_in, n_out, spec))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class CNN(nn.Module):
    def __init__(self, in_shape: tuple[int, int, int], n_out: int, spec: ModelSpec):
        super().__init__()
        channels, h, w = in_shape
        layers: list[nn.Module] = []
        for out_channels, k in spec.convs:
            layers.append(nn.Conv2d(channels, out_channels, k, padding=k // 2))
            if spec.batch_norm:
                layers.append(nn.BatchNorm2d(out_channels))
            layers.append(ACTIVATIONS[spec.activation]())
            channels = out_channels
        layers.append(nn.Flatten())
        self.net = nn.Sequential(*layers, *_head(channels * h * w, n_out, spec))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def build_model(spec: ModelSpec, in_shape: tuple[int, ...], n_out: int) -> nn.Module:
    check_choice("model kind", spec.kind, get_args(ModelKind))
    if spec.kind == "cnn":
        if len(in_shape) != 3:
            raise ValueError(f"a CNN needs a board-shaped input (C, 8, 8), got {in_shape}")
        return CNN(in_shape, n_out, spec)
    n_in = 1
    for d in in_shape:
        n_in *= d
    return MLP(n_in, n_out, spec)
