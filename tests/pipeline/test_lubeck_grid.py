"""Lubeck's grid (pipeline/play/lubeck_grid.py): the cells, the node budgets that scale the time per
move, both players in the same search, the start-position classes, the score and Elo figures.
The Stockfish half (start positions checked by a direct engine call, the asset end to end) is in
tests/assets/test_lubeck_grid_asset.py."""

import math

import chess
import numpy as np
import pytest

from pipeline.play.lubeck_grid import (
    Cell,
    CellResult,
    GridConfig,
    GridResult,
    StartPosition,
    Task,
    cell_result,
    classify,
    elo_difference,
    grid_cells,
    node_budget,
    play_task,
    play_tasks,
)
from pipeline.play.search import AlphaBeta, MaterialEvaluator

MIDDLEGAME = "r1bq1rk1/pp2bppp/2n1pn2/3p4/2PP4/2N1PN2/PP3PPP/R2QKB1R w KQ - 0 9"
MOST_LEGAL_MOVES = 218
"""The most legal moves of any chess position: the most a frontier node adds past the budget check."""


class MaterialTwin(MaterialEvaluator):
    """The traditional evaluation under another name: a 'network' that searches exactly as it."""

    name = "twin"


def _start(kind: str = "quiet", fen: str = MIDDLEGAME) -> StartPosition:
    return StartPosition(kind, f"{kind}.01", fen, 0, 0)


def test_default_grid_is_lubecks_and_has_a_cell_per_depth_time_and_start_kind():
    cfg = GridConfig()
    assert cfg.depths == (2, 4, 6) and cfg.seconds == (1.0, 2.0, 5.0) and cfg.kinds == ("quiet", "tactical")
    cells = grid_cells(cfg)
    assert len(cells) == len(set(cells)) == 18
    assert {(c.kind, c.depth, c.seconds) for c in cells} == {
        (k, d, t) for k in ("quiet", "tactical") for d in (2, 4, 6) for t in (1.0, 2.0, 5.0)
    }


@pytest.mark.parametrize(
    "change, words",
    [
        ({"kinds": ("calm",)}, "one or more of quiet, tactical"),
        ({"depths": (0, 2)}, "depths"),
        ({"seconds": ()}, "seconds"),
        ({"time_scale": 0.0}, "time_scale"),
        ({"quiet_max_gap_cp": 200}, "cannot be both"),
        ({"probe_depth": 0}, r"probe_depth must be at least 1, got 0"),
        ({"adjudicate_depth": 0}, r"adjudicate_depth must be at least 1, got 0"),
        ({"calibration_depth": -1}, r"calibration_depth must be at least 1, got -1"),
        ({"max_eval_cp": 0}, r"max_eval_cp must be at least 1, got 0"),
        ({"quiescence": -1}, r"quiescence must be 0 \(none\) or plies of captures, got -1"),
        ({"name": "round 3"}, r"name must be letters, digits, '\.', '_' or '-' \(it names a file\), got 'round 3'"),
        ({"name": "../report"}, r"name must be letters"),
        ({"name": "material_pst"}, r"name must not be material_pst, the traditional evaluation's"),
    ],
)
def test_bad_settings_are_refused_naming_the_valid_values(change, words):
    with pytest.raises(ValueError, match=words):
        GridConfig(**change)


def test_start_kinds_follow_the_gap_between_static_eval_and_search():
    cfg = GridConfig(quiet_max_gap_cp=25, tactical_min_gap_cp=150, max_eval_cp=200)
    assert classify(10, 30, cfg) == "quiet"  # gap 20
    assert classify(-40, -15, cfg) == "quiet"  # gap 25: at the bound
    assert classify(300, 120, cfg) == "tactical"  # gap 180
    assert classify(-190, -40, cfg) == "tactical"  # gap 150: at the bound
    assert classify(100, 30, cfg) is None  # gap 70: neither
    assert classify(600, 250, cfg) is None  # the search says one side is winning: no contest
    assert classify(None, 0, cfg) is None  # in check: no static evaluation
    assert classify(0, None, cfg) is None  # a mate: no centipawns


def test_time_scaling_gives_each_evaluator_the_nodes_its_speed_buys():
    # 2 s of Lubeck's clock at time_scale 0.05 is 0.1 s here: 100 nodes at 1,000 nodes/s.
    assert node_budget(2.0, 1000.0, 0.05) == 100
    assert node_budget(5.0, 300.0, 0.05) == 75
    assert node_budget(1.0, 1.0, 0.01) == 1  # never zero


def test_a_node_budget_bounds_the_search_and_is_reproducible():
    board = chess.Board(MIDDLEGAME)
    a = AlphaBeta(MaterialEvaluator(), nodes=1000, max_depth=6).search(board)
    b = AlphaBeta(MaterialEvaluator(), nodes=1000, max_depth=6).search(board)
    assert (a.move, a.nodes, a.depth) == (b.move, b.nodes, b.depth)
    assert 500 < a.nodes <= 1000 + 1 + MOST_LEGAL_MOVES
    # Unbounded, depth 3 alone takes more than 1,000 nodes here: the budget stopped it short.
    full = AlphaBeta(MaterialEvaluator(), depth=3).search(board)
    assert full.nodes > 1000 + 1 + MOST_LEGAL_MOVES and a.depth < 3
    # A budget the depth cap reaches first: the search is the fixed-depth one.
    capped = AlphaBeta(MaterialEvaluator(), nodes=10**9, max_depth=2).search(board)
    fixed = AlphaBeta(MaterialEvaluator(), depth=2).search(board)
    assert (capped.move, capped.depth, capped.nodes) == (fixed.move, 2, fixed.nodes)


def test_both_players_use_the_same_search():
    """With the traditional evaluation on both sides under two names and equal budgets, the two
    games of a start position (colours swapped) are the same game, search for search."""
    task = Task(Cell("quiet", 3, 1.0), _start(), 600, 600, 10, "twin")
    r = play_task(task, MaterialTwin())
    g1, g2 = r.games
    assert g1.white.startswith("twin") and g2.white.startswith("material_pst")
    assert [m.uci() for m in g1.game.mainline_moves()] == [m.uci() for m in g2.game.mainline_moves()]
    assert r.network[0] == r.material[1] and r.material[0] == r.network[1]  # (depth, nodes) per search
    assert len(r.network[0]) == 5 and all(n <= 600 + 1 + MOST_LEGAL_MOVES for _, n in r.network[0])


@pytest.mark.parametrize("quiescence", [0, 1])
def test_a_capture_search_is_given_to_both_players(quiescence):
    """Qxd5 wins a pawn at face value and loses the queen to c6xd5: at depth 1, both players grab
    it without a capture search and neither does with one ply of it."""
    start = _start(fen="4k3/8/2p5/3p4/8/8/8/3QK3 w - - 0 1")
    r = play_task(Task(Cell("quiet", 1, 1.0), start, 10**6, 10**6, 1, "twin", quiescence), MaterialTwin())
    firsts = [next(iter(g.game.mainline_moves())).uci() for g in r.games]
    assert [g.white.split()[0] for g in r.games] == ["twin", "material_pst"]
    assert firsts == (["d1d5", "d1d5"] if quiescence == 0 else [firsts[0], firsts[0]])
    assert quiescence == 0 or firsts[0] != "d1d5"


def test_the_slower_evaluator_gets_the_smaller_budget_in_its_games():
    """Budgets from nodes/s: a 'network' measured at a third of the traditional search's speed
    searches a third of its nodes; every search stays inside its own budget."""
    cfg = GridConfig(time_scale=0.01)
    net_nodes = node_budget(2.0, 30_000 / 3, cfg.time_scale)
    mat_nodes = node_budget(2.0, 30_000, cfg.time_scale)
    assert (net_nodes, mat_nodes) == (200, 600)
    r = play_task(Task(Cell("quiet", 6, 2.0), _start(), net_nodes, mat_nodes, 8, "twin"), MaterialTwin())
    net = [n for game in r.network for _, n in game]
    mat = [n for game in r.material for _, n in game]
    assert max(net) <= net_nodes + 1 + MOST_LEGAL_MOVES and max(mat) <= mat_nodes + 1 + MOST_LEGAL_MOVES
    assert sum(mat) / len(mat) > 1.5 * sum(net) / len(net)
    assert r.depths("material") and sum(r.depths("material")) / len(r.depths("material")) >= sum(
        r.depths("network")
    ) / len(r.depths("network"))


def test_cell_scores_and_elo_with_intervals():
    results = play_tasks([Task(Cell("quiet", 1, 1.0), _start(), 10**6, 10**6, 6, "twin")], MaterialTwin, workers=1)
    games = results[0].games
    for g, res in zip(games, ("1-0", "1-0")):  # the network wins as White, loses as Black
        g.result = res
    c = cell_result(Cell("quiet", 1, 1.0), results, "twin")
    assert (c.games, c.wins, c.draws, c.losses, c.score) == (2, 1, 0, 1, 0.5)
    assert c.elo == 0.0 and c.score_low < 0.5 < c.score_high and c.elo_low < 0 < c.elo_high
    assert elo_difference(0.75) == pytest.approx(190.85, abs=0.01)
    assert elo_difference(1.0) == math.inf and elo_difference(0.0) == -math.inf
    assert math.isclose(elo_difference(0.25), -elo_difference(0.75))


def _cell(kind: str, seconds: float, points: list[float], starts: list[str]) -> CellResult:
    w, d, lost = (sum(x == v for x in points) for v in (1.0, 0.5, 0.0))
    return CellResult(
        Cell(kind, 2, seconds),
        len(points),
        w,
        d,
        lost,
        0,
        sum(points) / len(points),
        0,
        1,
        0,
        0,
        0,
        1,
        1,
        1,
        1,
        1,
        sorted(set(starts)),
        points,
        starts,
    )


def test_the_report_pools_each_time_a_move_and_every_game_clustered_by_start_position():
    """Pooled over kinds and caps: the score is the games' mean, the counts add up, and the
    interval resamples start positions (a start's games in every cell move together)."""
    cells = [
        _cell("quiet", 1.0, [1.0, 0.5, 0.0, 1.0], ["q1", "q1", "q2", "q2"]),
        _cell("tactical", 1.0, [1.0, 1.0, 0.5, 1.0], ["t1", "t1", "t2", "t2"]),
        _cell("quiet", 2.0, [0.0, 0.0, 0.5, 0.5], ["q1", "q1", "q2", "q2"]),
    ]
    cfg = GridConfig(depths=(2,), seconds=(1.0, 2.0))
    grid = GridResult("net", cells, {}, {}, False, cfg, [], 1.0)
    one, two, every = grid.pooled()
    assert (one.label, one.games, one.wins, one.draws, one.losses, one.score) == ("1 s/move", 8, 5, 2, 1, 6 / 8)
    assert (two.games, two.score) == (4, 0.25) and (every.games, every.score) == (12, 7 / 12)
    # two clusters' mean scores: q1 (1, .5, 0, 0) and q2 (0, 1, .5, .5) pool with t1, t2 across cells
    by_start = {"q1": [1.0, 0.5, 0.0, 0.0], "q2": [0.0, 1.0, 0.5, 0.5], "t1": [1.0, 1.0], "t2": [0.5, 1.0]}
    assert every.score_low < 7 / 12 < every.score_high
    assert every.score_low >= min(np.mean(v) for v in by_start.values())
    assert "| all | 12 | 5 4 3 | 0.583 (" in grid.report_md()
    assert GridResult("net", cells[:1], {}, {}, False, GridConfig(seconds=(1.0,)), [], 1.0).pooled_md().count("\n") == 2


@pytest.mark.parametrize("quiescence", [0, 2])
def test_a_grid_says_in_its_results_and_report_whether_captures_were_resolved(quiescence):
    cfg = GridConfig(depths=(1,), seconds=(1.0,), kinds=("quiet",), positions=1, quiescence=quiescence)
    task = Task(Cell("quiet", 1, 1.0), _start(), 10**6, 10**6, 2, "twin", quiescence)
    results = play_tasks([task], MaterialTwin, workers=1)
    games = [g for r in results for g in r.games]
    for g in games:  # unfinished after 2 plies: adjudicated, as run_grid would
        g.result = "1/2-1/2"
    games[0].result = "1-0"  # the first game's White is the challenger ("twin")
    assert games[0].white.startswith("twin") and games[1].black.startswith("twin")
    for g in games:  # the PGN headers name the capture search too
        assert all(name.endswith(f"captures {quiescence}") == bool(quiescence) for name in (g.white, g.black))
    assert cell_result(task.cell, results, "twin").score == 0.75
    grid = GridResult(
        "twin", [cell_result(task.cell, results, "twin")], {"quiet": [task.start]}, {}, False, cfg, games, 1.0
    )
    rows = grid.rows("twin")
    suites = {r[1] for r in rows}
    if quiescence:
        assert suites == {"lubeck_grid/quiet/depth1/1s/captures2"}
        assert "then up to 2 plies of captures" in rows[0][5]
        assert "then resolve up to 2 plies of captures beyond it" in grid.report_md()
    else:
        assert suites == {"lubeck_grid/quiet/depth1/1s"}
        assert "captures" not in rows[0][5]
        assert "a leaf at its face value (no capture search)" in grid.report_md()


@pytest.mark.slow
def test_results_do_not_depend_on_the_number_of_processes():
    """Each task starts fresh players: two processes play the same games as one. (Slow tier:
    starting the two processes costs seconds.)"""
    tasks = [
        Task(Cell(kind, 2, 1.0), _start(kind, fen), 300, 600, 4, "twin")
        for kind, fen in (
            ("quiet", MIDDLEGAME),
            ("tactical", "r1b1r1k1/2q2ppp/2p2n2/p2pN3/P2Q4/6N1/1PP2PPP/R1B2RK1 b - - 0 15"),
        )
    ]
    one = play_tasks(tasks, MaterialTwin, workers=1)
    two = play_tasks(tasks, MaterialTwin, workers=2)
    for a, b in zip(one, two, strict=True):
        assert a.task == b.task
        assert [str(g.game.mainline_moves()) for g in a.games] == [str(g.game.mainline_moves()) for g in b.games]
        assert (a.network, a.material) == (b.network, b.material)


def test_grid_chart_has_a_panel_per_start_kind_and_a_series_per_depth():
    from pipeline.plots import lubeck_grid_figure, lubeck_grid_png

    cells = [(k, d, t, 0.5, 0.2, 0.8) for k in ("quiet", "tactical") for d in (2, 4, 6) for t in (1.0, 2.0, 5.0)]
    fig = lubeck_grid_figure(cells, "grid")
    assert [ax.get_title() for ax in fig.axes] == ["quiet starts", "tactical starts"]
    assert all(len(ax.containers) == 3 for ax in fig.axes)  # one error-bar series per depth
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["1", "2", "5"]
    assert lubeck_grid_png(cells, "grid")[:4] == b"\x89PNG"
