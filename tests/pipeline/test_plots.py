"""Charts: they count what they say (distinct players by name, checked against python-chess's
headers) and fit their frame (titles and labels inside the figure, whole epochs, legends off the
curves)."""

import io
from types import SimpleNamespace

import chess.pgn
import pytest

from pipeline import plots
from pipeline.ingest.archive import open_archive
from pipeline.play.suites import DeltaCp
from pipeline.store.store import Store
from tests.stores import add_pgn

LONG_KEY = "ficsgamesdb_202201_standard2000_nomovetimes_263567.pgn.zst"


def _drawn(fig):
    """The figure as its PNG is made: texts fitted, then drawn."""
    plots.fit_texts(fig)
    fig.savefig(io.BytesIO(), format="png")
    return fig


def _inside(fig) -> list[str]:
    """Titles and axis labels that run past the figure's edges (any direction)."""
    renderer = fig.canvas.get_renderer()
    frame = fig.bbox
    bad = []
    for ax in fig.axes:
        for t in (ax.title, ax.xaxis.label, ax.yaxis.label):
            if not t.get_text():
                continue
            box = t.get_window_extent(renderer)
            if box.x0 < frame.x0 or box.x1 > frame.x1 or box.y0 < frame.y0 or box.y1 > frame.y1:
                bad.append(t.get_text())
    return bad


def _players_by_python_chess(path) -> tuple[set, set]:
    names, rated = set(), set()
    with open_archive(path) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8")
        while (headers := chess.pgn.read_headers(text)) is not None:
            for side in ("White", "Black"):
                name = headers.get(side, "?")
                if name not in ("", "?"):
                    names.add(name)
                    if headers.get(f"{side}Elo", "").isdigit():
                        rated.add(name)
    return names, rated


def test_ratings_chart_counts_distinct_players(tmp_path, fics_search):
    """Before: the chart counted ratings (two a game: "1,212 of 1,212 players") where the archive
    has 263 distinct players."""
    from pipeline.ingest.ingest import IngestConfig, ingest_archive

    store = Store(tmp_path / "store").ensure()
    key = store.add_archive(fics_search)
    ingest_archive(store, key, fics_search, IngestConfig(workers=1))
    charts = plots.games_charts(store.partition_files("games", key), key)
    names, rated = _players_by_python_chess(fics_search)
    assert charts["players"] == len(names) == 263 and charts["rated_players"] == len(rated)
    assert charts["ratings"].startswith(b"\x89PNG") and charts["game_lengths"].startswith(b"\x89PNG")
    import pyarrow.parquet as pq

    games = pq.read_table(store.partition_file("games", key)).sort_by("game_index")
    players, rating = plots.player_ratings(
        *(games.column(c).to_pylist() for c in ("white", "black", "white_elo", "black_elo"))
    )
    fig = _drawn(plots.ratings_figure(list(rating.values()), players, LONG_KEY))
    ax = fig.axes[0]
    assert f"ratings of {len(rated)} players" in ax.title.get_text().replace("\n", " ")
    assert "by name" in ax.xaxis.label.get_text() and ax.yaxis.label.get_text() == "players"
    # One count per player: the bars add up to the rated players, not to the rating tags.
    assert sum(p.get_height() for p in ax.patches) == len(rated)
    assert not _inside(fig)


def test_each_player_counted_once_with_their_last_rating(tmp_path):
    pgn = "".join(
        f'[Event "g{i}"]\n[White "{w}"]\n[Black "{b}"]\n{we}{be}[Result "*"]\n\n1. e4 *\n\n'
        for i, (w, b, we, be) in enumerate(
            [
                ("anna", "ben", '[WhiteElo "1500"]\n', '[BlackElo "1600"]\n'),
                ("ben", "anna", '[WhiteElo "1610"]\n', '[BlackElo "1490"]\n'),
                ("anna", "carl", '[WhiteElo "1480"]\n', ""),  # carl: never rated
                ("?", "dora", "", '[BlackElo "2000"]\n'),  # '?' is nobody in particular
            ]
        )
    )
    store = Store(tmp_path / "store").ensure()
    key = add_pgn(store, tmp_path, "hand.pgn", pgn)
    import pyarrow.parquet as pq

    games = pq.read_table(store.partition_file("games", key)).sort_by("game_index")
    players, rating = plots.player_ratings(
        *(games.column(c).to_pylist() for c in ("white", "black", "white_elo", "black_elo"))
    )
    assert players == 4 and rating == {"anna": 1480, "ben": 1610, "dora": 2000}
    charts = plots.games_charts(store.partition_files("games", key), key)
    assert (charts["players"], charts["rated_players"]) == (4, 3)
    title = plots.ratings_figure(list(rating.values()), players, key).axes[0].title.get_text()
    assert title == f"{key}: ratings of 3 players (1 more unrated)"


@pytest.mark.parametrize("epochs", [1, 2, 3, 7, 23])
def test_learning_curves_have_whole_epochs_and_the_legend_off_the_curves(epochs):
    """Before: fractional epoch ticks (0.5, 1.5, ...) and the legend drawn over the curves."""
    history = [
        {"epoch": e, "train_loss": 1 / e, "val_loss": 1.2 / e, "val_accuracy": 0.4 + e / 100}
        for e in range(1, epochs + 1)
    ]
    fig = _drawn(plots.learning_curves_figure(history, "cnn_features_3class on sabatelli_3class, features encoder"))
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks
    assert 1 <= min(ticks) and max(ticks) <= epochs
    renderer = fig.canvas.get_renderer()
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["train loss", "val loss", "val accuracy"]
    box = legend.get_window_extent(renderer)
    for a in fig.axes:  # the loss axes and the accuracy twin: the legend overlaps neither
        assert not box.overlaps(a.get_window_extent(renderer))
    assert fig.bbox.contains(box.x0, box.y0) and fig.bbox.contains(box.x1, box.y1)
    assert not _inside(fig)


def _every_chart():
    deltas = [DeltaCp(f"position {i:02d}", "e4", "d4", 50 * i, -40 * i, 90 * i) for i in range(25)]
    themes = {
        d: {
            t: [300 + d, 1000, 100]
            for t in ("Undermine", "Knight Outposts/Centralization/Repositioning", "Advancement of a/b/c pawns")
        }
        for d in (1, 2)
    }
    fit = SimpleNamespace(
        ratings={"random": 0.0, "mlp_bitmap_regression_with_a_long_name depth 2": 900.0},
        errors={"random": 40.0, "mlp_bitmap_regression_with_a_long_name depth 2": 60.0},
        anchor="random",
    )
    long = "stockfish_15.1_depth8_clear_hash_multipv1_threads1_with_a_long_setting_name"
    return {
        "histogram": plots.histogram_figure(range(100), f"{long}: this run's labels", "pawns (White's view)"),
        "game lengths": plots.histogram_figure(
            range(100), f"{LONG_KEY}: lengths of 2,229 games", "plies", ylabel="games"
        ),
        "class bars": plots.class_bars_figure(
            {"train": {0: 5, 1: 3, 2: 2}, "val": {0: 1, 1: 1, 2: 1}}, 3, f"{long} dataset classes"
        ),
        "confusion": plots.confusion_figure([[5, 1, 0], [1, 4, 1], [0, 1, 6]], "cnn_features_3class: test"),
        "kaufman": plots.kaufman_figure(
            deltas, "cnn_features_3class: Kaufman test, depth 2 player, Stockfish depth 16"
        ),
        "sts": plots.sts_themes_figure(themes, "cnn_features_3class: STS by theme"),
        "elo": plots.elo_figure(fit, "Elo from all evaluation games"),
        "learning": plots.learning_curves_figure([{"epoch": 1, "train_loss": 1, "val_loss": 1}], long),
    }


@pytest.mark.slow  # 4 to 5 s idle: the fast tier stays under 2 minutes
def test_every_chart_fits_its_frame():
    """Before: long titles (an archive key, a label setting) ran off the figure's edges."""
    for name, fig in _every_chart().items():
        assert not _inside(_drawn(fig)), name
        renderer = fig.canvas.get_renderer()
        for legend in fig.legends:
            box = legend.get_window_extent(renderer)
            assert fig.bbox.contains(box.x0, box.y0) and fig.bbox.contains(box.x1, box.y1), name
            assert not any(box.overlaps(a.get_window_extent(renderer)) for a in fig.axes), name
        plots._pyplot().close(fig)


def test_a_title_too_long_for_one_line_is_wrapped_not_cut():
    fig = _drawn(
        plots.histogram_figure(
            [1, 2, 3],
            f"{LONG_KEY}: ratings of 238 players (12 more unrated)",
            "Elo (each player once, by name: their last rated game)",
            ylabel="players",
        )
    )
    title = fig.axes[0].title.get_text()
    assert (
        "\n" in title
        and title.replace("\n", " ").replace("  ", " ").split()
        == (f"{LONG_KEY}: ratings of 238 players (12 more unrated)").split()
    )
    assert not _inside(fig)
    plots._pyplot().close(fig)
