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
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()
