"""Kaufman's delta, as Sabatelli's thesis defines it, for the reference players: the scale a
network's figure is read on.

    python -m pipeline.play.kaufman_scale ../shared/data/epd/kaufman.epd --depth 16 --workers 2

Scores Stockfish as the player at depths 1, 4 and 8 (suites.kaufman_scale), the random mover
(seeded) and the traditional evaluation at 1 ply (the suites' own search, evaluation.choose_moves),
each per position against Stockfish's evaluation at --depth (the evaluation asset's kaufman_depth,
16, by default), and prints one Markdown row per player: mean delta in pawns, its seeded 95%
interval, n and the test's moves found.
"""

from __future__ import annotations

import argparse
import sys

from pipeline.labels.pool import EnginePool
from pipeline.labels.uci import EngineNotFound, Limit, find_stockfish
from pipeline.play.suites import (
    DeltaCp,
    EpdPosition,
    SuiteError,
    kaufman_delta_cp,
    kaufman_scale,
    kaufman_summary,
    load_epd,
)


def reference_deltas(
    positions: list[EpdPosition], pool: EnginePool, limit: Limit, seed: int = 0
) -> dict[str, list[DeltaCp]]:
    """Player name -> its Kaufman deltas at `limit`: Stockfish at each scale depth, the random
    mover (RandomPlayer(seed), the positions in file order) and the traditional evaluation 1-ply."""
    from pipeline.play.evaluation import choose_moves
    from pipeline.play.search import MaterialEvaluator, RandomPlayer

    out = {f"Stockfish depth {d}": deltas for d, deltas in kaufman_scale(positions, pool, limit).items()}
    mover = RandomPlayer(seed)
    out[f"random mover (seed {seed})"] = kaufman_delta_cp(
        positions, [mover.choose(p.board) for p in positions], pool, limit
    )
    (moves,) = choose_moves(MaterialEvaluator, [(positions, 1)])
    out["traditional evaluation, 1-ply"] = kaufman_delta_cp(positions, moves, pool, limit)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pipeline.play.kaufman_scale", description=__doc__.split("\n\n")[0])
    ap.add_argument("epd", help="Kaufman's suite (.epd)")
    ap.add_argument("--depth", type=int, default=16, help="Stockfish depth of the deep evaluations (default 16)")
    ap.add_argument("--workers", type=int, default=1, help="Stockfish processes (default 1)")
    ap.add_argument("--seed", type=int, default=0, help="the random mover's seed (default 0)")
    args = ap.parse_args(argv)
    try:
        positions = load_epd(args.epd)
        limit = Limit("depth", args.depth)
        path = find_stockfish()
    except (SuiteError, EngineNotFound, ValueError) as e:
        print(f"kaufman_scale: {e}", file=sys.stderr)
        return 2
    with EnginePool(path, workers=args.workers) as pool:
        players = reference_deltas(positions, pool, limit, args.seed)
    print(f"Stockfish {limit} evaluations; delta = |after the test's move - after the player's|, pawns\n")
    print("| player | mean delta | 95% interval | n | test's move played |")
    print("|---|---|---|---|---|")
    for name, deltas in players.items():
        m = kaufman_summary(deltas)
        found = sum(d.move == d.reference for d in deltas)
        print(f"| {name} | {m.mean:.2f} | {m.low:.2f}-{m.high:.2f} | {m.n} | {found} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
