"""Small PNG charts for asset metadata (matplotlib, no display needed)."""

from __future__ import annotations

import io
from collections.abc import Sequence

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def histogram_png(values: Sequence[float], title: str, xlabel: str, bins: int = 80,
                  clip: tuple[float, float] | None = None) -> bytes:
    """A histogram as PNG bytes; values outside `clip` are piled into the end bins."""
    v = np.asarray(values, dtype=float)
    if clip is not None:
        v = np.clip(v, *clip)
    fig, ax = plt.subplots(figsize=(6.4, 3.2), dpi=90)
    ax.hist(v, bins=bins, color="#3b6ea5")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("positions")
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
