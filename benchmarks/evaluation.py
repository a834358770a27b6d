"""The evaluation's searches and games in several processes, against one process, in the same run.

    python benchmarks/evaluation.py [--checkpoint models/<model>/<run>/checkpoint.pt] [--positions 200]
                                    [--openings 4] [--workers 0]

Two parts of a model's full evaluation, each timed in one process (the baseline: how the
evaluation ran before it used processes) and in `--workers` processes (0: one per usable core):

- suites: the first `--positions` STS positions (../shared/data/epd; random playouts without
  it) searched at depths 1 and 2, as eval_suites_<model> searches them (choose_moves); both
  runs must choose the same moves;
- matches: eval_matches_<model>'s matches (random mover, Stockfish at skills 0, 5 and 10, the
  traditional evaluation at depths 1 and 2; not the fixed-time match, whose games depend on the
  clock) from the first `--openings` of Sabatelli's openings (run_matches). The games against
  the traditional evaluation and the random mover must be the same both ways (Stockfish below
  skill 20 picks among moves at random).

The evaluator is the traditional one, or with --checkpoint that network (loaded in each
process, as the assets load it). Prints seconds and the ratio per part; the process start-up
(importing torch, loading the checkpoint) counts against the processes. Target: at least 1.6x
on 2 idle cores for both parts with a network.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.search import positions  # noqa: E402
from pipeline.labels.uci import find_stockfish  # noqa: E402
from pipeline.parallel import resolve_workers  # noqa: E402
from pipeline.play.evaluation import MatchConfig, MatchSetup, choose_moves, run_matches  # noqa: E402
from pipeline.play.openings import sabatelli_openings  # noqa: E402
from pipeline.play.search import MaterialEvaluator  # noqa: E402
from pipeline.play.suites import EpdPosition  # noqa: E402

TARGET = 1.6


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", help="a trained model's checkpoint.pt (default: the traditional evaluation)")
    ap.add_argument("--positions", type=int, default=200, help="STS positions searched at depths 1 and 2")
    ap.add_argument("--openings", type=int, default=4, help="openings per match, each played with both colours")
    ap.add_argument("--workers", type=int, default=0, help="processes (0: one per usable core)")
    args = ap.parse_args(argv)
    if args.checkpoint:
        from training.evaluator import load_evaluator

        factory, name = functools.partial(load_evaluator, args.checkpoint, "network"), "network"
    else:
        factory, name = MaterialEvaluator, MaterialEvaluator.name
    workers = resolve_workers(args.workers, 1_000)
    suite = [EpdPosition("bench", i, f"bench.{i}", b) for i, b in enumerate(positions(args.positions))]
    searches = [(suite, 1), (suite, 2)]
    print(
        f"{name}: {len(suite)} positions at depths 1 and 2; matches from {args.openings} openings; {workers} processes"
    )

    one_s, one_moves = timed(lambda: choose_moves(factory, searches, 1))
    many_s, many_moves = timed(lambda: choose_moves(factory, searches, workers))
    if one_moves != many_moves:
        raise SystemExit("the suites' moves differ between one process and several")
    print(f"suites:  1 process {one_s:7.1f} s, {workers} processes {many_s:7.1f} s, ratio {one_s / many_s:.2f}x")

    cfg = MatchConfig(openings=args.openings, movetime=0.0, workers=1)
    match_args = (name, factory, MaterialEvaluator, sabatelli_openings(), find_stockfish())
    quiet = lambda _: None  # noqa: E731
    one_m, (one_games, _) = timed(lambda: run_matches(MatchSetup(*match_args, cfg), quiet))
    many_m, (many_games, _) = timed(
        lambda: run_matches(MatchSetup(*match_args, dataclasses.replace(cfg, workers=workers)), quiet)
    )
    for a, b in zip(one_games, many_games, strict=True):
        if "stockfish" not in a.name and [str(g.game.mainline_moves()) for g in a.games] != [
            str(g.game.mainline_moves()) for g in b.games
        ]:
            raise SystemExit(f"{a.name}: the games differ between one process and several")
    games = sum(len(m.games) for m in one_games)
    print(
        f"matches: 1 process {one_m:7.1f} s, {workers} processes {many_m:7.1f} s, ratio {one_m / many_m:.2f}x "
        f"({games} games)"
    )
    ratios = {"suites": one_s / many_s, "matches": one_m / many_m}
    short = [k for k, r in ratios.items() if r < TARGET]
    print(f"target {TARGET}x on 2 idle cores with a network: " + (f"below for {', '.join(short)}" if short else "met"))
    return ratios


if __name__ == "__main__":
    main()
