"""A self-play line killed part-way (kill -9 in a subprocess, after some generations' checkpoints
and archives are on disk) and run again finishes as if never interrupted: the same generation
numbers, the same games in each generation, the same final weights and one archive (one
partition) per generation, as a run that was never killed."""

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import chess.pgn
import numpy as np

from pipeline.store.store import Store
from training.td.checkpoints import load_checkpoint
from training.td.checks import pgn_games
from training.td.config import TDConfig
from training.td.play import play_line

REPO = Path(__file__).resolve().parents[2]
TINY = dict(name="t", depth=1, games=2, max_plies=16, curve_games=0, workers=1, seed=5, generations=3)

KILLED_RUN = textwrap.dedent(
    """
    import os, signal, sys
    from pipeline.store.store import Store
    from training.td.config import TDConfig
    from training.td.play import play_line

    root, settings, kill_after = sys.argv[1], eval(sys.argv[2]), int(sys.argv[3])
    played = 0

    def on_game():
        global played
        played += 1
        if played == kill_after:  # part-way through a generation: killed, nothing cleaned up
            os.kill(os.getpid(), signal.SIGKILL)

    play_line(Store(root).ensure(), TDConfig(**settings), on_game=on_game, log=lambda s: None)
    """
)


def _moves(pgn: str) -> list[str]:
    """Each game's move text (what the search chose), headers aside."""
    return [str(g.mainline_moves()) for g in pgn_games(pgn)]


def _run_killed(root: Path, kill_after: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_RUN, str(root), repr(TINY), str(kill_after)], env=env, cwd=REPO, timeout=300
    )
    assert proc.returncode == -signal.SIGKILL


def test_a_line_killed_part_way_and_run_again_matches_one_never_killed(tmp_path):
    cfg = TDConfig(**TINY)
    whole = play_line(Store(tmp_path / "a").ensure(), cfg, log=lambda s: None)

    b = tmp_path / "b"
    # Killed during generation 2: generation 1's checkpoint and archive are on disk, nothing else.
    _run_killed(b, kill_after=cfg.games + 1)
    line_dir = b / "selfplay" / cfg.name
    assert sorted(p.name for p in line_dir.glob("*.pt")) == ["gen-0001.pt"]
    # Run again as td_selfplay does after a killed run: no materialisation recorded, so no
    # checkpoint from lineage to resume from.
    store = Store(b).ensure()
    again = play_line(store, cfg, log=lambda s: None)

    assert [h["generation"] for h in again.history] == [1, 2, 3]
    assert [p.name for p in again.checkpoints] == ["gen-0001.pt", "gen-0002.pt", "gen-0003.pt"]
    assert [p.name for p in again.archives] == ["gen-0001.pgn", "gen-0002.pgn", "gen-0003.pgn"]
    for ours, theirs in zip(whole.archives, again.archives, strict=True):
        assert _moves(ours.read_text()) == _moves(theirs.read_text())
        assert ours.read_bytes() == theirs.read_bytes()  # same bytes: one archive key each
    assert [h["archive"] for h in whole.history] == [h["archive"] for h in again.history]
    params_a, _, ck_a = load_checkpoint(whole.checkpoints[-1])
    params_b, _, ck_b = load_checkpoint(again.checkpoints[-1])
    assert ck_b["generation"] == ck_a["generation"] == 3
    assert np.array_equal(params_a, params_b)
    # One archive per generation in the store: the re-run added none beside the killed run's.
    selfplay = sorted(k for k in store.find_archives() if k.startswith("selfplay__"))
    assert len(selfplay) == 3, selfplay
    # The games are real games of each generation (Round says which).
    rounds = {chess.pgn.read_game(open(p)).headers["Round"].split(".")[0] for p in again.archives}
    assert rounds == {"1", "2", "3"}

    # Run once more with the same settings: the line is complete, nothing new is played or added.
    third = play_line(store, cfg, log=lambda s: None)
    assert third.generations == [] and [p.name for p in third.checkpoints] == [p.name for p in again.checkpoints]
    assert len([k for k in store.find_archives() if k.startswith("selfplay__")]) == 3


def test_a_generation_played_again_after_a_kill_between_archive_and_checkpoint_is_one_archive(tmp_path):
    # What a kill between writing generation 2's archive and its checkpoint leaves: the archive
    # of generation 2, the checkpoint of generation 1 only.
    cfg = TDConfig(**TINY)
    whole = play_line(Store(tmp_path / "a").ensure(), cfg, log=lambda s: None)
    store = Store(tmp_path / "b").ensure()
    first = play_line(store, TDConfig(**{**TINY, "generations": 2}), log=lambda s: None)
    first.checkpoints[-1].unlink()
    again = play_line(store, cfg, log=lambda s: None)
    assert [g.number for g in again.generations] == [2, 3]
    assert [h["archive"] for h in again.history] == [h["archive"] for h in whole.history]
    assert sorted(p.name for p in (store.archives_dir / "selfplay" / cfg.name).iterdir()) == [
        "gen-0001.pgn",
        "gen-0002.pgn",
        "gen-0003.pgn",
    ]
    assert np.array_equal(load_checkpoint(whole.checkpoints[-1])[0], load_checkpoint(again.checkpoints[-1])[0])
