"""Archive -> Parquet throughput on the real FICS files, against baselines run in this process.

    python benchmarks/ingest.py [--data ../shared/data/pgn] [--repeat K]

All FICS files are concatenated into one temporary plain PGN (so every run reads the same
bytes and the parallel run has enough chunks to spread), K times over (default 1). Then, on
that file:

  (a) python-chess: read_game + replay of the mainline, one core (the usual baseline)
  (b) pgn-extract --fencomments (C): a FEN after every ply, one core
  ours, 1 worker: archive -> games + rejected_games + positions Parquet, end to end
  ours, N workers (every core): the same, worker pool start-up included
  ours, 1 worker, Python loops: the same without the compiled loops (no C compiler)

and prints plies/s with ratios. Targets (issue 2): ours/1 >= 3x (a); ours/N near N x ours/1;
positions planes under 4 bytes per position.

"Near N x" is bounded by the machine: N processes of plain CPU-bound Python do less than N
times the work of one on shared or hyperthreaded cores. The script measures that bound first
and prints ours/N against it.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import chess.pgn  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from pipeline.ingest import games as games_module  # noqa: E402
from pipeline.ingest import replay as compiled_loops  # noqa: E402
from pipeline.ingest.archive import open_archive  # noqa: E402
from pipeline.ingest.ingest import IngestConfig, ingest_archive  # noqa: E402
from pipeline.store.store import Store  # noqa: E402


def python_chess_baseline(path: Path) -> tuple[int, float]:
    plies = 0
    start = time.perf_counter()
    with open(path, encoding="utf-8") as f:
        while (game := chess.pgn.read_game(f)) is not None:
            board = game.board()
            for move in game.mainline_moves():
                board.push(move)
                plies += 1
    return plies, time.perf_counter() - start


FEN_COMMENT = re.compile(rb"\{\s*[1-8pnbrqkPNBRQK]+(?:/[1-8pnbrqkPNBRQK]+){7}\s+[wb]\s")


def pgn_extract_baseline(path: Path) -> tuple[int, float] | None:
    exe = shutil.which("pgn-extract") or (
        "/usr/games/pgn-extract" if os.path.exists("/usr/games/pgn-extract") else None
    )
    if not exe:
        return None
    start = time.perf_counter()
    out = subprocess.run([exe, "--fencomments", "-s", str(path)], capture_output=True, check=True).stdout
    seconds = time.perf_counter() - start
    plies = len(FEN_COMMENT.findall(out))
    return plies, seconds


def _spin(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def _timed_spin(n: int, go, times) -> None:
    go.wait()
    start = time.perf_counter()
    _spin(n)
    times.put(time.perf_counter() - start)


def machine_scaling(workers: int, n: int = 20_000_000) -> float:
    """How many times the work of one process `workers` CPU-bound processes do at once."""
    start = time.perf_counter()
    _spin(n)
    one = time.perf_counter() - start
    ctx = multiprocessing.get_context("forkserver")
    go, times = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_timed_spin, args=(n, go, times)) for _ in range(workers)]
    for p in procs:
        p.start()
    time.sleep(2)  # let every process finish starting before they all spin at once
    go.set()
    slowest = max(times.get() for _ in procs)
    for p in procs:
        p.join()
    return workers * one / slowest


def column_bytes(path: Path) -> Counter:
    """Compressed bytes of each column of a Parquet file (its column chunks' sizes, every row
    group), and of each column's Bloom filters (as "<column> bloom filter"), where it has any."""
    per_column: Counter = Counter()
    meta = pq.ParquetFile(path).metadata
    for rg in range(meta.num_row_groups):
        for i in range(meta.num_columns):
            col = meta.row_group(rg).column(i)
            per_column[col.path_in_schema] += col.total_compressed_size
            if col.bloom_filter_length:
                per_column[f"{col.path_in_schema} bloom filter"] += col.bloom_filter_length
    return per_column


def ours(path: Path, workers: int) -> tuple[int, float, dict]:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp)).ensure()
        stats = ingest_archive(store, "bench", path, IngestConfig(workers=workers))
        per_column = column_bytes(store.partition_file("positions", "bench"))
        sizes = {
            "positions": stats.positions,
            "bytes_per_position": stats.bytes_per_position,
            "planes_bytes_per_position": per_column["planes"] / stats.positions,
            "key_bytes_per_position": per_column["position_key"] / stats.positions,
        }
        return stats.plies, stats.seconds, sizes


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "pgn")
    ap.add_argument("--repeat", type=int, default=1, help="concatenate the FICS files this many times")
    args = ap.parse_args()
    files = sorted(p for p in args.data.rglob("*") if p.is_file() and "fics" in p.name)
    if not files:
        raise SystemExit(f"no FICS archives under {args.data}")
    with tempfile.TemporaryDirectory() as tmp:
        combined = Path(tmp) / "fics.pgn"
        with open(combined, "wb") as out:
            for _ in range(args.repeat):
                for f in files:
                    with open_archive(f) as src:
                        shutil.copyfileobj(src, out)
                    out.write(b"\n\n")
        print(
            f"{len(files)} FICS archives{f' x {args.repeat}' if args.repeat > 1 else ''}, "
            f"{combined.stat().st_size / 1e6:.1f} MB of PGN, {os.cpu_count()} cores"
        )
        workers = os.cpu_count() or 1
        ceiling = machine_scaling(workers) if workers > 1 else 1.0
        if workers > 1:
            print(f"this machine: {workers} CPU-bound Python processes do {ceiling:.2f}x the work of one")

        pc_plies, pc_s = python_chess_baseline(combined)
        pc_rate = pc_plies / pc_s
        print(f"(a) python-chess read_game + replay: {pc_plies:,} plies in {pc_s:.2f}s = {pc_rate:,.0f} plies/s")
        pe = pgn_extract_baseline(combined)
        if pe:
            print(f"(b) pgn-extract --fencomments:       {pe[0]:,} FENs in {pe[1]:.2f}s = {pe[0] / pe[1]:,.0f} plies/s")
        else:
            print("(b) pgn-extract not installed (apt-get install pgn-extract): skipped")

        p1, s1, sizes = ours(combined, 1)
        assert p1 == pc_plies, f"ply count differs from python-chess: {p1} vs {pc_plies}"
        r1 = p1 / s1
        print(
            f"ours, 1 worker:  {p1:,} plies in {s1:.2f}s = {r1:,.0f} plies/s   "
            f"{r1 / pc_rate:.2f}x (a)" + (f"   {r1 / (pe[0] / pe[1]):.2f}x (b)" if pe else "")
        )
        if workers > 1:
            p2, s2, _ = ours(combined, workers)
            r2 = p2 / s2
            print(
                f"ours, {workers} workers: {p2:,} plies in {s2:.2f}s = {r2:,.0f} plies/s   "
                f"{r2 / pc_rate:.2f}x (a)   {r2 / r1:.2f}x ours/1 worker "
                f"({r2 / r1 / ceiling:.0%} of this machine's {ceiling:.2f}x)"
            )
        if compiled_loops.compiled is not None:
            # The fallback where no C compiler built pipeline/ingest/_replay.c: both Python loops.
            compiled_loops.compiled = games_module.compiled = None
            p3, s3, _ = ours(combined, 1)
            r3 = p3 / s3
            print(
                f"ours, 1 worker, Python loops (no compiler): {r3:,.0f} plies/s   {r3 / pc_rate:.2f}x (a)   "
                f"compiled loops {r1 / r3:.2f}x faster"
            )
        print(
            f"positions: {sizes['bytes_per_position']:.2f} bytes/position on disk in all; "
            f"planes {sizes['planes_bytes_per_position']:.2f} (target < 4), "
            f"64-bit key {sizes['key_bytes_per_position']:.2f} (random bits, incompressible)"
        )


if __name__ == "__main__":
    main()
