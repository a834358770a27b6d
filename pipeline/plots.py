"""Small PNG charts for asset metadata (matplotlib, no display needed).

Every chart is drawn by a `*_figure` function (tests inspect the figure) and turned into PNG
bytes by its `*_png` twin. Charts say what they count in the title or on the axis, and fit their
frame: constrained layout, titles and axis labels wrapped to the figure's width, legends outside
the plotting area where they could cover the data.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Sequence
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

DPI = 90


def _figure(width: float, height: float) -> tuple[Figure, plt.Axes]:
    fig, ax = plt.subplots(figsize=(width, height), dpi=DPI, layout="constrained")
    return fig, ax


def _texts(fig: Figure) -> list[Text]:
    return [t for ax in fig.axes for t in (ax.title, ax.xaxis.label, ax.yaxis.label) if t.get_text()]


def _vertical(t: Text) -> bool:
    return bool(t.get_rotation() % 180)


def overflows(t: Text, fig: Figure, renderer=None, margin: float = 1.0) -> bool:
    """Whether a text runs past the figure's edge along its own direction (after a draw)."""
    box, frame = t.get_window_extent(renderer or fig.canvas.get_renderer()), fig.bbox
    if _vertical(t):
        return box.y0 < frame.y0 + margin or box.y1 > frame.y1 - margin
    return box.x0 < frame.x0 + margin or box.x1 > frame.x1 - margin


def fit_texts(fig: Figure, tries: int = 12) -> None:
    """Wrap each title and axis label that runs past the figure's edge onto more lines (the
    constrained layout makes room for them), narrower each try; a word too long for a line
    (an archive key) is broken."""
    for _ in range(tries):
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        over = [t for t in _texts(fig) if overflows(t, fig, renderer)]
        if not over:
            return
        for t in over:
            text = t.get_text()
            box = t.get_window_extent(renderer)
            along, room = (box.height, fig.bbox.height) if _vertical(t) else (box.width, fig.bbox.width)
            longest = max(len(line) for line in text.splitlines())
            chars = max(8, min(longest - 1, int(longest * 0.92 * room / max(along, 1.0))))
            t.set_text("\n".join(textwrap.fill(line, chars, break_on_hyphens=False) for line in text.splitlines()))
    fig.canvas.draw()


def _png(fig: Figure) -> bytes:
    fit_texts(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def histogram_figure(
    values: Sequence[float],
    title: str,
    xlabel: str,
    bins: int = 80,
    clip: tuple[float, float] | None = None,
    ylabel: str = "positions",
) -> Figure:
    v = np.asarray(values, dtype=float)
    if clip is not None:
        v = np.clip(v, *clip)
    fig, ax = _figure(6.4, 3.2)
    ax.hist(v, bins=bins, color="#3b6ea5")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))  # counts
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return fig


def histogram_png(
    values: Sequence[float],
    title: str,
    xlabel: str,
    bins: int = 80,
    clip: tuple[float, float] | None = None,
    ylabel: str = "positions",
) -> bytes:
    """A histogram as PNG bytes; values outside `clip` are piled into the end bins; `ylabel`
    names what one count is."""
    return _png(histogram_figure(values, title, xlabel, bins, clip, ylabel))


def player_ratings(
    white: Sequence[str | None],
    black: Sequence[str | None],
    white_elo: Sequence[int | None],
    black_elo: Sequence[int | None],
) -> tuple[int, dict[str, int]]:
    """The distinct players of some games (by name; games in archive order) and each rated
    player's rating in their last rated game. An empty or '?' name is no one in particular and
    is not counted."""
    names: set[str] = set()
    rating: dict[str, int] = {}
    for w, b, we, be in zip(white, black, white_elo, black_elo):
        for name, elo in ((w, we), (b, be)):
            if not name or name == "?":
                continue
            names.add(name)
            if elo is not None:
                rating[name] = int(elo)
    return len(names), rating


def ratings_figure(ratings: Sequence[int], players: int, what: str) -> Figure:
    """A histogram of players' ratings, one count per player, the count in the title."""
    unrated = players - len(ratings)
    title = f"{what}: ratings of {len(ratings):,} players" + (f" ({unrated:,} more unrated)" if unrated else "")
    return histogram_figure(
        ratings,
        title,
        "Elo (each player once, by name: their last rated game)",
        bins=min(60, max(10, len(ratings) // 4)),
        ylabel="players",
    )


def games_charts(games_file: Path | str, key: str) -> dict[str, bytes | int]:
    """Charts of a games partition: game lengths (PNG), the players' ratings (PNG, one count per
    distinct player), and how many distinct players and rated players (by name) it holds."""
    import pyarrow.parquet as pq

    games = pq.read_table(
        games_file, columns=["game_index", "ply_count", "white", "black", "white_elo", "black_elo"]
    ).sort_by("game_index")
    if not games.num_rows:
        return {}
    out: dict[str, bytes | int] = {
        "game_lengths": histogram_png(
            games.column("ply_count").to_numpy(),
            f"{key}: lengths of {games.num_rows:,} games",
            "plies (300 and more in the last bin)",
            bins=60,
            clip=(0, 300),
            ylabel="games",
        )
    }
    players, rating = player_ratings(
        *(games.column(c).to_pylist() for c in ("white", "black", "white_elo", "black_elo"))
    )
    out["players"], out["rated_players"] = players, len(rating)
    if rating:
        out["ratings"] = _png(ratings_figure(list(rating.values()), players, key))
    return out


def class_bars_figure(histograms: dict[str, dict[int, int]], classes: int, title: str) -> Figure:
    fig, ax = _figure(6.4, 3.2)
    names = [s for s in ("train", "val", "test") if s in histograms]
    width = 0.8 / max(1, len(names))
    x = np.arange(classes)
    for i, name in enumerate(names):
        h = histograms[name]
        total = sum(h.values()) or 1
        ax.bar(
            x + i * width,
            [h.get(c, 0) / total for c in range(classes)],
            width,
            label=f"{name} ({sum(h.values()):,} rows)",
        )
    ax.set_xticks(x + width * (len(names) - 1) / 2, [str(c) for c in range(classes)])
    ax.set_xlabel("class")
    ax.set_ylabel("share of the split's rows")
    ax.set_title(title)
    if names:
        fig.legend(loc="outside right upper", fontsize=8)
    return fig


def class_bars_png(histograms: dict[str, dict[int, int]], classes: int, title: str) -> bytes:
    """Share of rows per class, one group of bars per split."""
    return _png(class_bars_figure(histograms, classes, title))


def learning_curves_figure(history: list[dict], title: str) -> Figure:
    fig, ax = _figure(6.4, 3.4)
    epochs = [h["epoch"] for h in history]
    ax.plot(epochs, [h["train_loss"] for h in history], "o-", label="train loss")
    ax.plot(epochs, [h["val_loss"] for h in history], "o-", label="val loss")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))  # whole epochs, even just one
    if epochs:
        ax.set_xlim(min(epochs) - 0.5, max(epochs) + 0.5)
    handles, labels = ax.get_legend_handles_labels()
    if history and history[0].get("val_accuracy") is not None:
        ax2 = ax.twinx()
        ax2.plot(epochs, [h["val_accuracy"] for h in history], "s--", color="#2a7", label="val accuracy")
        ax2.set_ylabel("accuracy")
        h2, l2 = ax2.get_legend_handles_labels()
        handles, labels = handles + h2, labels + l2
    ax.set_title(title)
    fig.legend(handles, labels, loc="outside lower center", ncols=len(handles), fontsize=8)
    return fig


def learning_curves_png(history: list[dict], title: str) -> bytes:
    """Train / val loss per epoch (whole epochs on the axis), and val accuracy on a second axis;
    the legend below the plot."""
    return _png(learning_curves_figure(history, title))


def confusion_figure(matrix: list[list[int]], title: str) -> Figure:
    m = np.asarray(matrix, dtype=float)
    share = m / np.maximum(m.sum(1, keepdims=True), 1)
    n = len(m)
    fig, ax = _figure(2.4 + 0.35 * n, 1.8 + 0.35 * n)
    ax.imshow(share, cmap="Blues", vmin=0, vmax=1)
    if n <= 5:
        for i in range(n):
            for j in range(n):
                ax.text(
                    j,
                    i,
                    f"{int(m[i, j]):,}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white" if share[i, j] > 0.5 else "black",
                )
    ax.set_xticks(range(n))
    ax.set_yticks(range(n))
    ax.set_xlabel("predicted class")
    ax.set_ylabel("true class")
    ax.set_title(f"{title} ({int(m.sum()):,} positions)")
    return fig


def confusion_png(matrix: list[list[int]], title: str) -> bytes:
    """A confusion matrix (rows: true class, columns: predicted), shaded by row share."""
    return _png(confusion_figure(matrix, title))


def kaufman_figure(deltas, title: str) -> Figure:
    fig, ax = _figure(8.0, 3.6)
    x = np.arange(len(deltas))
    ax.bar(x - 0.2, [d.eval_reference / 100 for d in deltas], 0.4, label="after the suite's move", color="#3b6ea5")
    ax.bar(x + 0.2, [d.eval_move / 100 for d in deltas], 0.4, label="after the move played", color="#d08c30")
    ax.set_xticks(x, [str(i + 1) for i in x])
    ax.set_xlabel("position")
    ax.set_ylabel("pawns (mover's view)")
    mean = sum(d.delta for d in deltas) / max(1, len(deltas)) / 100
    ax.set_title(f"{title}\naverage delta {mean:.2f} pawns over {len(deltas)} positions")
    ax.axhline(0, color="black", linewidth=0.5)
    fig.legend(loc="outside lower center", ncols=2, fontsize=8)
    return fig


def kaufman_png(deltas, title: str) -> bytes:
    """Per Kaufman position: the engine's score after the suite's move and after the move
    played (mover's view, pawns), and the delta between them."""
    return _png(kaufman_figure(deltas, title))


def sts_themes_figure(themes_by_depth: dict[int, dict[str, list[int]]], title: str) -> Figure:
    names = sorted({t for themes in themes_by_depth.values() for t in themes})
    fig, ax = _figure(8.0, 1.6 + 0.28 * len(names) * max(1, len(themes_by_depth)) ** 0.5)
    depths = sorted(themes_by_depth)
    width = 0.8 / max(1, len(depths))
    y = np.arange(len(names))
    for i, d in enumerate(depths):
        t = themes_by_depth[d]
        share = [100 * t[n][0] / t[n][1] if n in t and t[n][1] else 0 for n in names]
        ax.barh(y + i * width, share, width, label="1-ply" if d == 1 else f"depth {d}")
    ax.set_yticks(y + width * (len(depths) - 1) / 2, [textwrap.fill(n, 30) for n in names], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("% of the theme's points")
    ax.set_title(title)
    if depths:
        fig.legend(loc="outside right upper", fontsize=8)
    return fig


def sts_themes_png(themes_by_depth: dict[int, dict[str, list[int]]], title: str) -> bytes:
    """STS share of points per theme, one bar per search depth."""
    return _png(sts_themes_figure(themes_by_depth, title))


def elo_figure(fit, title: str) -> Figure:
    order = sorted(fit.ratings, key=lambda p: fit.ratings[p])
    fig, ax = _figure(8.0, 0.3 * len(order) + 1.4)
    y = np.arange(len(order))
    ax.errorbar([fit.ratings[p] for p in order], y, xerr=[fit.errors[p] for p in order], fmt="o", capsize=3)
    ax.set_yticks(y, [textwrap.fill(p, 36, break_on_hyphens=False) for p in order], fontsize=7)
    ax.set_xlabel(f"Elo (anchor: {fit.anchor} = 0; bars: 95%)")
    ax.set_title(f"{title} ({len(order)} players)")
    ax.grid(axis="x", alpha=0.3)
    return fig


def elo_png(fit, title: str) -> bytes:
    """Ratings with 95% error bars, best first (at the top)."""
    return _png(elo_figure(fit, title))
