"""Drawing a round of searched children (pipeline.datasets.search_positions.children), against the
one-board-at-a-time loop it replaced, run in this process.

    python benchmarks/search_positions.py [--archive PGN] [--games 1500] [--children 2] [--workers 0]

The positions are those of the archive's first N games (python-chess replays them, as FENs
with clocks 0 and 1, what the dataset's rows give), every one a parent, as a round of the
dataset `sabatelli_regression_search` draws from its train rows. Timed, each drawing `--children`
random children a row with the same seeds and the same held-out keys (every parent's):

  baseline: the loop before: a python-chess board a row, each child kept as a copy of the board
            with its python-chess Zobrist key (chess.polyglot.zobrist_hash), then the store's
            encoding of the kept boards (planes, castling, en passant, keys) as rows_of made it
  ours, 1 process: children(..., workers=1): python-chess picks and plays the moves, the kept
            children are encoded and keyed with numpy (pipeline.ingest.encoding)
  ours, every core: the same in one process per usable core (--workers 0)

All three must give the same children in the same order (checked: their keys). Target: ours on
two cores >= 1.8x the baseline, since the drawing is what a round does before its labelling
(README: the searched set's rounds).
"""

from __future__ import annotations

import argparse
import io
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import chess  # noqa: E402
import chess.pgn  # noqa: E402
import chess.polyglot  # noqa: E402
import numpy as np  # noqa: E402

from pipeline.datasets.search_positions import Children, children  # noqa: E402
from pipeline.parallel import task_seed, usable_cores  # noqa: E402

ARCHIVE = ROOT.parent / "shared" / "data" / "pgn" / "ficsgamesdb_202401_standard2000_nomovetimes_397466.pgn.zst"


def parents(archive: Path, games: int) -> list[str]:
    """Every position of the archive's first `games` games, as FENs with clocks 0 and 1."""
    raw = archive.open("rb")
    if archive.suffix == ".zst":
        import zstandard

        raw = zstandard.ZstdDecompressor().stream_reader(raw)
    text, out = io.TextIOWrapper(raw, encoding="latin-1"), []
    for _ in range(games):
        game = chess.pgn.read_game(text)
        if game is None:
            break
        board = game.board()
        for move in game.mainline_moves():
            board.push(move)
            out.append(board.fen().rsplit(" ", 2)[0] + " 0 1")
    return out


def baseline(fens: list[str], count: int, seed: int, held_out: set[int]) -> Children:
    """The loop pipeline.datasets.search_positions had: board copies keyed by python-chess, encoded after."""
    kept = []
    for row, fen in enumerate(fens):
        board = chess.Board(fen)
        moves = list(board.legal_moves)
        for move in random.Random(task_seed(seed, row)).sample(moves, min(count, len(moves))):
            board.push(move)
            if not board.is_check() and not board.is_game_over(claim_draw=False):
                key = chess.polyglot.zobrist_hash(board)
                if key not in held_out:
                    held_out.add(key)
                    kept.append(board.copy(stack=False))
            board.pop()
    return Children.of(kept)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--archive", type=Path, default=ARCHIVE)
    ap.add_argument("--games", type=int, default=1500)
    ap.add_argument("--children", type=int, default=2, help="children a row, as a round's search_children")
    ap.add_argument("--workers", type=int, default=0, help="processes for 'every core' (0: one per usable core)")
    args = ap.parse_args()
    if not args.archive.exists():
        sys.exit(f"benchmarks/search_positions.py: {args.archive} does not exist: give --archive PGN")
    fens = parents(args.archive, args.games)
    held = {chess.polyglot.zobrist_hash(chess.Board(f)) for f in fens}
    workers = args.workers or usable_cores()
    print(f"{len(fens):,} parent rows from {args.archive.name}, {args.children} children each; {workers} process(es)")
    runs = {}
    for name, draw in (
        ("baseline", lambda h: baseline(fens, args.children, 1, h)),
        ("ours, 1 process", lambda h: children(fens, args.children, 1, h, 1)),
        (f"ours, {workers} processes", lambda h: children(fens, args.children, 1, h, workers)),
    ):
        start = time.perf_counter()
        got = draw(set(held))
        runs[name] = (time.perf_counter() - start, got)
    base_s, base = runs["baseline"]
    for name, (seconds, got) in runs.items():
        same = np.array_equal(got.keys, base.keys)
        print(
            f"{name:>20}: {seconds:6.1f} s, {len(fens) / seconds:9,.0f} rows/s, {len(got):,} children, "
            f"{base_s / seconds:.2f}x the baseline{'' if same else ', NOT THE SAME CHILDREN'}"
        )
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
