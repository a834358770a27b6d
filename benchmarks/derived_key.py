"""What deriving the position key would cost: the polyglot key computed in SQL from a row's
planes, side to move, castling and en passant, against the stored `position_key` column, on the
same store, in this process.

    python benchmarks/derived_key.py [--home STORE] [--data ../shared/data/pgn]

Issue 38's bytes target is 8 bytes a position; at 50M positions the stored 64-bit key is 7.65
of 15.19 (docs/results/speed.md). A position's key is a function of columns the store keeps, so
it could be left out of the files and derived where a query needs it. This measures that price
with the one derivation every SQL client of the store can run, a macro (`zobrist_key` below: the
XOR of the polyglot key parts of the planes' set bits, castling rights, en passant file and side
to move, from the ingest's own tables). It checks the macro against the stored key on every row,
then times each query below both ways, REPEAT times each, keeping the best time, and checks that
the two ways give the same answer (exit 1 if a key or an answer differs):

  (1) distinct positions: count(DISTINCT key) over the store (what coverage, the labels' pending
      positions and the datasets' leakage guard group by);
  (2) one labels shard's distinct positions (shard 0 by the views' `in_shards`, as the labels ask);
  (3) a lookup of one position's rows by key (the explorer's query, users' `WHERE position_key =`):
      stored, the Bloom filters and statistics skip row groups; derived, every row is hashed.

Without --home, every archive of --data is ingested into a temporary store first (removed after).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.ingest.encoding import BYTE_KEYS, CASTLE_KEYS, EP_KEYS, TURN_KEY  # noqa: E402
from pipeline.ingest.ingest import IngestConfig, ingest_archive  # noqa: E402
from pipeline.labels.setting import SHARDS  # noqa: E402
from pipeline.store import duck  # noqa: E402
from pipeline.store.store import Store  # noqa: E402


def zobrist_macro() -> str:
    """`zobrist_key(planes, side_to_move, castling, ep_square)`: the polyglot key in SQL, from the
    tables the ingest's `zobrist` hashes with (pipeline.ingest.encoding).

    `planes::BIT` reads the 96 bytes as 768 bits, each byte's high bit first, so bit j is bit
    7 - j % 8 of byte j // 8, whose key part is BYTE_KEYS[j // 8][1 << (7 - j % 8)]."""
    by_bit = [BYTE_KEYS[j // 8][1 << (7 - j % 8)] for j in range(8 * BYTE_KEYS.shape[0])]

    def array(values) -> str:
        return "[" + ",".join(f"{int(v)}::UBIGINT" for v in values) + "]"

    return f"""CREATE OR REPLACE MACRO zobrist_key(planes, side_to_move, castling, ep_square) AS
    xor(xor(xor(
        coalesce(list_bit_xor(list_transform(
            list_filter(range({len(by_bit)}), lambda j: get_bit(planes::BIT, j::INTEGER) = 1),
            lambda j: {array(by_bit)}[j + 1])), 0::UBIGINT),
        {array(CASTLE_KEYS)}[castling + 1]),
        CASE WHEN ep_square IS NULL THEN 0::UBIGINT ELSE {array(EP_KEYS)}[ep_square % 8 + 1] END),
        CASE WHEN side_to_move = 'w' THEN {int(TURN_KEY)}::UBIGINT ELSE 0::UBIGINT END)"""


DERIVED = "zobrist_key(planes, side_to_move, castling, ep_square)"


REPEAT = 3
"""Each query of the comparison runs this many times; its best time counts (the stored key's
answers take milliseconds, where one run's noise is of the same size)."""


def timed(con, sql: str, params: list | None = None, repeat: int = 1) -> tuple[object, float]:
    """The query's first row and its best wall time over `repeat` runs."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        row = con.execute(sql, params or []).fetchall()[0]
        best = min(best, time.perf_counter() - start)
    return row, best


def measure(store: Store) -> int:
    with duck.memory_connection(store) as con:
        con.execute(zobrist_macro())
        (rows, agree), seconds = timed(
            con, f"SELECT count(*), count(*) FILTER ({DERIVED} = position_key) FROM positions"
        )
        print(
            f"derived key = stored key on {agree:,} of {rows:,} positions ({rows / seconds:,.0f} positions/s derived)"
        )
        if agree != rows:
            print("derived key differs from the stored one: the macro is wrong", file=sys.stderr)
            return 1
        (key,), _ = timed(
            con, "SELECT position_key FROM positions WHERE ply = (SELECT max(ply) // 2 FROM positions) LIMIT 1"
        )
        queries = [
            ("(1) distinct positions", "SELECT count(DISTINCT {k}) FROM positions", []),
            (
                "(2) one labels shard's distinct positions",
                f"SELECT count(DISTINCT {{k}}) FROM positions WHERE in_shards({{k}}, [0], {SHARDS})",
                [],
            ),
            ("(3) one position's rows", "SELECT count(*) FROM positions WHERE {k} = $1::UBIGINT", [key]),
        ]
        differ = 0
        for name, sql, params in queries:
            stored_row, stored = timed(con, sql.format(k="position_key"), params, REPEAT)
            derived_row, derived = timed(con, sql.format(k=DERIVED), params, REPEAT)
            same = "same answer" if stored_row == derived_row else f"DIFFERENT: {stored_row} against {derived_row}"
            differ += stored_row != derived_row
            print(
                f"{name}: stored {stored * 1000:,.0f} ms, derived {derived * 1000:,.0f} ms, "
                f"{derived / stored:,.0f}x ({same})"
            )
        per_million = rows / 1e6
        print(
            f"derived, per million positions: {seconds / per_million:.1f} s on this machine (DuckDB on every core); "
            f"at 50M positions {50 * seconds / per_million / 60:.1f} min for any query that needs every key"
        )
    return 1 if differ else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", help="an existing store (default: ingest --data into a temporary one)")
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "pgn"))
    args = ap.parse_args()
    if args.home:
        return measure(Store(Path(args.home)))
    archives = sorted(p for p in Path(args.data).glob("*.pgn*") if p.is_file())
    if not archives:
        print(f"no archives in {args.data}: give --data FOLDER or --home STORE", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="derived_key_"))
    try:
        store = Store(tmp / "store").ensure()
        for archive in archives:
            ingest_archive(store, store.add_archive(archive), archive, IngestConfig(workers=0))
        return measure(store)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
