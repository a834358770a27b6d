"""Stockfish labelling throughput on real FICS positions, against baselines run in this process.

    python benchmarks/labels.py [--data ../shared/data/pgn] [--positions 6000] [--depth 8] [--candidates]

Every FICS archive is ingested into a temporary store (which also gives the dedup ratio: the
share of position rows that repeat an earlier distinct position). The first N pending
positions of shard 0, in the order the pipeline labels them (first seen, game by game), are
then labelled at depth 8 by:

  (a) a raw UCI loop: one engine, `position fen` + `go depth 8`, read to `bestmove`;
      FENs made beforehand, no python-chess in the loop; the hash carries over
  (c) the same raw loop with `ucinewgame` before each position (a fresh engine's label)
  (b) python-chess: SimpleEngine.analyse(board, Limit(depth=8)), one engine
  ours, 1 engine: label_store end to end (DuckDB query, FENs, engine pool, fences, label
      validation, Parquet parts) with the default, reproducible setting (hash cleared)
  ours, every core: the same with one engine per core
  ours, hash kept: the hash-carrying setting (clear_hash=False), 1 engine and every core

Each gets a fresh engine process. Targets: ours/1 >= 0.9x the raw loop of the same mode
(reproducible against (c), hash kept against (a)); ours on two cores >= 1.8x that. The
driver's own CPU time per position (this process, which also queries, validates and writes)
is printed too: it is what the pool costs beyond the engines, and is less noisy than
positions/s on a shared machine.

--candidates also times the raw loop's other ways to get a fresh engine's label:
`setoption name Clear Hash` instead of `ucinewgame`, and smaller Hash sizes.
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

from pipeline.ingest.encoding import fen_from_row  # noqa: E402
from pipeline.ingest.ingest import IngestConfig, ingest_archive  # noqa: E402
from pipeline.labels.labels import label_store  # noqa: E402
from pipeline.labels.pool import EnginePool  # noqa: E402
from pipeline.labels.setting import LabelRun, Setting  # noqa: E402
from pipeline.labels.shards import coverage, pending_params  # noqa: E402
from pipeline.labels.uci import Evaluation, Job, Limit, find_stockfish  # noqa: E402
from pipeline.store.duck import load_sql, memory_connection  # noqa: E402
from pipeline.store.store import Store  # noqa: E402


def raw_uci_loop(exe: str, fens: list[str], depth: int, clear: str = "", hash_mb: int = 16) -> float:
    """One engine, one position at a time; `clear` ("ucinewgame" or "setoption name Clear
    Hash") is sent before each position."""
    p = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    p.stdin.write(f"uci\nsetoption name Hash value {hash_mb}\nisready\n")
    p.stdin.flush()
    for line in p.stdout:
        if line.startswith("readyok"):
            break
    go = f"go depth {depth}\n"
    head = f"{clear}\n" if clear else ""
    start = time.perf_counter()
    for fen in fens:
        p.stdin.write(f"{head}position fen {fen}\n{go}")
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


def ours(store: Store, exe: str, workers: int, n: int, depth: int, clear_hash: bool = True) -> tuple[float, float]:
    """Seconds, and this process's CPU seconds, to label n positions end to end."""
    shutil.rmtree(store.root / "labels", ignore_errors=True)
    shutil.rmtree(store.root / "label_failures", ignore_errors=True)
    with EnginePool(exe, workers=workers, clear_hash=clear_hash) as pool:
        cpu = time.process_time()
        stats = label_store(store, pool, LabelRun(limit=Limit("depth", depth), max_positions=n, shards=(0,)))
        cpu = time.process_time() - cpu
    assert stats.labelled + stats.failed == n, (stats.labelled, stats.failed, n)
    assert stats.failed == 0, stats.failure_reasons
    return stats.seconds, cpu


def pool_only(exe: str, fens: list[str], depth: int, clear_hash: bool) -> tuple[float, float]:
    """EnginePool.run alone on the FENs (one engine): seconds, and this process's CPU seconds,
    which are the pool's own cost per position (reading, fences, parsing, validation)."""
    jobs = [Job(i, f, f.split()[1] == "w") for i, f in enumerate(fens)]
    with EnginePool(exe, workers=1, clear_hash=clear_hash) as pool:
        start, cpu = time.perf_counter(), time.process_time()
        results = list(pool.run(jobs, Limit("depth", depth)))
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert len(results) == len(fens) and all(isinstance(r, Evaluation) for r in results)
    return seconds, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "pgn")
    ap.add_argument("--positions", type=int, default=6000)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument(
        "--candidates",
        action="store_true",
        help="also time `setoption name Clear Hash` and smaller Hash sizes in the raw loop",
    )
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
        print(
            f"{len(files)} FICS archives: {cov['positions']:,} positions, {cov['distinct_positions']:,} distinct; "
            f"{cov['repeat_share']:.1%} of positions repeat an earlier one (labelled once)"
        )

        with memory_connection(store) as con:
            params = pending_params(setting, LabelRun(shards=(0,)), [0])
            rows = con.sql(load_sql("queries/pending_labels"), params=params).fetchall()[: args.positions]
        fens = [fen_from_row(r[1], r[2], r[3], r[4], 0, 1) for r in rows]
        n = len(fens)
        print(f"{n:,} positions of shard 0 in first-seen order, {setting.engine}, depth {args.depth}, {cores} cores\n")

        rates: dict[str, float] = {}

        def report(key: str, name: str, seconds: float, cpu: float | None = None, base: str = "") -> None:
            rates[key] = n / seconds
            ratio = f"{rates[key] / rates[base]:5.2f}x {base}" if base else ""
            driver = f"   driver CPU {cpu / n * 1e6:,.0f} us/position" if cpu is not None else ""
            print(f"{name:<44} {rates[key]:8,.0f} positions/s   {ratio}{driver}", flush=True)

        def report_ours(key: str, name: str, workers: int, clear_hash: bool, base: str) -> None:
            seconds, cpu = ours(store, exe, workers, n, args.depth, clear_hash)
            report(key, name, seconds, cpu, base)

        report("a", "(a) raw UCI loop, hash kept", raw_uci_loop(exe, fens, args.depth))
        report("c", "(c) raw UCI loop, ucinewgame each", raw_uci_loop(exe, fens, args.depth, "ucinewgame"))
        report("b", "(b) python-chess analyse, hash kept", python_chess_loop(exe, fens, args.depth), base="a")
        report_ours("ours1", "ours, 1 engine (reproducible)", 1, True, "c")
        report_ours("oursN", f"ours, {cores} engines (reproducible)", cores, True, "c")
        report("pool1", "pool only, 1 engine (reproducible)", *pool_only(exe, fens, args.depth, True), base="c")
        report_ours("kept1", "ours, 1 engine, hash kept", 1, False, "a")
        report_ours("keptN", f"ours, {cores} engines, hash kept", cores, False, "a")
        report("poolk", "pool only, 1 engine, hash kept", *pool_only(exe, fens, args.depth, False), base="a")
        report("a2", "(a) raw UCI loop, hash kept, again", raw_uci_loop(exe, fens, args.depth), base="a")
        report(
            "c2",
            "(c) raw UCI loop, ucinewgame each, again",
            raw_uci_loop(exe, fens, args.depth, "ucinewgame"),
            base="c",
        )
        if args.candidates:
            report(
                "clear",
                "raw loop, setoption Clear Hash each",
                raw_uci_loop(exe, fens, args.depth, "setoption name Clear Hash"),
                base="c",
            )
            for mb in (8, 4, 1):
                report(
                    f"h{mb}",
                    f"raw loop, ucinewgame each, Hash {mb} MB",
                    raw_uci_loop(exe, fens, args.depth, "ucinewgame", hash_mb=mb),
                    base="c",
                )

        a = (rates["a"] + rates["a2"]) / 2
        c = (rates["c"] + rates["c2"]) / 2
        print(
            f"\nagainst the mean of both raw runs of the same mode (hash kept {a:,.0f}/s, ucinewgame each "
            f"{c:,.0f}/s):\n  reproducible: ours/1 {rates['ours1'] / c:.2f}x (target >= 0.9), ours/{cores} "
            f"{rates['oursN'] / c:.2f}x (target >= 1.8 on 2 cores), pool only {rates['pool1'] / c:.2f}x\n"
            f"  hash kept:    ours/1 {rates['kept1'] / a:.2f}x, ours/{cores} {rates['keptN'] / a:.2f}x, "
            f"pool only {rates['poolk'] / a:.2f}x\n  keeping the hash is {rates['kept1'] / rates['ours1']:.2f}x "
            f"(1 engine) and {rates['keptN'] / rates['oursN']:.2f}x ({cores} engines) the reproducible speed"
        )


if __name__ == "__main__":
    main()
