"""Issue 39's suites at equal time: a learnt evaluation and the traditional one searching a test
suite (STS by default) with the same time a move, as Lubeck's grid gives it.

Time a move is a node budget for each evaluator (pipeline.play.lubeck_grid.node_budget: t s of
Lubeck's clock x time_scale x the evaluator's nodes/s here), so the search is reproducible and
does not depend on the machine's load: the traditional evaluation (material and piece-square
tables, pipeline.play.search.MaterialEvaluator) searches `material_nps` nodes a second, the
network `network_nps`, both with the grid's capture search and depth cap. Every search starts
fresh (evaluation.choose_moves). For each time a move it prints both sides' STS points with their
95% interval (a bootstrap over positions), the best moves found, and the network's lead: points
and best moves, paired position by position, with its 95% interval. A suite of best moves
alone (Win At Chess: `--suite wac.epd`) has no points: each side's count of best moves found
carries its interval instead.

    python scripts/equal_time_suites.py --checkpoint STORE/models/mlp_search_regression/RUN/checkpoint.pt \
        --material-nps 25215 --network-nps 19854
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial
from pathlib import Path

from pipeline.play.evaluation import choose_moves
from pipeline.play.lubeck_grid import GridConfig, node_budget
from pipeline.play.search import MaterialEvaluator
from pipeline.play.suites import load_epd, score_suite, solved
from pipeline.research.intervals import mean_interval
from training.evaluator import load_evaluator

STS = Path(__file__).parents[1].parent / "shared" / "data" / "epd" / "STS1-STS15_LAN_v3.epd"
GRID = GridConfig()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", required=True, help="the network's checkpoint (training.evaluator plays it)")
    ap.add_argument("--suite", type=Path, default=STS, help=f"EPD suite (default: {STS})")
    ap.add_argument(
        "--seconds", type=float, nargs="+", default=list(GRID.seconds), help="seconds a move on Lubeck's clock"
    )
    ap.add_argument(
        "--time-scale", type=float, default=GRID.time_scale, help="seconds here per second of Lubeck's clock"
    )
    ap.add_argument("--material-nps", type=float, required=True, help="the traditional evaluation's search nodes/s")
    ap.add_argument("--network-nps", type=float, required=True, help="the network's search nodes/s")
    ap.add_argument("--max-depth", type=int, default=4, help="depth cap of both searches (the grid's middle cap)")
    ap.add_argument("--quiescence", type=int, default=4, help="plies of captures both searches resolve")
    ap.add_argument("--max-positions", type=int, default=0, help="the suite's first N positions (0: all)")
    ap.add_argument(
        "--workers", type=int, default=2, help="processes searching at once (the moves do not depend on it)"
    )
    a = ap.parse_args(argv)
    if not a.suite.is_file():
        sys.exit(f"error: no suite at {a.suite}: give --suite PATH (an EPD file)")
    if not Path(a.checkpoint).is_file():
        sys.exit(f"error: no checkpoint at {a.checkpoint}: train one first (chess-pipeline train ...)")
    positions = load_epd(a.suite)[: a.max_positions or None]
    network = partial(load_evaluator, a.checkpoint)
    print(
        f"{a.suite.name}: {len(positions)} positions; nodes/s: traditional {a.material_nps:,.0f}, network "
        f"{a.network_nps:,.0f}; depth cap {a.max_depth}, {a.quiescence} plies of captures",
        file=sys.stderr,
    )
    print(
        "| s/move (Lubeck) | nodes/move network / trad | network: points (95%), best moves | traditional "
        "| lead in points (95%, paired) | lead in best moves (95%) |"
    )
    print("|---|---|---|---|---|---|")
    n = len(positions)
    for seconds in a.seconds:
        limits = [
            {"nodes": node_budget(seconds, nps, a.time_scale), "max_depth": a.max_depth, "quiescence": a.quiescence}
            for nps in (a.network_nps, a.material_nps)
        ]
        start = time.monotonic()
        (net_moves,) = choose_moves(network, [(positions, limits[0])], a.workers)
        (trad_moves,) = choose_moves(MaterialEvaluator, [(positions, limits[1])], a.workers)
        net, trad = score_suite(positions, net_moves), score_suite(positions, trad_moves)
        pointed = [x - y for (_, x), (_, y) in zip(net.got, trad.got, strict=True)]  # empty: no STS points
        best = mean_interval(
            [
                int(bool(solved(p, m))) - int(bool(solved(p, t)))
                for p, m, t in zip(positions, net_moves, trad_moves, strict=True)
            ]
        )

        def cell(s, moves) -> str:
            i = s.points_interval()
            if i is None:  # a suite of best moves alone (Win At Chess): the count solved, with its interval
                b = mean_interval([int(bool(solved(p, m))) for p, m in zip(positions, moves, strict=True)])
                return f"-, {s.solved} ({b.low * n:.0f}-{b.high * n:.0f})"
            return f"{s.points:,} ({i.low:,.0f}-{i.high:,.0f}), {s.solved}"

        if pointed:
            points = mean_interval(pointed)
            lead = f"{points.mean * n:+,.0f} ({points.low * n:+,.0f} to {points.high * n:+,.0f})"
        else:
            lead = "-"
        print(
            f"| {seconds:g} | {limits[0]['nodes']:,} / {limits[1]['nodes']:,} | {cell(net, net_moves)} | "
            f"{cell(trad, trad_moves)} | {lead} | {best.mean * n:+.0f} ({best.low * n:+.0f} to {best.high * n:+.0f}) |",
            flush=True,
        )
        print(f"{seconds:g} s: {time.monotonic() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
