"""scripts/equal_time_suites.py: each side's moves are those of a direct search within its own
node budget (the grid's node_budget of its nodes/s), scored by the suite's points; and its refusals."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.datasets.datasets import SplitConfig, build_dataset
from pipeline.play.lubeck_grid import node_budget
from pipeline.play.search import AlphaBeta, MaterialEvaluator
from pipeline.play.suites import load_epd, score_suite
from tests.stores import first_games, labelled_store
from training.evaluator import load_evaluator
from training.train import TrainConfig, train

pytestmark = pytest.mark.slow  # a script run end to end (a study's or a benchmark's): the full suite's

SCRIPT = Path(__file__).parents[1] / "scripts" / "equal_time_suites.py"
_SPEC = importlib.util.spec_from_file_location("equal_time_suites", SCRIPT)
script = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(script)


def test_each_side_plays_its_own_node_budget_and_the_lead_is_the_difference(tmp_path, stockfish, fics_2022, capsys):
    store = labelled_store(tmp_path, first_games(fics_2022, 24, tmp_path / "src.pgn"), stockfish)
    split = SplitConfig(seed=0, val_fraction=0.2, test_fraction=0.2)
    build_dataset(store, "sabatelli_regression", {"min_elo": 1500, "target_kind": "win_prob"}, split=split)
    r = train(
        TrainConfig(
            store=str(store.root), dataset="sabatelli_regression", model="mlp_search", epochs=2, out=str(tmp_path / "m")
        ),
        log=lambda s: None,
    )
    sts = script.STS
    script.main(
        ["--checkpoint", str(r.checkpoint), "--suite", str(sts), "--max-positions", "12", "--seconds", "2"]
        + ["--material-nps", "9000", "--network-nps", "6000", "--workers", "1"]
    )
    row = capsys.readouterr().out.splitlines()[-1].split(" | ")
    positions = load_epd(sts)[:12]
    budgets = node_budget(2, 6000, 0.05), node_budget(2, 9000, 0.05)
    assert budgets == (600, 900) and row[1] == "600 / 900"
    scores = []
    for evaluator, nodes in zip((load_evaluator(r.checkpoint), MaterialEvaluator()), budgets, strict=True):
        search = AlphaBeta(evaluator, nodes=nodes, max_depth=4, quiescence=4)
        scores.append(score_suite(positions, [search.search(p.board).move for p in positions]))
    for s, cell in zip(scores, row[2:4], strict=True):
        assert cell.startswith(f"{s.points:,} (") and cell.endswith(f"), {s.solved}")
    lead = scores[0].points - scores[1].points
    assert row[4].startswith(f"{lead:+,} (")
    assert row[5].startswith(f"{scores[0].solved - scores[1].solved:+d} (")

    # A suite of best and avoid moves alone (Kaufman's, as Win At Chess): no points, the count each
    # side solved with its interval, and the lead in it.
    kaufman = sts.parent / "kaufman.epd"
    script.main(
        ["--checkpoint", str(r.checkpoint), "--suite", str(kaufman), "--max-positions", "12", "--seconds", "2"]
        + ["--material-nps", "9000", "--network-nps", "6000", "--workers", "1"]
    )
    row = capsys.readouterr().out.splitlines()[-1].split(" | ")
    positions = load_epd(kaufman)[:12]
    solved = []
    for evaluator, nodes in zip((load_evaluator(r.checkpoint), MaterialEvaluator()), budgets, strict=True):
        search = AlphaBeta(evaluator, nodes=nodes, max_depth=4, quiescence=4)
        s = score_suite(positions, [search.search(p.board).move for p in positions])
        assert s.pointed == 0 and s.scored == 12
        solved.append(s.solved)
    for n, cell in zip(solved, row[2:4], strict=True):
        low, high = (int(x) for x in cell.removeprefix(f"-, {n} (").removesuffix(")").split("-"))
        assert 0 <= low <= n <= high <= 12
    assert row[4] == "-" and row[5].startswith(f"{solved[0] - solved[1]:+d} (")


def test_a_missing_suite_or_checkpoint_is_refused_in_one_line(tmp_path):
    for args, says in (
        (["--suite", str(tmp_path / "none.epd"), "--checkpoint", "x"], f"error: no suite at {tmp_path / 'none.epd'}"),
        (
            ["--suite", str(SCRIPT), "--checkpoint", str(tmp_path / "c.pt")],
            f"error: no checkpoint at {tmp_path / 'c.pt'}",
        ),
    ):
        done = subprocess.run(
            [sys.executable, str(SCRIPT), *args, "--material-nps", "1", "--network-nps", "1"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr.strip().startswith(says) and "Traceback" not in done.stderr
