"""The evaluations TD self-play learns, over the antisymmetric bitboard (384 inputs, negated by a
colour flip): linear, network and residual, plain numpy with hand-written gradients, and
TDEvaluator, a model as the search's evaluator."""

from __future__ import annotations

import math
from collections.abc import Sequence

import chess
import chess.pgn
import numpy as np

from pipeline.play.search import board_arrays
from training.td.config import TDConfig

FEATURES = 384
"""6 piece types x 64 squares (antisymmetric bitboard)."""
SCORE_SCALE = 1000.0
"""The search sees 1000 x V (side to move's view): centipawn-like, far inside EVAL_CLIP."""


def antisymmetric_features(boards: Sequence[chess.Board]) -> np.ndarray:
    """(N, 384) float32: per piece type P N B R Q K and square, +1 for a White piece, -1 for a
    Black piece on the rank-flipped square (a Black pawn on e7 counts at e2)."""
    planes, _, _ = board_arrays(boards)
    bits = np.unpackbits(planes, axis=1, bitorder="little").reshape(-1, 12, 8, 8).astype(np.float32)
    x = bits[:, :6] - bits[:, 6:, ::-1, :]
    return x.reshape(-1, FEATURES)


# Models ---------------------------------------------------------------------------------------


class LinearValue:
    """V(x) = tanh(w . x): piece-square weights, one unit, no bias (antisymmetric)."""

    kind = "linear"

    def __init__(self, params: np.ndarray | None = None):
        self.params = np.zeros(FEATURES, dtype=np.float64) if params is None else np.asarray(params, np.float64)

    def value(self, x: np.ndarray) -> np.ndarray:
        return np.tanh(x @ self.params)

    def grad(self, x: np.ndarray) -> np.ndarray:
        """(N, params): dV/dw of each row."""
        v = self.value(x)
        return (1.0 - v * v)[:, None] * x


class NetworkValue:
    """V(x) = tanh(w2 . tanh(W1 x)): one hidden tanh layer, no biases (antisymmetric)."""

    kind = "network"

    def __init__(self, params: np.ndarray | None = None, hidden: int = 32, seed: int = 0):
        self.hidden = hidden
        if params is None:
            rng = np.random.default_rng(seed)
            w1 = rng.normal(0.0, 1.0 / math.sqrt(FEATURES), size=(hidden, FEATURES))
            w2 = rng.normal(0.0, 1.0 / math.sqrt(hidden), size=hidden)
            params = np.concatenate([w1.ravel(), w2])
        self.params = np.asarray(params, np.float64)
        if self.params.shape != (hidden * FEATURES + hidden,):
            raise ValueError(f"a network with {hidden} hidden units has {hidden * (FEATURES + 1)} weights")

    def _split(self):
        h = self.hidden
        return self.params[: h * FEATURES].reshape(h, FEATURES), self.params[h * FEATURES :]

    def value(self, x: np.ndarray) -> np.ndarray:
        w1, w2 = self._split()
        return np.tanh(np.tanh(x @ w1.T) @ w2)

    def grad(self, x: np.ndarray) -> np.ndarray:
        w1, w2 = self._split()
        h = np.tanh(x @ w1.T)  # (N, H)
        v = np.tanh(h @ w2)
        dv = 1.0 - v * v  # (N,)
        g_w2 = dv[:, None] * h
        g_w1 = (dv[:, None] * w2[None, :] * (1.0 - h * h))[:, :, None] * x[:, None, :]  # (N, H, 384)
        return np.concatenate([g_w1.reshape(len(x), -1), g_w2], axis=1)


class ResidualValue:
    """V(x) = tanh(w . x + w2 . tanh(W1 x)): the linear model plus one hidden tanh layer, no
    biases (antisymmetric). Parameters: w (384), W1 (hidden x 384), w2 (hidden)."""

    kind = "residual"

    def __init__(self, linear: np.ndarray, params: np.ndarray | None = None, hidden: int = 32, seed: int = 0):
        self.hidden = hidden
        if params is None:
            rng = np.random.default_rng(seed)
            w1 = rng.normal(0.0, 1.0 / math.sqrt(FEATURES), size=(hidden, FEATURES))
            params = np.concatenate([np.asarray(linear, np.float64), w1.ravel(), np.zeros(hidden)])
        self.params = np.asarray(params, np.float64)
        if self.params.shape != (FEATURES + hidden * FEATURES + hidden,):
            raise ValueError(
                f"a residual model with {hidden} hidden units has {(hidden + 1) * FEATURES + hidden} weights"
            )

    def _split(self):
        h, n = self.hidden, FEATURES
        return self.params[:n], self.params[n : n + h * n].reshape(h, n), self.params[n + h * n :]

    def value(self, x: np.ndarray) -> np.ndarray:
        w, w1, w2 = self._split()
        return np.tanh(x @ w + np.tanh(x @ w1.T) @ w2)

    def grad(self, x: np.ndarray) -> np.ndarray:
        w, w1, w2 = self._split()
        h = np.tanh(x @ w1.T)  # (N, H)
        v = np.tanh(x @ w + h @ w2)
        dv = (1.0 - v * v)[:, None]
        g_w1 = (dv * w2[None, :] * (1.0 - h * h))[:, :, None] * x[:, None, :]  # (N, H, 384)
        return np.concatenate([dv * x, g_w1.reshape(len(x), -1), dv * h], axis=1)


MATERIAL_PAWNS = (1.0, 3.0, 3.0, 5.0, 9.0, 0.0)
"""P N B R Q K in pawns: the linear model's `material` start (x 0.1 per pawn)."""


def linear_init(cfg: TDConfig) -> np.ndarray:
    """The linear model's first weights (TDConfig.init)."""
    if cfg.init == "material":
        return np.repeat(np.array(MATERIAL_PAWNS) * 0.1, 64)
    if cfg.init == "random":
        return np.random.default_rng(cfg.seed).normal(0.0, 0.01, FEATURES)
    return np.zeros(FEATURES)


def make_model(cfg: TDConfig, params: np.ndarray | None = None):
    if cfg.model == "linear":
        return LinearValue(linear_init(cfg) if params is None else params)
    if cfg.model == "residual":
        return ResidualValue(linear_init(cfg) if params is None else None, params, cfg.hidden, cfg.seed)
    return NetworkValue(params, cfg.hidden, cfg.seed)


class TDEvaluator:
    """A model as the search's evaluator: SCORE_SCALE x V, from the side to move's view."""

    def __init__(self, model, name: str = ""):
        self.model = model
        self.name = name or f"td_{model.kind}"

    def evaluate(self, boards: Sequence[chess.Board]) -> np.ndarray:
        v = self.model.value(antisymmetric_features(boards)) * SCORE_SCALE
        white = np.fromiter((b.turn for b in boards), dtype=bool, count=len(boards))
        return np.where(white, v, -v)


def initial_params(cfg: TDConfig) -> np.ndarray:
    return make_model(cfg).params.copy()
