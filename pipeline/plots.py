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
from functools import cache
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.text import Text
    from matplotlib.ticker import MaxNLocator

DPI = 90


@cache
def _pyplot():
    """matplotlib.pyplot on the Agg backend, imported on the first chart: importing this module
    stays cheap (the Dagster definitions and the CLI import it; matplotlib costs ~0.5 s)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _integer_ticks() -> MaxNLocator:
    """A tick locator on whole numbers (counts, epochs, generations), even for one value."""
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True, min_n_ticks=1)


def _figure(width: float, height: float) -> tuple[Figure, Axes]:
    fig, ax = _pyplot().subplots(figsize=(width, height), dpi=DPI, layout="constrained")
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
    _pyplot().close(fig)
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
    ax.yaxis.set_major_locator(_integer_ticks())  # counts
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


def games_charts(games_files: list, key: str) -> dict[str, bytes | int]:
    """Charts of a games partition (its part files: local files or objects of an S3 store): game
    lengths (PNG), the players' ratings (PNG, one count per distinct player), and how many
    distinct players and rated players (by name) it holds."""
    from pipeline.store.storage import read_table

    games = read_table(games_files, ["game_index", "ply_count", "white", "black", "white_elo", "black_elo"])
    if games is None or not games.num_rows:
        return {}
    games = games.sort_by("game_index")
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
    ax.xaxis.set_major_locator(_integer_ticks())  # whole epochs, even just one
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


def piece_values_figure(by_phase: dict[str, dict[str, float]], published: dict[str, float], title: str) -> Figure:
    phases = list(by_phase)
    pieces = [p for p in ("knight", "bishop", "rook", "queen", "king") if any(p in by_phase[ph] for ph in phases)]
    fig, ax = _figure(6.4, 3.6)
    x = np.arange(len(phases))
    for piece in pieces:
        ax.plot(x, [by_phase[ph].get(piece, np.nan) for ph in phases], "o-", label=piece)
    for v in published.values():
        ax.axhline(v, color="grey", lw=0.6, ls=":")
    ax.set_xticks(x, phases)
    ax.set_ylabel("average value (pawn = 1 over all phases)")
    ax.set_title(title)
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=max(len(handles), 1), fontsize=8)
    fit_texts(fig)
    return fig


def piece_values_png(by_phase: dict[str, dict[str, float]], published: dict[str, float], title: str) -> bytes:
    """Average learned value of each piece type per game phase, pawn = 1 within the phase; the
    published values as dotted lines."""
    return _png(piece_values_figure(by_phase, published, title))


def pretrain_curves_figure(pretrain: list[dict], history: list[dict], baseline: float | None, title: str) -> Figure:
    fig, (ax1, ax2) = _pyplot().subplots(1, 2, figsize=(9.6, 3.6), layout="constrained")
    for layer in sorted({r["layer"] for r in pretrain}):
        rows = [r for r in pretrain if r["layer"] == layer]
        ax1.plot([r["epoch"] for r in rows], [r["train_loss"] for r in rows], "o-", label=f"layer {layer}")
    ax1.set_xlabel("epoch of the layer")
    ax1.set_ylabel("reconstruction BCE")
    ax1.set_title("layer-wise pretraining")
    ax1.xaxis.set_major_locator(_integer_ticks())
    if pretrain:
        ax1.legend(fontsize=7)
    epochs = [h["epoch"] for h in history]
    ax2.plot(epochs, [h["train_loss"] for h in history], "o-", label="train loss")
    ax2.plot(epochs, [h["val_loss"] for h in history], "o-", label="val loss")
    ax2.set_xlabel("epoch")
    ax2.set_ylabel("loss")
    ax2.xaxis.set_major_locator(_integer_ticks())
    acc = ax2.twinx()
    acc.plot(epochs, [h.get("val_accuracy") for h in history], "s--", color="#2a7", label="val accuracy")
    acc.axhline(0.5, color="grey", lw=0.8, ls=":", label="chance")
    if baseline is not None:
        acc.axhline(baseline, color="#c33", lw=1, ls="--", label="material baseline (val)")
    acc.set_ylabel("pair accuracy")
    acc.set_ylim(0.4, 1.0)
    h1, l1 = ax2.get_legend_handles_labels()
    h2, l2 = acc.get_legend_handles_labels()
    ax2.legend(h1 + h2, l1 + l2, fontsize=7, loc="lower left")
    ax2.set_title("fine-tuning on pairs")
    fig.suptitle(title)
    return fig


def pretrain_curves_png(pretrain: list[dict], history: list[dict], baseline: float | None, title: str) -> bytes:
    """Left: each layer's reconstruction loss during layer-wise pretraining; right: the
    supervised epochs' losses and val accuracy, with chance (0.5) and a baseline's accuracy as
    lines, so a run stuck at chance or below its baseline shows at a glance."""
    return _png(pretrain_curves_figure(pretrain, history, baseline, title))


def selfplay_curve_figure(history: list[dict], title: str) -> Figure:
    """Per generation: the win ratio against the random mover (with its 95% interval) and the
    mean squared TD error on a second axis."""
    fig, ax = _figure(6.4, 3.4)
    gens = [h["generation"] for h in history]
    measured = [h for h in history if h.get("win_ratio") is not None]
    if measured:
        x = [h["generation"] for h in measured]
        y = [h["win_ratio"] for h in measured]
        lo = [h["win_ratio"] - h["win_interval"][0] for h in measured]
        hi = [h["win_interval"][1] - h["win_ratio"] for h in measured]
        ax.errorbar(x, y, yerr=[lo, hi], fmt="o-", capsize=3, label="win ratio vs random (95%)")
    ax.set_ylim(0, 1)
    ax.set_xlabel("generation")
    ax.set_ylabel("win ratio vs random")
    ax.xaxis.set_major_locator(_integer_ticks())
    ax2 = ax.twinx()
    ax2.plot(gens, [h["td_error"] for h in history], "s--", color="#c60", label="TD error (mean d^2)")
    ax2.set_ylabel("TD error")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.set_title(title)
    fig.legend(h1 + h2, l1 + l2, loc="outside lower center", ncols=2, fontsize=8)
    return fig


def selfplay_curve_png(history: list[dict], title: str) -> bytes:
    """The self-play learning curve (selfplay_curve_figure) as PNG bytes."""
    return _png(selfplay_curve_figure(history, title))


def lubeck_grid_figure(cells: Sequence[tuple[str, int, float, float, float, float]], title: str) -> Figure:
    """cells: (start kind, depth, seconds a move, score, score low, score high)."""
    kinds = list(dict.fromkeys(c[0] for c in cells))
    seconds = sorted({c[2] for c in cells})
    depths = sorted({c[1] for c in cells})
    fig, axes = _pyplot().subplots(1, len(kinds), figsize=(3.6 * len(kinds) + 1.6, 3.6), dpi=DPI, layout="constrained")
    axes = np.atleast_1d(axes)
    x = np.arange(len(seconds))
    for ax, kind in zip(axes, kinds):
        for j, depth in enumerate(depths):
            got = {c[2]: c for c in cells if c[0] == kind and c[1] == depth}
            xs = [i + (j - (len(depths) - 1) / 2) * 0.08 for i, s in enumerate(seconds) if s in got]
            pts = [got[s] for s in seconds if s in got]
            ax.errorbar(
                xs,
                [p[3] for p in pts],
                yerr=[[p[3] - p[4] for p in pts], [p[5] - p[3] for p in pts]],
                fmt="o-",
                capsize=3,
                label=f"depth {depth}",
            )
        ax.axhline(0.5, color="grey", lw=0.8, ls="--")
        ax.set_xticks(x, [f"{s:g}" for s in seconds])
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("seconds a move (Lubeck's clock)")
        ax.set_title(f"{kind} starts")
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("network's score (95% CI)")
    axes[-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8)
    fig.suptitle(title)
    return fig


def lubeck_grid_png(cells: Sequence[tuple[str, int, float, float, float, float]], title: str) -> bytes:
    """The network's score against the traditional evaluation per cell of Lubeck's grid: one panel
    per start kind, seconds a move across, a line per search depth."""
    return _png(lubeck_grid_figure(cells, title))
