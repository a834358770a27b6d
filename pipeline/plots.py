"""Small PNG charts for asset metadata (matplotlib, no display needed)."""

from __future__ import annotations

import io
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def histogram_png(values: Sequence[float], title: str, xlabel: str, bins: int = 80,
                  clip: tuple[float, float] | None = None) -> bytes:
    """A histogram as PNG bytes; values outside `clip` are piled into the end bins."""
    import numpy as np

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
    import numpy as np

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
