"""A trained network as a search evaluator: boards in, one score each, side to move's view.

The score is in centipawn-like units whatever the model predicts:
- 3-class win/draw/loss models (Sabatelli's 3 classes, Lubeck's results): 1000 x (P(win) - P(loss));
- 15 and 20 classes: the expected centipawns over the classes' midpoints (beyond-edge classes
  at 100 cp past their edge);
- regression on the linear target: the target mapped back to centipawns; on the win probability
  (`target_kind: win_prob`): its centipawns, wp_scale x log10(p / (1 - p));
- regression on centipawns / 100 (the piece-value network): x 100;
- a result in [0, 1] (the piece-value network's second variant): 1000 x (2 x result - 1), the
  3-class scale with the expected result in place of P(win) - P(loss).

Models trained from the side to move's point of view (Sabatelli's datasets by default) see a
Black-to-move position mirrored, as in training; White's-view models (Lubeck's) are negated
for Black.

On the CPU an MLP over `bitmap768` runs without torch (SparseMLP): a search calls the evaluator
once a capture node with one board, where torch's fixed cost a call is most of the work.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import chess
import numpy as np
import torch

from pipeline.datasets.datasets import DATASETS
from pipeline.play.search import board_arrays, board_bits, white_to_move
from training.checkpoints import CP_PER_UNIT, load_checkpoint, load_model, resolve_device, rows_pov
from training.encoders import Batch, get_encoder

WDL_SCALE = 1000.0
WP_EPSILON = 1e-6
"""A win-probability output is held this far inside (0, 1) before it is mapped to centipawns
(wp_scale x 6: 2,400 at the default 400, beyond any clipped label and below the mate scores)."""


def class_midpoints(classes: int) -> np.ndarray:
    """Centipawns at the middle of each of Sabatelli's 15 or 20 classes (sql/views/macros.sql)."""
    # class 0 is below -750 (100 cp past the edge: -850); class c in 1..6 is [-150 - 100(7-c), -50 - 100(7-c)).
    losses = [-850.0] + [-(100.0 + 100 * (7 - c)) for c in range(1, 7)]
    wins = [-x for x in reversed(losses)]
    if classes == 15:
        return np.array(losses + [0.0] + wins, dtype=np.float32)
    if classes == 20:
        return np.array(losses + [-125.0, -75.0, -25.0, 25.0, 75.0, 125.0] + wins, dtype=np.float32)
    raise ValueError(f"no class midpoints for {classes} classes")


def checkpoint_pov(ck: dict) -> str:
    """'side_to_move' or 'white': how the model's training rows were oriented."""
    source = ck.get("dataset") or {}
    if source.get("pov"):
        return source["pov"]
    train = (source.get("splits") or {}).get("train", {}).get("path")
    if train and Path(train).exists():  # checkpoints from before the pov was recorded
        return rows_pov(Path(train))
    return DATASETS[ck["config"]["dataset"]].defaults.get("pov", "white")


def _mirror_index() -> np.ndarray:
    """(768,) the bitmap768 feature a mirrored board (colours swapped, ranks flipped:
    training.encoders.oriented) sets for each feature of the board as stored (plane * 64 + square);
    its own inverse."""
    j = np.arange(768)
    return ((j // 64 + 6) % 12) * 64 + ((j % 64) ^ 56)


class SparseMLP:
    """An MLP over the 768 piece bits (bitmap768) as numpy arithmetic: the same scores as the
    torch model, at a fraction of its cost a call. The first layer sums the weight rows of the
    pieces on the board (about 32 of 768; for a mirrored board, of its mirrored rows), batch
    norm is folded into the linear layer before it, and dropout is gone (an evaluation). The
    search calls its evaluator once a capture node with one board, where torch's fixed costs
    (its encoder's tensor operations, each layer's call) were most of the work: about 430 us a
    board against 60 here, measured on this machine (benchmarks/search.py times whole searches).
    It reads the piece bits straight from the boards (board_bits), not the store's encoding."""

    ACTIVATIONS = {
        "ReLU": lambda x: np.maximum(x, 0.0),
        "ELU": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))),  # no overflow where x > 0
    }

    TENSORS = {"Linear": ("weight", "bias"), "BatchNorm1d": ("weight", "bias", "running_mean", "running_var")}
    """What each layer kind must hold to be folded into numpy."""

    def __init__(self, layers: list[tuple[np.ndarray, np.ndarray, str]]):
        # layers: (weight (in, out), bias (out,), activation after it or "") in order; the first is sparse
        first, bias, act = layers[0]
        zero = np.zeros((1, first.shape[1]))  # what padding gathers
        self.first = np.ascontiguousarray(np.concatenate([first, first[_mirror_index()], zero]), dtype=np.float32)
        self.bias, self.act = bias.astype(np.float32), act
        self.rest = [(np.ascontiguousarray(w, dtype=np.float32), b.astype(np.float32), a) for w, b, a in layers[1:]]

    @classmethod
    def of(cls, model: torch.nn.Module, encoder: str) -> SparseMLP | None:
        """The model as a SparseMLP, or None where it is not one (another encoder, a layer this
        class does not know, an ELU of another alpha)."""
        from training.models import MLP

        if encoder != "bitmap768" or not isinstance(model, MLP):  # MLP.forward is net(x), nothing else
            return None

        def arr(t: torch.Tensor) -> np.ndarray:
            return t.detach().double().numpy()

        layers: list[list] = []
        for m in model.net:
            name = type(m).__name__
            if name in ("Flatten", "Dropout"):
                continue
            if any(getattr(m, t) is None for t in cls.TENSORS.get(name, ())):  # no bias, affine or running stats
                return None
            if name == "Linear":
                layers.append([arr(m.weight).T.copy(), arr(m.bias), ""])
            elif name == "BatchNorm1d" and layers and not layers[-1][2]:
                scale = arr(m.weight) / np.sqrt(arr(m.running_var) + m.eps)
                w, b = layers[-1][:2]
                layers[-1][:2] = [w * scale, (b - arr(m.running_mean)) * scale + arr(m.bias)]
            elif name in cls.ACTIVATIONS and layers and not layers[-1][2] and getattr(m, "alpha", 1.0) == 1.0:
                layers[-1][2] = name
            else:
                return None
        if not layers or layers[0][0].shape[0] != 768:
            return None
        return cls([(w, b, a) for w, b, a in layers])

    def __call__(self, bits: np.ndarray, mirrored: np.ndarray) -> np.ndarray:
        """(N, outputs) float32 from the piece bits (N, 768) (pipeline.play.search.board_bits, the
        store's planes unpacked) and which rows to mirror."""
        rows, cols = np.nonzero(bits)  # a board's features in order, row by row
        cols = cols + 768 * mirrored[rows]
        if len(bits) <= 1:
            h = self.first[cols].sum(0, keepdims=True)[: len(bits)]
        else:  # each row's features side by side, padded with the zero row: one gather, one sum
            counts = np.bincount(rows, minlength=len(bits))
            idx = np.full((len(bits), max(int(counts.max()), 1)), 2 * 768)
            idx[rows, np.arange(len(rows)) - (np.cumsum(counts) - counts)[rows]] = cols
            h = self.first[idx].sum(1)
        h = h + self.bias
        if self.act:
            h = self.ACTIVATIONS[self.act](h)
        for w, b, act in self.rest:
            h = h @ w + b
            if act:
                h = self.ACTIVATIONS[act](h)
        return h


class NetworkEvaluator:
    """Scores boards with a checkpoint's best model (see the module docstring for the units).
    `sparse`: on the CPU, an MLP over bitmap768 runs as a SparseMLP (the same scores, within
    float32 rounding); False keeps torch."""

    def __init__(
        self, checkpoint: Path | str, name: str = "", device: str = "cpu", threads: int = 1, sparse: bool = True
    ):
        if threads:
            torch.set_num_threads(threads)
        self.device = resolve_device(device)
        self.model, ck = load_model(checkpoint, str(self.device))  # a file or an S3 store's object
        self.model.to(self.device)
        self.ck = ck
        cfg = ck["config"]
        self.dataset = cfg["dataset"]
        self.classes = DATASETS[self.dataset].classes
        self.encoder = get_encoder(ck["encoder"]["name"])
        self.pov = checkpoint_pov(ck)
        self.name = name or f"{cfg['model']}_{cfg['encoder']}_{self.dataset}"
        self._values: np.ndarray | None = None
        self._clip = 0.0
        self._wp_scale = 0.0
        self._cp_per_unit = 0.0
        self._expected = False
        if getattr(self.model, "output", "linear") == "sigmoid":  # the piece-value net's result variant
            self._expected = True
        elif self.classes == 0 and "clip_cp" not in DATASETS[self.dataset].defaults and self.dataset in CP_PER_UNIT:
            self._cp_per_unit = float(CP_PER_UNIT[self.dataset])
        elif self.classes == 3:
            self._values = np.array([-WDL_SCALE, 0.0, WDL_SCALE])
        elif self.classes in (15, 20):
            self._values = class_midpoints(self.classes).astype(np.float64)
        elif self.classes == 0:
            # the parameters the rows were built with (checkpoints from before they were recorded:
            # the dataset's defaults)
            params = {**DATASETS[self.dataset].defaults, **(ck.get("dataset") or {}).get("params", {})}
            if "clip_cp" not in params:
                raise ValueError(f"{self.dataset}: its regression target has no map back to centipawns")
            column = cfg.get("target", "target")  # the column learnt: `target` is the one target_kind names
            if (params.get("target_kind", "linear") if column == "target" else column) == "win_prob":
                self._wp_scale = float(params["wp_scale"])
            else:
                self._clip = float(params["clip_cp"])
        else:
            raise ValueError(f"{self.dataset}: {self.classes} classes have no score mapping")
        self.sparse = SparseMLP.of(self.model, self.encoder.name) if sparse and self.device.type == "cpu" else None
        if self.sparse is not None and threads:
            from threadpoolctl import threadpool_limits

            threadpool_limits(threads, user_api="blas")  # numpy's matrix products, as torch's above (process-wide)

    def evaluate(self, boards: Sequence[chess.Board]) -> np.ndarray:
        white = white_to_move(boards)
        mirrored = ~white if self.pov == "side_to_move" else np.zeros_like(white)
        if self.sparse is not None:
            out = self.sparse(board_bits(boards), mirrored).astype(np.float64)
        else:
            planes, _, castling = board_arrays(boards)
            out = self._forward(planes, white, castling, mirrored)
        if self._values is not None:
            e = np.exp(out - out.max(1, keepdims=True))
            score = (e / e.sum(1, keepdims=True)) @ self._values
        elif self._expected:
            score = (2 * out[:, 0] - 1) * WDL_SCALE
        elif self._cp_per_unit:
            score = out[:, 0] * self._cp_per_unit
        elif self._wp_scale:  # the win probability's centipawns, its outputs held inside (0, 1)
            p = np.clip(out[:, 0], WP_EPSILON, 1.0 - WP_EPSILON)
            score = self._wp_scale * np.log10(p / (1.0 - p))
        else:
            score = out[:, 0] * (2 * self._clip) - self._clip
        if self.pov == "white":
            score = np.where(white, score, -score)
        return score

    @torch.no_grad()
    def _forward(self, planes: np.ndarray, white: np.ndarray, castling: np.ndarray, mirrored: np.ndarray) -> np.ndarray:
        """The torch model's outputs (N, outputs) float64."""
        batch = Batch(*(torch.from_numpy(a) for a in (planes, white, castling, mirrored))).to(self.device)
        return self.model(self.encoder(batch)).float().cpu().numpy().astype(np.float64)


def _compares(preset: str) -> bool:
    """Whether models of `preset` (training.models.PRESETS) play as DeepChess's comparison player."""
    from training.models import PRESETS

    return PRESETS[preset].kind == "siamese"


def max_depth_of(model: str) -> int | None:
    """The deepest search model asset `model`'s evaluator plays at, from the catalog (no checkpoint
    loaded): 1 for DeepChess's comparison player (its scores order the positions of one call
    only), None (any depth) for the rest."""
    from training.catalog import MODELS

    if _compares(MODELS[model].model):
        from training.deepchess import ComparisonEvaluator

        return ComparisonEvaluator.max_depth
    return None


def load_evaluator(checkpoint: Path | str, name: str = "", device: str = "cpu", threads: int = 1):
    """The evaluator a checkpoint plays with: a NetworkEvaluator, or for a DeepChess comparator
    the 1-ply comparison player (training.deepchess.ComparisonEvaluator, max_depth 1)."""
    ck = load_checkpoint(checkpoint)  # a file or an S3 store's object
    if _compares(ck["config"]["model"]):
        from training.deepchess import ComparisonEvaluator

        return ComparisonEvaluator(checkpoint, name, device, threads)
    return NetworkEvaluator(checkpoint, name, device, threads)
