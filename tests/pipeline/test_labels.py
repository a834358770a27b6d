"""Labelling the store: once per distinct position, incremental, resumable, parallel-safe."""

import io
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import chess
import chess.pgn
import pytest

from pipeline.ingest.encoding import fen_from_row
from pipeline.ingest.ingest import IngestConfig, ingest_archive
from pipeline.labels.labels import label_store
from pipeline.labels.pool import EnginePool
from pipeline.labels.setting import SHARDS, LabelRun, Setting
from pipeline.labels.shards import coverage, integrity
from pipeline.labels.uci import Limit
from pipeline.store.duck import memory_connection
from pipeline.store.store import Store
from tests.stores import add_pgn, first_games

ROOT = Path(__file__).resolve().parents[2]

# Shared openings and a transposition (game 4 reaches game 1's position after 2...Nc6).
ARCHIVE_A = """[Event "a1"]\n[Result "1/2-1/2"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 1/2-1/2

[Event "a2"]\n[Result "*"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bc4 Bc5 *

[Event "a3"]\n[Result "*"]\n\n1. d4 d5 2. c4 e6 *
"""
# A transposition into archive A, an en-passant position, and a checkmate.
ARCHIVE_B = """[Event "b1"]\n[Result "*"]\n\n1. Nf3 Nc6 2. e4 e5 3. Bb5 Nf6 *

[Event "b2"]\n[Result "*"]\n\n1. e4 d5 2. e5 f5 3. exf6 *

[Event "b3"]\n[Result "0-1"]\n\n1. f3 e5 2. g4 Qh4# 0-1
"""


def _distinct(*pgns):
    """Distinct positions by python-chess (board, side, castling, legal en passant) and how
    many position rows each has."""
    seen = Counter()
    for text in pgns:
        f = io.StringIO(text)
        while (game := chess.pgn.read_game(f)) is not None:
            board = game.board()
            seen[board.epd()] += 1
            for move in game.mainline_moves():
                board.push(move)
                seen[board.epd()] += 1
    return seen


def _labels(store, sql="SELECT * FROM labels"):
    with memory_connection(store) as con:
        return con.sql(sql).to_arrow_table().to_pylist()


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path / "store").ensure()


def test_each_distinct_position_is_labelled_once_and_new_archives_add_only_theirs(store, tmp_path, stockfish):
    add_pgn(store, tmp_path, "a.pgn", ARCHIVE_A)
    expected_a = _distinct(ARCHIVE_A)
    with EnginePool(stockfish, workers=2) as pool:
        first = label_store(store, pool, LabelRun())
        assert first.labelled == len(expected_a) and first.failed == 0
        rows = _labels(store)
        assert sorted(" ".join(r["fen"].split()[:4]) for r in rows) == sorted(expected_a)
        assert {(r["engine"], r["limit_kind"], r["limit_value"]) for r in rows} == {("Stockfish 15.1", "depth", 8)}

        again = label_store(store, pool, LabelRun())
        assert (again.labelled, again.failed, again.parts_written) == (0, 0, 0)

        add_pgn(store, tmp_path, "b.pgn", ARCHIVE_B)
        expected = _distinct(ARCHIVE_A, ARCHIVE_B)
        second = label_store(store, pool, LabelRun())
        assert second.labelled == len(expected) - len(expected_a)

    setting = Setting("Stockfish 15.1", Limit("depth", 8))
    cov = coverage(store, setting)
    assert cov["distinct_positions"] == cov["labelled"] == len(expected)
    assert cov["positions"] == sum(expected.values())
    assert integrity(store, setting)["duplicates"] == 0
    # Every position row finds its label, and the label is of that very position.
    lp = _labels(store, "SELECT planes, side_to_move, castling, ep_square, fen, score FROM labelled_positions")
    assert len(lp) == sum(expected.values())
    for r in lp:
        assert r["score"] is not None
        assert r["fen"] == fen_from_row(r["planes"], r["side_to_move"], r["castling"], r["ep_square"], 0, 1)
    mated = [r for r in lp if r["fen"].startswith("rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w")]
    assert mated and mated[0]["score"] == -32000


def test_relabel_most_used_first_appends_deeper_labels(store, tmp_path, stockfish):
    add_pgn(store, tmp_path, "a.pgn", ARCHIVE_A)
    add_pgn(store, tmp_path, "b.pgn", ARCHIVE_B)
    uses = _distinct(ARCHIVE_A, ARCHIVE_B)
    with EnginePool(stockfish, workers=2) as pool:
        label_store(store, pool, LabelRun())
        run = LabelRun(limit=Limit("depth", 9), relabel=True, order="most_used", max_positions=3)
        got = label_store(store, pool, run)
        assert got.labelled == 3
        top = _labels(store, "SELECT fen FROM labels WHERE limit_value = 9")
        counts = sorted((uses[" ".join(r["fen"].split()[:4])] for r in top), reverse=True)
        assert counts == sorted(uses.values(), reverse=True)[:3]
        # The next run takes the next ones, never the same position twice.
        assert label_store(store, pool, run).labelled == 3
    rows = _labels(store)
    assert len(rows) == len(uses) + 6  # old labels stay: append-only
    best = _labels(store, "SELECT limit_value, count(*) AS n FROM best_labels GROUP BY 1 ORDER BY 1")
    assert best == [{"limit_value": 8, "n": len(uses) - 6}, {"limit_value": 9, "n": 6}]


def test_failures_are_recorded_with_reasons_and_retried_only_when_asked(store, tmp_path, stockfish):
    add_pgn(store, tmp_path, "b.pgn", ARCHIVE_B)
    in_check = [epd for epd in _distinct(ARCHIVE_B) if chess.Board(epd + " 0 1").is_check()]
    assert len(in_check) == 1  # the final position of the fool's mate
    with EnginePool(stockfish, workers=1) as pool:
        first = label_store(store, pool, LabelRun(limit=Limit("static")))
        assert first.failed == 1 and first.failure_reasons == {"in check: Stockfish gives no static evaluation": 1}
        assert label_store(store, pool, LabelRun(limit=Limit("static"))).failed == 0
        assert label_store(store, pool, LabelRun(limit=Limit("static"), retry_failed=True)).failed == 1
    failures = _labels(store, "SELECT fen, reason, attempts FROM label_failures")
    assert [" ".join(f["fen"].split()[:4]) for f in failures] == in_check * 2
    cov = coverage(store, Setting("Stockfish 15.1", Limit("static")))
    assert (cov["labelled"], cov["failed"]) == (cov["distinct_positions"] - 1, 1)


LABEL_SCRIPT = """
import json, sys
from pathlib import Path
from pipeline.labels.pool import EnginePool
from pipeline.labels.uci import find_stockfish
from pipeline.labels.labels import label_store
from pipeline.labels.setting import LabelRun
from pipeline.store.store import Store
from tests.stores import add_pgn, first_games
with EnginePool(find_stockfish(), workers=1) as pool:
    s = label_store(Store(Path(sys.argv[1])), pool, LabelRun(flush_positions=int(sys.argv[2])))
print(json.dumps({"labelled": s.labelled, "done": s.shards_done, "busy": s.shards_busy}))
"""


def _spawn(store, flush):
    return subprocess.Popen(
        [sys.executable, "-c", LABEL_SCRIPT, str(store.root), str(flush)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )


def test_killed_run_resumes_without_duplicates_or_losses(store, tmp_path, stockfish, fics_search):
    path = tmp_path / "real.pgn"
    first_games(fics_search, 12, path)
    key = store.add_archive(path)
    ingest_archive(store, key, path, IngestConfig(workers=1))
    proc = _spawn(store, 40)
    parts_dir = store.root / "labels" / "stockfish-15.1_depth-8"
    deadline = time.monotonic() + 60
    while len(list(parts_dir.glob("part-*.parquet"))) < 3:
        assert time.monotonic() < deadline and proc.poll() is None, "the run ended before it could be killed"
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    before = len(_labels(store))
    setting = Setting("Stockfish 15.1", Limit("depth", 8))
    distinct = coverage(store, setting)["distinct_positions"]
    assert 0 < before < distinct
    with EnginePool(stockfish, workers=1) as pool:
        rest = label_store(store, pool, LabelRun())
    cov = coverage(store, setting)
    assert before + rest.labelled == cov["labelled"] == distinct
    assert integrity(store, setting)["duplicates"] == 0


def test_concurrent_runs_split_the_shards_between_them(store, tmp_path, fics_search):
    path = tmp_path / "real.pgn"
    first_games(fics_search, 12, path)
    key = store.add_archive(path)
    ingest_archive(store, key, path, IngestConfig(workers=1))
    a, b = _spawn(store, 1000), _spawn(store, 1000)
    ra, rb = (json.loads(p.communicate(timeout=300)[0]) for p in (a, b))
    assert ra["labelled"] > 0 and rb["labelled"] > 0, "both runs should have found shards to label"
    assert sorted(set(ra["done"]) | set(rb["done"])) == list(range(SHARDS))
    setting = Setting("Stockfish 15.1", Limit("depth", 8))
    cov = coverage(store, setting)
    assert ra["labelled"] + rb["labelled"] == cov["labelled"] == cov["distinct_positions"]
    assert integrity(store, setting)["duplicates"] == 0


def test_progress_total_is_the_work_asked_for_not_the_whole_backlog(store, tmp_path, stockfish):
    """--limit N with more than N pending: the bar and the ETA count N, not every pending position."""
    add_pgn(store, tmp_path, "a.pgn", ARCHIVE_A)
    add_pgn(store, tmp_path, "b.pgn", ARCHIVE_B)
    pending = len(_distinct(ARCHIVE_A, ARCHIVE_B))
    assert pending > 7
    seen = []
    with EnginePool(stockfish, workers=1) as pool:
        stats = label_store(store, pool, LabelRun(max_positions=7), seen.append, progress_every_s=0.0)
    assert stats.labelled == 7 and stats.pending_before == pending
    totals = {p.total for p in seen if p.total}  # 0 until the count (beside the first query) is in
    assert totals == {7}
    assert seen[-1].shard == "done" and (seen[-1].done, seen[-1].total) == (7, 7)


def test_eta_of_a_time_bounded_run_ends_with_its_budget():
    from pipeline.labels.labels import LabelProgress

    # 100 of 10,000 in 10 s: 990 s to go by count, but the run stops in 30 s.
    p = LabelProgress(100, 0, 10_000, 10.0, "00", budget_left_s=30.0)
    assert p.eta_seconds == 30.0
    assert LabelProgress(100, 0, 200, 10.0, "00", budget_left_s=30.0).eta_seconds == 10.0
    assert LabelProgress(100, 0, 200, 10.0, "00").eta_seconds == 10.0


def test_planned_total_is_what_the_bounds_let_the_run_do():
    from pipeline.labels.labels import planned_total

    assert planned_total(10_000, LabelRun(max_positions=300), 0, 0.0, None) == 300
    assert planned_total(200, LabelRun(max_positions=300), 0, 0.0, None) == 200
    # 100 done in 10 s with 50 s of a 60 s bound left: about 600 in all, not 10,000.
    assert planned_total(10_000, LabelRun(max_seconds=60), 100, 10.0, 50.0) == 600
    assert planned_total(10_000, LabelRun(max_seconds=60, max_positions=300), 100, 10.0, 50.0) == 300


def test_a_run_restricted_to_archives_labels_only_their_positions(store, tmp_path, stockfish):
    add_pgn(store, tmp_path, "a.pgn", ARCHIVE_A)
    key_b = add_pgn(store, tmp_path, "b.pgn", ARCHIVE_B)
    only_b = _distinct(ARCHIVE_B)
    with EnginePool(stockfish, workers=1) as pool:
        seen = []
        got = label_store(store, pool, LabelRun(archives=(key_b,)), seen.append, progress_every_s=0.0)
        assert got.labelled == len(only_b) and seen[-1].total == len(only_b)
        assert sorted(" ".join(r["fen"].split()[:4]) for r in _labels(store)) == sorted(only_b)
        # The rest of the store is untouched until a run without the restriction.
        rest = label_store(store, pool, LabelRun())
        assert rest.labelled == len(_distinct(ARCHIVE_A, ARCHIVE_B)) - len(only_b)
        # Re-labelling takes the restriction too.
        deeper = label_store(store, pool, LabelRun(limit=Limit("depth", 9), relabel=True, archives=(key_b,)))
    assert deeper.labelled == len(only_b)
    rows = _labels(store, "SELECT fen FROM labels WHERE limit_value = 9")
    assert sorted(" ".join(r["fen"].split()[:4]) for r in rows) == sorted(only_b)


def test_search_timeout_is_measured_from_the_limit_with_a_floor(stockfish):
    from pipeline.labels.calibration import TIMEOUT_FLOOR_S, TIMEOUT_MULTIPLE, search_timeout

    with EnginePool(stockfish, workers=1) as pool:
        quick = search_timeout(pool, Limit("depth", 6))
        static = search_timeout(pool, Limit("static"))
        deep = search_timeout(pool, Limit("nodes", 400_000))
        assert (pool.timeout_s, pool.retries) == (60.0, 2)  # the pool's own settings are left alone
    assert quick.seconds == static.seconds == TIMEOUT_FLOOR_S  # milliseconds of search: the floor
    assert 0 < quick.measured_s < 1.0 and 0 < static.measured_s < 1.0
    # 400k nodes take a measurable while; the timeout is a multiple of it.
    assert deep.measured_s > quick.measured_s
    assert deep.seconds == max(TIMEOUT_FLOOR_S, round(TIMEOUT_MULTIPLE * deep.measured_s, 1))


def test_a_store_labelled_before_reproducible_labels_stays_readable(store, tmp_path, stockfish):
    """Before hash_cleared was part of the setting, default runs kept the hash and wrote under
    `<engine>_<limit>/`, and failures had no hash_cleared column. Those labels count as the
    hash-kept setting; the default (reproducible) run labels the positions again beside them."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipeline.labels.labels import FAILURES_SCHEMA

    add_pgn(store, tmp_path, "a.pgn", ARCHIVE_A)
    expected = _distinct(ARCHIVE_A)
    with EnginePool(stockfish, workers=1, clear_hash=False) as pool:
        label_store(store, pool, LabelRun())
    # Lay the store out as the old code did: hash-kept labels under the plain slug, and one
    # failure written with the old failures schema (no hash_cleared column).
    old_dir = store.root / "labels" / "stockfish-15.1_depth-8"
    shutil.move(store.root / "labels" / "stockfish-15.1_depth-8_hash-kept", old_dir)
    first = _labels(store, "SELECT * FROM labels ORDER BY fen LIMIT 1")[0]
    old_schema = pa.schema([f for f in FAILURES_SCHEMA if f.name != "hash_cleared"])
    row = {f.name: [first.get(f.name)] for f in old_schema}
    row.update(reason=["engine crashed; 3 tries"], attempts=[3], failed_at=[first["labelled_at"]], run_id=["old"])
    (store.root / "label_failures" / "stockfish-15.1_depth-8").mkdir(parents=True)
    pq.write_table(
        pa.table(row, schema=old_schema), store.root / "label_failures" / "stockfish-15.1_depth-8" / "part-old.parquet"
    )

    kept = Setting("Stockfish 15.1", Limit("depth", 8), hash_cleared=False)
    fresh = Setting("Stockfish 15.1", Limit("depth", 8))
    assert coverage(store, kept)["labelled"] == len(expected)
    assert (coverage(store, fresh)["labelled"], coverage(store, fresh)["failed"]) == (0, 1)
    with EnginePool(stockfish, workers=1) as pool:
        again = label_store(store, pool, LabelRun())
    assert (again.labelled, again.failed) == (len(expected) - 1, 0)  # the old failure is not retried
    assert coverage(store, fresh)["labelled"] == len(expected) - 1
    assert integrity(store, fresh)["duplicates"] == integrity(store, kept)["duplicates"] == 0
    best = _labels(store, "SELECT fen, hash_cleared FROM best_labels")
    assert len(best) == len(expected)
    assert [r["fen"] for r in best if not r["hash_cleared"]] == [first["fen"]]
    assert _labels(store, "SELECT hash_cleared FROM label_failures") == [{"hash_cleared": None}]
