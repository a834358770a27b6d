"""Explorer latency: GET /api/position (and the page's other calls) on a real store.

    python benchmarks/explorer.py --home /tmp/xstore [--repeat 7]

Build the store first, e.g. from the shared archives (about 15-25 s):

    .venv/bin/chess-pipeline --home /tmp/xstore ingest ../shared/data/pgn

Times the API in process (FastAPI's TestClient: routing, validation, DuckDB, JSON) for the
starting position (reached by every game: the worst case, every row group of positions holds
it), a position after two moves, a position of one game, and one no game reached; median and
slowest of `repeat` calls after one warm-up. The baseline, in the same process: the bare scan
that counts the start position's rows by key alone (no full-position match, no aggregation).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import chess  # noqa: E402
import chess.polyglot  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from explorer.app import create_app  # noqa: E402
from pipeline.store import duck  # noqa: E402
from pipeline.store.store import Store  # noqa: E402


def timed(fn, repeat: int) -> tuple[float, float]:
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), max(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", required=True, help="the store (after chess-pipeline ingest)")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    store = Store(Path(args.home).resolve())
    with duck.memory_connection(store) as con:
        games, positions = con.sql("SELECT (SELECT count(*) FROM games), (SELECT count(*) FROM positions)").fetchall()[
            0
        ]
        [(gid, moves)] = con.sql("SELECT game_id, moves_uci FROM games WHERE ply_count > 60 LIMIT 1").fetchall()
    if not games:
        raise SystemExit(f"{store.root}: no games; ingest archives first (see this script's docstring)")
    one_game = chess.Board()
    for uci in moves.split()[:60]:
        one_game.push_uci(uci)
    two = chess.Board()
    two.push_san("e4")
    two.push_san("e5")
    cases = {
        "start position": chess.STARTING_FEN,
        "1.e4 e5": two.fen(),
        "ply 60 of one game": one_game.fen(),
        "not in the store": "8/8/8/4k3/8/8/8/4K2R w K - 0 1",
    }
    print(f"store {store.root}: {games:,} games, {positions:,} positions")
    with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
        t = time.perf_counter()
        first = client.get("/api/position", params={"fen": chess.STARTING_FEN})
        print(f"first call (opens the store): {1000 * (time.perf_counter() - t):.0f} ms")
        assert first.status_code == 200 and first.json()["games"] > 0, first.text
        for name, fen in cases.items():
            med, worst = timed(lambda fen=fen: client.get("/api/position", params={"fen": fen}), args.repeat)
            n = client.get("/api/position", params={"fen": fen}).json()["games"]
            print(f"/api/position {name:20s} {n:7,} games  median {1000 * med:6.0f} ms  slowest {1000 * worst:6.0f} ms")
        for path, params in (
            ("/api/evaluations", {"fen": chess.STARTING_FEN}),
            ("/api/piece_values", {"fen": chess.STARTING_FEN}),
            (f"/api/games/{gid}/evaluations", {}),
        ):
            med, worst = timed(lambda p=path, q=params: client.get(p, params=q), args.repeat)
            print(f"{path[:40]:42s} median {1000 * med:6.0f} ms  slowest {1000 * worst:6.0f} ms")
    key = chess.polyglot.zobrist_hash(chess.Board())
    with duck.read_only_connection(store) as con:
        med, worst = timed(
            lambda: con.execute("SELECT count(*) FROM positions WHERE position_key = ?", [key]).fetchall(), args.repeat
        )
    print(f"baseline: bare key scan of positions (start position)     median {1000 * med:6.0f} ms")


if __name__ == "__main__":
    main()
