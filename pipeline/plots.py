"""Small PNG charts for asset metadata (matplotlib, no display needed)."""

from __future__ import annotations

import io
from collections.abc import Sequence

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def histogram_png(values: Sequence[float], title: str, xlabel: str, bins: int = 80,
                  clip: tuple[float, float] | None = None, ylabel: str = "positions") -> bytes:
    """A histogram as PNG bytes; values outside `clip` are piled into the end bins."""
    v = np.asarray(values, dtype=float)
    if clip is not None:
        v = np.clip(v, *clip)
    fig, ax = plt.subplots(figsize=(6.4, 3.2), dpi=90)
    ax.hist(v, bins=bins, color="#3b6ea5")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return _png(fig)


def class_bars_png(histograms: dict[str, dict[int, int]], classes: int, title: str) -> bytes:
    """Share of rows per class, one group of bars per split."""
    fig, ax = plt.subplots(figsize=(6.4, 3.2), dpi=90)
    names = [s for s in ("train", "val", "test") if s in histograms]
    width = 0.8 / max(1, len(names))
    x = np.arange(classes)
    for i, name in enumerate(names):
        h = histograms[name]
        total = sum(h.values()) or 1
        ax.bar(x + i * width, [h.get(c, 0) / total for c in range(classes)], width, label=name)
    ax.set_xticks(x + width * (len(names) - 1) / 2, [str(c) for c in range(classes)])
    ax.set_xlabel("class")
    ax.set_ylabel("share of rows")
    ax.set_title(title)
    if names:
        ax.legend()
    return _png(fig)


def _png(fig) -> bytes:
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def learning_curves_png(history: list[dict], title: str) -> bytes:
    """Train / val loss per epoch, and val accuracy (or MSE) on a second axis."""
    fig, ax = plt.subplots(figsize=(6.4, 3.2), dpi=90)
    epochs = [h["epoch"] for h in history]
    ax.plot(epochs, [h["train_loss"] for h in history], "o-", label="train loss")
    ax.plot(epochs, [h["val_loss"] for h in history], "o-", label="val loss")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss")
    key = "val_accuracy" if history and history[0].get("val_accuracy") is not None else None
    if key:
        ax2 = ax.twinx()
        ax2.plot(epochs, [h[key] for h in history], "s--", color="#2a7", label="val accuracy")
        ax2.set_ylabel("accuracy")
        ax2.legend(loc="center right")
    ax.legend(loc="upper right")
    ax.set_title(title)
    return _png(fig)


def confusion_png(matrix: list[list[int]], title: str) -> bytes:
    """A confusion matrix (rows: true class, columns: predicted), shaded by row share."""
    m = np.asarray(matrix, dtype=float)
    share = m / np.maximum(m.sum(1, keepdims=True), 1)
    n = len(m)
    fig, ax = plt.subplots(figsize=(1.6 + 0.35 * n, 1.2 + 0.35 * n), dpi=90)
    ax.imshow(share, cmap="Blues", vmin=0, vmax=1)
    if n <= 5:
        for i in range(n):
            for j in range(n):
                ax.text(j, i, f"{int(m[i, j]):,}", ha="center", va="center", fontsize=8,
                        color="white" if share[i, j] > 0.5 else "black")
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(title)
    return _png(fig)


def kaufman_png(deltas, title: str) -> bytes:
    """Per Kaufman position: the engine's score after the suite's move and after the move
    played (mover's view, pawns), and the delta between them."""
    fig, ax = plt.subplots(figsize=(8.0, 3.4), dpi=90)
    x = np.arange(len(deltas))
    ax.bar(x - 0.2, [d.eval_reference / 100 for d in deltas], 0.4, label="after the suite's move", color="#3b6ea5")
    ax.bar(x + 0.2, [d.eval_move / 100 for d in deltas], 0.4, label="after the move played", color="#d08c30")
    ax.set_xticks(x, [str(i + 1) for i in x])
    ax.set_xlabel("position")
    ax.set_ylabel("pawns (mover's view)")
    mean = sum(d.delta for d in deltas) / max(1, len(deltas)) / 100
    ax.set_title(f"{title}\naverage delta {mean:.2f} pawns")
    ax.axhline(0, color="black", linewidth=0.5)
    ax.legend(fontsize=8)
    return _png(fig)


def sts_themes_png(themes_by_depth: dict[int, dict[str, list[int]]], title: str) -> bytes:
    """STS share of points per theme, one bar per search depth."""
    names = sorted({t for themes in themes_by_depth.values() for t in themes})
    fig, ax = plt.subplots(figsize=(8.0, 4.0), dpi=90)
    depths = sorted(themes_by_depth)
    width = 0.8 / max(1, len(depths))
    y = np.arange(len(names))
    for i, d in enumerate(depths):
        t = themes_by_depth[d]
        share = [100 * t[n][0] / t[n][1] if n in t and t[n][1] else 0 for n in names]
        ax.barh(y + i * width, share, width, label="1-ply" if d == 1 else f"depth {d}")
    ax.set_yticks(y + width * (len(depths) - 1) / 2, [n[:40] for n in names], fontsize=7)
    ax.set_xlabel("% of points")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return _png(fig)


def elo_png(fit, title: str) -> bytes:
    """Ratings with 95% error bars, best first."""
    order = sorted(fit.ratings, key=lambda p: fit.ratings[p])
    fig, ax = plt.subplots(figsize=(8.0, 0.3 * len(order) + 1.2), dpi=90)
    y = np.arange(len(order))
    ax.errorbar([fit.ratings[p] for p in order], y, xerr=[fit.errors[p] for p in order], fmt="o", capsize=3)
    ax.set_yticks(y, [p[:48] for p in order], fontsize=7)
    ax.set_xlabel(f"Elo (anchor: {fit.anchor} = 0)")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)
