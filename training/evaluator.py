"""A trained network as a search evaluator: boards in, one score each, side to move's view.

The score is in centipawn-like units whatever the model predicts:
- 3-class win/draw/loss models (Sabatelli's 3 classes, Lubeck's results): 1000 x (P(win) - P(loss));
- 15 and 20 classes: the expected centipawns over the classes' midpoints (beyond-edge classes
  at 100 cp past their edge);
- regression on the linear target: the target mapped back to centipawns;
- regression on centipawns / 100 (the piece-value network): x 100;
- a result in [0, 1] (the piece-value network's second variant): 1000 x (2 x result - 1), the
  3-class scale with the expected result in place of P(win) - P(loss).

Models trained from the side to move's point of view (Sabatelli's datasets by default) see a
Black-to-move position mirrored, as in training; White's-view models (Lubeck's) are negated
for Black.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import chess
import numpy as np
import torch

from pipeline.datasets import DATASETS
from pipeline.search import board_arrays
from training.checkpoints import CP_PER_UNIT, load_checkpoint, load_model, resolve_device, rows_pov
from training.encoders import Batch, get_encoder

WDL_SCALE = 1000.0


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


class NetworkEvaluator:
    """Scores boards with a checkpoint's best model (see the module docstring for the units)."""

    def __init__(self, checkpoint: Path | str, name: str = "", device: str = "cpu", threads: int = 1):
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
        self._values: torch.Tensor | None = None
        self._clip = 0.0
        self._cp_per_unit = 0.0
        self._expected = False
        if getattr(self.model, "output", "linear") == "sigmoid":  # the piece-value net's result variant
            self._expected = True
        elif self.classes == 0 and "clip_cp" not in DATASETS[self.dataset].defaults and self.dataset in CP_PER_UNIT:
            self._cp_per_unit = float(CP_PER_UNIT[self.dataset])
        elif self.classes == 3:
            self._values = torch.tensor([-WDL_SCALE, 0.0, WDL_SCALE], device=self.device)
        elif self.classes in (15, 20):
            self._values = torch.from_numpy(class_midpoints(self.classes)).to(self.device)
        elif self.classes == 0:
            defaults = DATASETS[self.dataset].defaults
            if defaults.get("target_kind", "linear") != "linear" or "clip_cp" not in defaults:
                raise ValueError(f"{self.dataset}: only the linear regression target maps back to centipawns")
            self._clip = float(defaults["clip_cp"])
        else:
            raise ValueError(f"{self.dataset}: {self.classes} classes have no score mapping")

    @torch.no_grad()
    def evaluate(self, boards: Sequence[chess.Board]) -> np.ndarray:
        planes, white, castling = board_arrays(boards)
        white_t = torch.from_numpy(white)
        mirrored = ~white_t if self.pov == "side_to_move" else torch.zeros_like(white_t)
        batch = Batch(torch.from_numpy(planes), white_t, torch.from_numpy(castling), mirrored).to(self.device)
        out = self.model(self.encoder(batch)).float()
        if self._values is not None:
            score = torch.softmax(out, dim=1) @ self._values
        elif self._expected:
            score = (2 * out.squeeze(1) - 1) * WDL_SCALE
        elif self._cp_per_unit:
            score = out.squeeze(1) * self._cp_per_unit
        else:
            score = out.squeeze(1) * (2 * self._clip) - self._clip
        score = score.cpu().numpy().astype(np.float64)
        if self.pov == "white":
            score = np.where(white, score, -score)
        return score


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
