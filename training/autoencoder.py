"""Stacked autoencoders trained layer by layer (greedy pretraining), for any bit-vector input.

DeepChess's Pos2Vec (773-600-400-200-100) and the piece-value networks' autoencoder
(837-600-400-200-100) are both a `StackedEncoder` pretrained with `pretrain_stack`: layer k
learns to reconstruct layer k-1's output (the input bits for k = 0) through a decoder of its
own (one Linear and a sigmoid), with binary cross-entropy, while the layers below it stay
frozen. Hidden units are sigmoids by default, as in a deep belief network, so that every
layer's output is in [0, 1] and is a valid BCE target for the next layer.

    enc = StackedEncoder((773, 600, 400, 200, 100))
    result = pretrain_stack(enc, inputs, PretrainConfig(epochs=5), device="cpu",
                            val_inputs=val_inputs)
    enc(x)                       # (B, 100) codes
    result.decoders              # the trained decoders, layer k's maps widths[k+1] -> widths[k]
    mirrored_decoder(enc, result.decoders)   # 100-200-400-600-773 (a full autoencoder's decoder)

`inputs(epoch)` yields float tensors (B, widths[0]) with values in [0, 1] (e.g. an encoder
applied to the loader's batches: `encoded_inputs`); an epoch's batches must depend only on
`epoch` so that runs are reproducible. A model of the training loop (training.train) that has
a `pretrain(...)` method gets it called once before its first supervised epoch (see
`Pretrainable`; TrainConfig.pretrain_epochs sets the epochs per layer); it is expected to
call `pretrain_stack`.

This module knows nothing of chess, datasets or Dagster.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, get_args

import torch
from torch import nn

from training.choices import check_choice

HiddenActivation = Literal["sigmoid", "relu"]
"""Hidden units of a stack: sigmoid (outputs in [0, 1], every layer pretrainable with BCE) or
relu (only the first layer then has a BCE target in [0, 1]; deeper layers cannot be
pretrained this way and pretrain_stack refuses them)."""
_ACT: dict[str, type[nn.Module]] = {"sigmoid": nn.Sigmoid, "relu": nn.ReLU}

Inputs = Callable[[int], Iterable[torch.Tensor]]
"""epoch -> that epoch's batches of input vectors (B, widths[0]), values in [0, 1]."""


class StackedEncoder(nn.Module):
    """Linear + activation per layer, widths[0] -> widths[1] -> ... -> widths[-1]."""

    def __init__(self, widths: Sequence[int], activation: HiddenActivation = "sigmoid"):
        super().__init__()
        check_choice("hidden activation", activation, get_args(HiddenActivation))
        if len(widths) < 2 or any(int(w) < 1 for w in widths):
            raise ValueError(f"a stack needs at least two positive widths, got {list(widths)}")
        self.widths = tuple(int(w) for w in widths)
        self.activation = activation
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(self.widths, self.widths[1:]))
        self.act = _ACT[activation]()

    def forward(self, x: torch.Tensor, depth: int | None = None) -> torch.Tensor:
        """The output of the first `depth` layers (all of them by default)."""
        for layer in self.layers[: len(self.layers) if depth is None else depth]:
            x = self.act(layer(x))
        return x


@dataclass
class PretrainConfig:
    epochs: int = 10
    """Epochs per layer."""
    lr: float = 5e-3
    """Adam's learning rate at each layer's first epoch (DeepChess: 5e-3)."""
    lr_decay: float = 0.98
    """The learning rate is multiplied by this after every epoch (DeepChess: 0.98)."""
    max_minutes: float = 0.0
    """Wall time for the whole stack, shared evenly by the layers (0: no bound); a layer out of
    its share ends its epoch early."""
    seed: int = 0
    """Seed of the decoders' initial weights (the stack's own come from its constructor)."""

    def __post_init__(self):
        if self.epochs < 0 or self.lr <= 0 or not 0 < self.lr_decay <= 1 or self.max_minutes < 0:
            raise ValueError(
                f"pretraining needs epochs >= 0, lr > 0, 0 < lr_decay <= 1 and max_minutes >= 0; got {self}"
            )


@dataclass
class PretrainResult:
    history: list[dict] = field(default_factory=list)
    """One row per (layer, epoch): phase 'pretrain_<k>', layer, epoch, lr, train_loss (mean
    BCE per unit), val_loss (None without val_inputs), seconds, cut (True where the layer's time
    share ended the epoch early, or before its first step)."""
    decoders: nn.ModuleList = field(default_factory=nn.ModuleList)
    """Decoder of each layer: decoders[k] maps widths[k+1] back to widths[k] (Linear; apply a
    sigmoid for the reconstruction)."""


class Pretrainable(Protocol):
    """A model the training loop pretrains before its supervised epochs (training.train)."""

    def pretrain(
        self,
        inputs: Callable[[int], Iterable],
        val_inputs: Callable[[int], Iterable] | None,
        cfg: PretrainConfig,
        device: torch.device,
        log,
    ) -> list[dict]:
        """Pretrain in place, e.g. with pretrain_stack(self.some_stack, inputs, cfg, ...);
        returns history rows (pretrain_stack's). inputs(epoch) yields the run's encoder output
        for batches of train positions (val_inputs: of val), on the device: a tensor for the
        tensor encoders, whatever the encoder gives otherwise (map it to tensors first)."""
        ...


def encoded_inputs(batches, encoder, device, transform: Callable | None = None) -> Inputs:
    """`inputs` for pretrain_stack from a loader (anything with epoch(n) yielding
    training.encoders.Batch) and an encoder: each batch moved to the device, encoded, then
    passed through `transform` if given (e.g. PieceRows -> its dense (N, 837) matrix)."""

    def inputs(epoch: int) -> Iterable[torch.Tensor]:
        for batch in batches.epoch(epoch):
            x = encoder(batch.to(device))
            yield transform(x) if transform else x

    return inputs


def reconstruction_loss(
    stack: StackedEncoder, decoder: nn.Module, layer: int, inputs: Iterable[torch.Tensor], device
) -> float:
    """Mean BCE per unit of layer `layer` reconstructing its input through `decoder`."""
    total, n = 0.0, 0
    stack.eval()
    decoder.eval()
    with torch.no_grad():
        for x in inputs:
            x = x.to(device).float()
            target = stack(x, layer)
            recon = decoder(stack.act(stack.layers[layer](target)))
            total += nn.functional.binary_cross_entropy_with_logits(recon, target, reduction="sum").item()
            n += target.numel()
    return total / n if n else math.nan


def pretrain_stack(
    stack: StackedEncoder,
    inputs: Inputs,
    cfg: PretrainConfig | None = None,
    *,
    device: torch.device | str = "cpu",
    val_inputs: Inputs | None = None,
    log: Callable[[str], None] = print,
    layers: Sequence[int] | None = None,
) -> PretrainResult:
    """Train `stack` greedily, one layer after the other (all, or `layers`), in place.

    Layer k: the layers below it frozen, a fresh decoder Linear(widths[k+1], widths[k]), Adam at
    cfg.lr times cfg.lr_decay ** epoch, BCE between the sigmoid of the decoder's output and the
    layer's input. Gradients reach only layer k and its decoder."""
    cfg = cfg or PretrainConfig()
    device = torch.device(device)
    if stack.activation != "sigmoid" and any(k > 0 for k in (layers or range(len(stack.layers)))):
        raise ValueError(
            f"layer-wise BCE pretraining needs outputs in [0, 1]: a {stack.activation} stack can only "
            "pretrain its first layer (layers=[0]); use activation='sigmoid'"
        )
    stack.to(device)
    order = list(range(len(stack.layers)) if layers is None else layers)
    gen = torch.Generator().manual_seed(cfg.seed)
    decoders = nn.ModuleList()
    for k in range(len(stack.layers)):
        d = nn.Linear(stack.widths[k + 1], stack.widths[k])
        with torch.no_grad():  # seeded, independent of the global RNG
            bound = 1 / math.sqrt(stack.widths[k + 1])
            d.weight.copy_(torch.empty_like(d.weight).uniform_(-bound, bound, generator=gen))
            d.bias.copy_(torch.empty_like(d.bias).uniform_(-bound, bound, generator=gen))
        decoders.append(d)
    decoders.to(device)
    result = PretrainResult(decoders=decoders)
    share = cfg.max_minutes * 60 / max(len(order), 1)
    for k in order:
        if not 0 <= k < len(stack.layers):
            raise ValueError(f"no layer {k}: the stack has layers 0..{len(stack.layers) - 1}")
        layer, decoder = stack.layers[k], decoders[k]
        params = list(layer.parameters()) + list(decoder.parameters())
        opt = torch.optim.Adam(params, lr=cfg.lr)
        start = time.monotonic()
        for epoch in range(cfg.epochs):
            lr = cfg.lr * cfg.lr_decay**epoch
            for g in opt.param_groups:
                g["lr"] = lr
            stack.train()
            decoder.train()
            e0 = time.monotonic()
            loss_sum, n, out_of_time = 0.0, 0, False
            for x in inputs(epoch):
                if share and time.monotonic() - start > share:
                    out_of_time = True
                    break
                x = x.to(device).float()
                with torch.no_grad():
                    target = stack(x, k)  # the frozen layers below
                recon = decoder(stack.act(layer(target)))
                loss = nn.functional.binary_cross_entropy_with_logits(recon, target)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                loss_sum += loss.item() * len(x)
                n += len(x)
            if not math.isfinite(loss_sum):
                raise FloatingPointError(
                    f"pretraining layer {k} diverged in epoch {epoch}: try a lower learning rate than {cfg.lr:g}"
                )
            row = {
                "phase": f"pretrain_{k}",
                "layer": k,
                "epoch": epoch,
                "lr": lr,
                "train_loss": loss_sum / max(n, 1),
                "val_loss": (
                    reconstruction_loss(stack, decoder, k, val_inputs(0), device) if val_inputs is not None else None
                ),
                "seconds": time.monotonic() - e0,
                "cut": out_of_time,
            }
            result.history.append(row)
            log(
                f"pretrain layer {k} ({stack.widths[k]}->{stack.widths[k + 1]}) epoch {epoch}: "
                f"reconstruction BCE {row['train_loss']:.4f}"
                + (f", val {row['val_loss']:.4f}" if row["val_loss"] is not None else "")
            )
            if out_of_time or not n:
                log(f"pretrain layer {k}: time share of {share / 60:g} min used")
                break
    return result


def mirrored_decoder(stack: StackedEncoder, decoders: nn.ModuleList) -> nn.Sequential:
    """The decoder of the whole stack from its layer-wise decoders, top first (widths[-1] ->
    ... -> widths[0]); the stack's activation between layers, logits out (apply a sigmoid, or
    use BCE with logits)."""
    mods: list[nn.Module] = []
    for i, k in enumerate(reversed(range(len(stack.layers)))):
        mods.append(decoders[k])
        if i < len(stack.layers) - 1:
            mods.append(_ACT[stack.activation]())
    return nn.Sequential(*mods)
