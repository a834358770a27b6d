"""Stockfish labelling throughput on real FICS positions, against baselines run in this process.

    python benchmarks/labels.py [--data ../shared/data/pgn] [--positions 6000] [--depth 8]

Every FICS archive is ingested into a temporary store (which also gives the dedup ratio: the
share of position rows that repeat an earlier distinct position). The first N pending
positions of shard 0, in the order the pipeline labels them (first seen, game by game), are
then labelled at depth 8 by:

  (a) a raw UCI loop: one engine, `position fen` + `go depth 8`, read to `bestmove`;
      FENs made beforehand, no python-chess in the loop
  (b) python-chess: SimpleEngine.analyse(board, Limit(depth=8)), one engine
  ours, 1 engine: label_store end to end (DuckDB query, FENs, engine pool, Parquet parts)
  ours, every core: the same with one engine per core
  ours, 1 engine, clear_hash: `ucinewgame` before every position (exact fresh-engine labels)

Each gets a fresh engine process (so a fresh hash), and none clears the hash between
positions (what production does). Targets (issue 3): ours/1 >= 0.9x (a); ours on two cores
>= 1.8x (a).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import chess  # noqa: E402
import chess.engine  # noqa: E402

from pipeline.duck import load_sql, memory_connection  # noqa: E402
from pipeline.encoding import fen_from_row  # noqa: E402
from pipeline.engine import EnginePool, Limit, find_stockfish  # noqa: E402
from pipeline.ingest import IngestConfig, ingest_archive  # noqa: E402
from pipeline.labels import SHARDS, LabelRun, Setting, coverage, label_store  # noqa: E402
from pipeline.store import Store  # noqa: E402


def raw_uci_loop(exe: str, fens: list[str], depth: int) -> float:
    p = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    p.stdin.write("uci\nisready\n")
    p.stdin.flush()
    for line in p.stdout:
        if line.startswith("readyok"):
            break
    go = f"go depth {depth}\n"
    start = time.perf_counter()
    for fen in fens:
        p.stdin.write(f"position fen {fen}\n{go}")
        p.stdin.flush()
        for line in p.stdout:
            if line.startswith("bestmove"):
                break
    seconds = time.perf_counter() - start
    p.stdin.write("quit\n")
    p.stdin.flush()
    p.wait()
    return seconds


def python_chess_loop(exe: str, fens: list[str], depth: int) -> float:
    boards = [chess.Board(f) for f in fens]
    with chess.engine.SimpleEngine.popen_uci(exe) as engine:
        start = time.perf_counter()
        for b in boards:
            engine.analyse(b, chess.engine.Limit(depth=depth))
        return time.perf_counter() - start


def ours(store: Store, exe: str, workers: int, n: int, depth: int, clear_hash: bool = False) -> float:
    shutil.rmtree(store.root / "labels", ignore_errors=True)
    shutil.rmtree(store.root / "label_failures", ignore_errors=True)
    with EnginePool(exe, workers=workers, clear_hash=clear_hash) as pool:
        stats = label_store(store, pool, LabelRun(limit=Limit("depth", depth), max_positions=n, shards=(0,)))
    assert stats.labelled + stats.failed == n, (stats.labelled, stats.failed, n)
    return stats.seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "pgn")
    ap.add_argument("--positions", type=int, default=6000)
    ap.add_argument("--depth", type=int, default=8)
    args = ap.parse_args()
    exe = find_stockfish()
    files = sorted(p for p in args.data.rglob("*") if p.is_file() and "fics" in p.name.lower())
    if not files:
        raise SystemExit(f"no FICS archives under {args.data}")
    cores = os.cpu_count() or 1

    with tempfile.TemporaryDirectory(prefix="bench-labels-") as tmp:
        store = Store(Path(tmp)).ensure()
        for f in files:
            key = store.add_archive(f)
            ingest_archive(store, key, f, IngestConfig(workers=0))
        with EnginePool(exe, workers=1) as pool:
            setting = Setting(pool.name, Limit("depth", args.depth))
        cov = coverage(store, setting)
        print(f"{len(files)} FICS archives: {cov['positions']:,} positions, {cov['distinct_positions']:,} distinct; "
              f"{cov['repeat_share']:.1%} of positions repeat an earlier one (labelled once)")

        with memory_connection(store) as con:
            params = {**setting.params(), "shards": SHARDS, "shard_list": [0], "retry_failed": False}
            rows = con.sql(load_sql("queries/pending_labels"), params=params).fetchall()[: args.positions]
        fens = [fen_from_row(r[1], r[2], r[3], r[4], 0, 1) for r in rows]
        n = len(fens)
        print(f"{n:,} positions of shard 0 in first-seen order, {setting.engine}, depth {args.depth}, "
              f"{cores} cores\n")

        results: list[tuple[str, float]] = []

        def report(name: str, seconds: float) -> None:
            rate = n / seconds
            results.append((name, rate))
            base = results[0][1]
            print(f"{name:<34} {rate:8,.0f} positions/s   {rate / base:5.2f}x (a)", flush=True)

        report("(a) raw UCI loop, 1 engine", raw_uci_loop(exe, fens, args.depth))
        report("(b) python-chess analyse, 1 engine", python_chess_loop(exe, fens, args.depth))
        report("ours, 1 engine", ours(store, exe, 1, n, args.depth))
        report(f"ours, {cores} engines", ours(store, exe, cores, n, args.depth))
        report("(a) raw UCI loop again", raw_uci_loop(exe, fens, args.depth))
        report("ours, 1 engine, ucinewgame each", ours(store, exe, 1, n, args.depth, clear_hash=True))

        base = (results[0][1] + results[4][1]) / 2
        one, many = results[2][1], results[3][1]
        print(f"\nagainst the mean of both raw runs ({base:,.0f}/s): ours/1 {one / base:.2f}x (target >= 0.9), "
              f"ours/{cores} {many / base:.2f}x (target >= 1.8 on 2 cores), scaling {many / one:.2f}x; "
              f"keeping the hash is {one / results[5][1]:.2f}x faster than ucinewgame before each position")


if __name__ == "__main__":
    main()
