"""Issue 37: every reported figure carries n and a 95% interval (clustered where observations are
not independent): STS points, match scores, Lubeck's grid cells, the report's rows."""

import chess
import chess.pgn
import pytest

from pipeline.play.evaluation import match_rows, report_markdown, score_searched
from pipeline.play.lubeck_grid import score_interval
from pipeline.play.matches import GameResult, MatchResult
from pipeline.play.suites import read_epd
from pipeline.research.intervals import mean_interval
from pipeline.research.published import Figure
from pipeline.research.reproduction import Ours, _cell

STS = (
    '1k6/8/8/8/8/8/8/R6K w - - bm Ra8+; id "STS(v1.0) Undermine.001"; c0 "Ra8+=10, Ra2=3";\n'
    '1k6/8/8/8/8/8/8/R6K w - - bm Ra8+; id "STS(v1.0) Undermine.002"; c0 "Ra8+=10, Ra2=3";\n'
    '1k6/8/8/8/8/8/8/R6K w - - bm Ra8+; id "STS(v1.0) Recapturing.001"; c0 "Ra8+=10, Ra2=3";\n'
)


def test_sts_points_come_with_n_and_an_interval_per_theme_and_in_total(tmp_path):
    path = tmp_path / "sts.epd"
    path.write_text(STS)
    positions = read_epd(path).positions
    moves = [chess.Move.from_uci(m) for m in ("a1a8", "a1a2", "a1a8")]  # 10 + 3 + 10 points
    _, rows = score_searched("sts", positions, {1: moves}, None, None, log=lambda _: None)
    got = {(s, m): (v, n, d) for s, m, v, n, d in rows}
    assert got[("sts", "points_1ply")][:2] == (23, 3)
    # the bootstrap's total resamples 3 positions of 10, 3, 10: it lies between 9 and 30 and holds 23
    low, high = got[("sts", "points_1ply_low95")][0], got[("sts", "points_1ply_high95")][0]
    assert 9 <= low < 23 < high <= 30 and got[("sts", "points_1ply_low95")][1] == 3
    assert "(95%: " in got[("sts", "points_1ply")][2] and "n = 3)" in got[("sts", "points_1ply")][2]
    # one theme: Recapturing's single position of 10 points has no spread
    assert got[("sts/Recapturing", "points_1ply_low95")][0] == got[("sts/Recapturing", "points_1ply_high95")][0] == 10
    assert got[("sts/Undermine", "points_1ply")][:2] == (13, 2)


def _game(white, black, result, opening):
    return GameResult(white, black, result, "", 10, opening, chess.pgn.Game())


def test_a_small_match_says_it_is_indicative_and_clusters_its_interval_by_opening():
    """8 games from 4 openings, each opening won with White and lost with Black: the score is
    0.5 for certain once the opening's two games are one unit (games resampled alone would not say so)."""
    games = []
    for i in range(4):
        games += [_game("net", "sf", "1-0", f"o{i}"), _game("sf", "net", "1-0", f"o{i}")]
    m = MatchResult("net vs sf", "net", "sf", games)
    got = {k: (v, n, d) for _, k, v, n, d in match_rows(m, "stockfish")}
    assert got["score"][:2] == (0.5, 8) and "n = 8 games: indicative only" in got["score"][2]
    assert got["score_low95"][0] == got["score_high95"][0] == 0.5
    assert got["win_ratio"][0] == got["win_ratio_low95"][0] == got["win_ratio_high95"][0] == 0.5


def test_a_grid_cells_interval_resamples_start_positions_not_games():
    points = [1.0, 0.0] * 6  # every start position: won with one colour, lost with the other
    starts = [f"s{i // 2}" for i in range(12)]
    assert score_interval(points, starts) == (0.5, 0.5)
    games_alone = mean_interval(points)  # what resampling the 12 games would claim
    assert games_alone.low < 0.4 and games_alone.high > 0.6
    assert score_interval([], []) == (0.0, 1.0)
    assert score_interval([1.0, 1.0], ["s0", "s0"]) == (0.0, 1.0)  # one start position: no spread to measure


def test_the_report_row_shows_the_figure_its_interval_and_n():
    f = Figure("Low 2021", "bucket A", 0.6937, "share", "108,780 pairs", "", "deepchess_net",
               "evaluation_results", "deepchess_pairs", "A_even_even")  # fmt: skip
    value, n = _cell(Ours(0.72, 210, (0.6547, 0.7790)), f)
    assert value == "72.00% (95%: 65.47%-77.90%, n = 210)" and n == "210"
    assert _cell(Ours(0.72, 210), f) == ("72.00%", "210")  # no interval: the n column says n
    assert _cell(Ours(0.72, None), f)[0] == "72.00%"


def test_the_evaluation_report_flags_an_elo_from_few_games_and_hides_the_interval_rows():
    rows = [
        ("elo", "net 1-ply", 120.0, 8, "+/-300 (95%)"),
        ("elo", "random", 0.0, 400, "+/-20 (95%)"),
        ("stockfish", "score", 0.5, 8, "4 won"),
        ("stockfish", "score_low95", 0.3, 8, "95% interval"),
    ]
    text = report_markdown("net", rows, [])
    assert "| net 1-ply | 120 | 8 | +/-300 (95%); n = 8 games: indicative only |" in text
    assert "| random | 0 | 400 | +/-20 (95%) |" in text
    assert "score_low95" not in text


@pytest.mark.parametrize("seed", [0, 1])
def test_the_same_seed_gives_the_same_grid_and_match_interval(seed):
    points, starts = [1.0, 0.5, 0.0, 1.0, 0.5, 0.5], ["a", "a", "b", "b", "c", "c"]
    assert mean_interval(points, starts, seed=seed) == mean_interval(points, starts, seed=seed)
