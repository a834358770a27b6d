"""Engines that lie: wrappers around the real Stockfish that drop, repeat or mangle lines on
chosen searches, run through labels' real entry point; and reproducible labels.

What ends up in the store is checked against independent facts: python-chess's legal
moves in each label's own FEN, and a clean engine's label of the same FEN (labels are
reproducible, so a faulty run's stored labels must be exactly the clean ones)."""

import random
import re
import stat
import sys

import chess
import pytest

from pipeline.ingest.ingest import IngestConfig, ingest_archive
from pipeline.labels.labels import label_store
from pipeline.labels.pool import EnginePool
from pipeline.labels.setting import LabelRun, Setting
from pipeline.labels.shards import coverage, integrity
from pipeline.labels.uci import Evaluation, Job, Limit
from pipeline.store.duck import memory_connection
from pipeline.store.store import Store
from tests.stores import first_games

DEPTH = Limit("depth", 6)

WRAPPER = '''#!{python}
"""Stockfish, with search number n (counted by `bestmove`) mangled: {mode} {when} {n}."""
import re, subprocess, sys
MODE, WHEN, N = {mode!r}, {when!r}, {n}
sf = subprocess.Popen([{stockfish!r}], stdout=subprocess.PIPE)
out = sys.stdout.buffer
search = 1  # the search whose output is being read

def hit():
    return search == N if WHEN == "at" else (search % N == 0 if WHEN == "every" else search >= N)

for line in sf.stdout:
    if hit():
        if line.startswith(b"info") and b" score " in line:
            if MODE == "notanumber":
                line = re.sub(rb" score (cp|mate) -?[0-9]+", b" score cp notanumber", line)
            elif MODE == "cp99999":
                line = re.sub(rb" score (cp|mate) -?[0-9]+", b" score cp 99999", line)
        elif line.startswith(b"bestmove"):
            if MODE == "junk":
                line = b"junk instead of bestmove\\n"
            elif MODE == "zz99":
                line = b"bestmove zz99\\n"
            elif MODE == "twice":
                out.write(line)
    if line.startswith(b"bestmove") or line.startswith(b"junk"):
        search += 1
    out.write(line)
    out.flush()
'''


def wrapper(tmp_path, stockfish, mode, when, n):
    path = tmp_path / f"stockfish-{mode}-{when}-{n}"
    path.write_text(WRAPPER.format(python=sys.executable, stockfish=stockfish, mode=mode, when=when, n=n))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture(scope="module")
def games_pgn(tmp_path_factory, fics_search):
    path = tmp_path_factory.mktemp("pgn") / "real.pgn"
    first_games(fics_search, 3, path)
    return path


@pytest.fixture(scope="module")
def clean(games_pgn, stockfish):
    """A clean engine's label of every distinct position of the games, by FEN."""
    store = Store(games_pgn.parent / "clean").ensure()
    ingest_archive(store, store.add_archive(games_pgn), games_pgn, IngestConfig(workers=1))
    with EnginePool(stockfish, workers=1) as pool:
        stats = label_store(store, pool, LabelRun(limit=DEPTH))
    assert stats.failed == 0 and stats.labelled > 100
    return {r["fen"]: r for r in _rows(store, "labels")}


def _store(tmp_path, games_pgn):
    store = Store(tmp_path / "store").ensure()
    ingest_archive(store, store.add_archive(games_pgn), games_pgn, IngestConfig(workers=1))
    return store


def _rows(store, view):
    with memory_connection(store) as con:
        return con.sql(f"SELECT * FROM {view}").to_arrow_table().to_pylist()


def _assert_labels_are_their_positions(labels, clean):
    """Each stored label is legal in its own FEN and is exactly the clean engine's label."""
    for r in labels:
        board = chess.Board(r["fen"])
        assert chess.Move.from_uci(r["best_move"]) in board.legal_moves, r
        for uci in r["pv"].split():
            move = chess.Move.from_uci(uci)
            assert move in board.legal_moves, r
            board.push(move)
        ref = clean[r["fen"]]
        assert (r["cp"], r["mate"], r["best_move"], r["pv"], r["depth"]) == (
            ref["cp"],
            ref["mate"],
            ref["best_move"],
            ref["pv"],
            ref["depth"],
        ), r["fen"]


@pytest.mark.parametrize("mode", ["junk", "twice"])
def test_a_missing_or_repeated_bestmove_never_moves_a_reply_to_another_position(
    tmp_path, stockfish, games_pgn, clean, mode
):
    """Every 7th search of each engine ends with a junk line instead of `bestmove` (or prints
    `bestmove` twice): that position is tried again, and no reply lands on another one."""
    store = _store(tmp_path, games_pgn)
    # (timeout_s: when the last search in flight has no `bestmove`, no next fence comes; the
    # timeout ends it, and the engine is restarted.)
    with EnginePool(wrapper(tmp_path, stockfish, mode, "every", 7), workers=2, timeout_s=2) as pool:
        stats = label_store(store, pool, LabelRun(limit=DEPTH))
        restarts = pool.restarts
    labels = _rows(store, "labels")
    assert stats.failed == 0 and _rows(store, "label_failures") == []
    assert sorted(r["fen"] for r in labels) == sorted(clean)
    _assert_labels_are_their_positions(labels, clean)
    # A repeated bestmove puts the output out of step: the engine is restarted.
    assert mode == "junk" or restarts >= 1


@pytest.mark.parametrize(
    "mode,reason",
    [
        ("notanumber", r"malformed engine output 'info depth .*score cp notanumber"),
        ("cp99999", r"invalid label: cp -?99999 out of range"),  # White's view: - when Black is to move
        ("zz99", r"invalid label: best move 'zz99' is not a UCI move"),
    ],
)
def test_malformed_or_out_of_range_output_is_a_recorded_failure_not_a_label(
    tmp_path, stockfish, games_pgn, clean, mode, reason
):
    """From its 40th search on, the engine prints `score cp notanumber`, `score cp 99999` or
    `bestmove zz99`: the run goes on, those positions are tried `retries + 1` times and
    recorded in label_failures with the reason, and none becomes a label."""
    store = _store(tmp_path, games_pgn)
    with EnginePool(wrapper(tmp_path, stockfish, mode, "from", 40), workers=1, retries=1) as pool:
        stats = label_store(store, pool, LabelRun(limit=DEPTH))
    labels, failures = _rows(store, "labels"), _rows(store, "label_failures")
    assert len(labels) == stats.labelled == 39
    assert len(failures) == stats.failed == len(clean) - 39
    assert sorted([r["fen"] for r in labels] + [f["fen"] for f in failures]) == sorted(clean)
    assert all(
        re.match(reason, f["reason"]) and f["reason"].endswith("; 2 tries") and f["attempts"] == 2 for f in failures
    ), {f["reason"] for f in failures}
    _assert_labels_are_their_positions(labels, clean)
    assert integrity(store, Setting("Stockfish 15.1", DEPTH))["out_of_range"] == 0


def test_a_bad_search_in_the_middle_is_retried_and_labelled(stockfish, tmp_path, clean):
    """One mangled search (the 5th) with more queued behind it: retried, labelled right."""
    fens = sorted(clean)[:30]
    jobs = [Job(i, f, f.split()[1] == "w") for i, f in enumerate(fens)]
    for mode in ("notanumber", "cp99999", "zz99", "junk"):
        with EnginePool(wrapper(tmp_path, stockfish, mode, "at", 5), workers=1) as pool:
            results = list(pool.run(jobs, DEPTH))
        assert sorted(r.job.id for r in results) == list(range(30))
        assert all(isinstance(r, Evaluation) for r in results), mode
        assert sum(r.attempts == 2 for r in results) == 1, mode
        for r in results:
            assert (r.cp, r.mate, r.best_move, r.pv) == (
                clean[r.job.fen]["cp"],
                clean[r.job.fen]["mate"],
                clean[r.job.fen]["best_move"],
                clean[r.job.fen]["pv"],
            )


def test_labels_do_not_depend_on_order_or_worker_count(stockfish, clean):
    """The default setting is reproducible: the same FENs in three orders, on one engine and
    on two, give identical labels."""
    fens = sorted(clean)
    runs = []
    for order, workers in ((fens, 1), (fens[::-1], 1), (random.Random(7).sample(fens, len(fens)), 2)):
        jobs = [Job(f, f, f.split()[1] == "w") for f in order]
        with EnginePool(stockfish, workers=workers) as pool:
            runs.append({r.job.fen: (r.cp, r.mate, r.best_move, r.pv, r.depth, r.nodes) for r in pool.run(jobs, DEPTH)})
    assert len(runs[0]) == len(fens)
    assert runs[0] == runs[1] == runs[2]


def test_the_hash_kept_mode_is_a_setting_of_its_own(tmp_path, stockfish, games_pgn, clean):
    store = _store(tmp_path, games_pgn)
    with EnginePool(stockfish, workers=1, clear_hash=False) as pool:
        kept = label_store(store, pool, LabelRun(limit=DEPTH))
    with EnginePool(stockfish, workers=1) as pool:
        cleared = label_store(store, pool, LabelRun(limit=DEPTH))
    # The hash-kept labels did not count as the reproducible setting's: both labelled all.
    assert kept.labelled == cleared.labelled == len(clean)
    assert kept.setting == "Stockfish 15.1, depth 6, hash kept" and cleared.setting == "Stockfish 15.1, depth 6"
    dirs = sorted(p.name for p in (store.root / "labels").iterdir() if p.is_dir() and not p.name.startswith("."))
    assert dirs == ["stockfish-15.1_depth-6", "stockfish-15.1_depth-6_hash-kept"]
    by_mode = {}
    for r in _rows(store, "labels"):
        by_mode.setdefault(r["hash_cleared"], []).append(r)
    assert {k: len(v) for k, v in by_mode.items()} == {True: len(clean), False: len(clean)}
    _assert_labels_are_their_positions(by_mode[True], clean)
    for mode in (True, False):
        setting = Setting("Stockfish 15.1", DEPTH, hash_cleared=mode)
        assert coverage(store, setting)["labelled"] == len(clean)
        assert integrity(store, setting)["duplicates"] == 0
    # best_labels never mixes the two: one label per position, the reproducible one.
    best = _rows(store, "best_labels")
    assert len(best) == len(clean) and all(r["hash_cleared"] for r in best)
    with EnginePool(stockfish, workers=1, clear_hash=False) as pool:
        assert label_store(store, pool, LabelRun(limit=DEPTH)).labelled == 0


def test_reproducible_labels_need_one_thread(stockfish):
    with pytest.raises(ValueError, match="threads=2 with clear_hash"):
        EnginePool(stockfish, workers=1, threads=2)
    EnginePool(stockfish, workers=1, threads=2, clear_hash=False)  # allowed: not started


def test_the_reproducible_setting_is_the_default_everywhere(stockfish):
    """The pool, and the Dagster resource the CLI, the labels asset and the nightly re-label
    run all take their engines from."""
    from assets.resources import StockfishResource

    assert EnginePool(stockfish).clear_hash is True
    resource = StockfishResource()
    assert resource.clear_hash is True and resource.make_pool().clear_hash is True


STATIC_WRAPPER = '''#!{python}
"""Stockfish, with the `readyok` after every {n}th static evaluation replaced by a junk line."""
import subprocess, sys
sf = subprocess.Popen([{stockfish!r}], stdout=subprocess.PIPE)
out = sys.stdout.buffer
evals = 0
after_eval = False
for line in sf.stdout:
    if line.startswith(b"Final evaluation"):
        evals += 1
        after_eval = True
    elif line.startswith(b"readyok") and after_eval:
        after_eval = False
        if evals % {n} == 0:
            line = b"junk instead of readyok\\n"
    out.write(line)
    out.flush()
'''


def test_a_static_evaluation_never_lands_on_another_position(tmp_path, stockfish, games_pgn):
    """The static eval is fenced too: a missing `readyok` after every 10th evaluation moves no
    figure onto the next position (before the fence, the figures after the first such line all
    landed on the position before theirs)."""
    static = Limit("static")
    reference = _store(tmp_path / "ref", games_pgn)
    with EnginePool(stockfish, workers=1) as pool:
        label_store(reference, pool, LabelRun(limit=static))
    expected = {r["fen"]: r["cp"] for r in _rows(reference, "labels")}
    assert len(expected) > 100
    path = tmp_path / "stockfish-static-junk"
    path.write_text(STATIC_WRAPPER.format(python=sys.executable, stockfish=stockfish, n=10))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    store = _store(tmp_path, games_pgn)
    with EnginePool(str(path), workers=2, timeout_s=5) as pool:
        label_store(store, pool, LabelRun(limit=static))
    got = {r["fen"]: r["cp"] for r in _rows(store, "labels")}
    assert got == expected


EAGER_PERFT_WRAPPER = '''#!{python}
"""Stockfish 15.1 made to answer `go perft` at once, even during a search, as Stockfish 17 does."""
import subprocess, sys, threading
sf = subprocess.Popen([{stockfish!r}], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
lock = threading.Lock()

def pump():
    for line in sf.stdout:
        with lock:
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()

threading.Thread(target=pump, daemon=True).start()
for line in sys.stdin.buffer:
    if line.startswith(b"go perft"):
        with lock:
            sys.stdout.buffer.write(b"Nodes searched: 0\\n\\n")
            sys.stdout.buffer.flush()
        continue
    sf.stdin.write(line)
    sf.stdin.flush()
    if line.startswith(b"quit"):
        break
sf.wait()
'''


def test_the_hash_kept_mode_refuses_an_engine_whose_perft_does_not_wait_for_the_search(tmp_path, stockfish):
    from pipeline.labels.engine import EngineError

    path = tmp_path / "stockfish-eager-perft"
    path.write_text(EAGER_PERFT_WRAPPER.format(python=sys.executable, stockfish=stockfish))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(EngineError, match="answers `go perft` during a search"):
        with EnginePool(str(path), workers=1, clear_hash=False):
            pass
    with EnginePool(str(path), workers=1) as pool:  # the reproducible mode's fence is isready
        results = list(pool.run([Job(0, chess.STARTING_FEN, True)], DEPTH))
    assert isinstance(results[0], Evaluation)
    with EnginePool(stockfish, workers=1, clear_hash=False) as pool:  # 15.1 itself passes the check
        assert isinstance(next(iter(pool.run([Job(0, chess.STARTING_FEN, True)], DEPTH))), Evaluation)
