"""The KRvK check over many seeds: how many generations until the learned evaluation's search
mates from the mate-in-3 position (training/td/checks.py KRK_FEN), seed by seed.

`chess-pipeline selfplay --krk` (the td_krk asset) stops at the first generation that mates in
3; this script plays every generation a seed is given (training.td.checks.krk_generations with
stop_at_mate off), so it shows whether a mate, once found, stays found. Each seed is one process
playing its games one after another, with td_krk's settings (training.td.config.KRKCheck's defaults,
--model and --lead-plies aside). After each generation (and before the first: generation 0, the
material weights) the check's game is played from KRK_FEN to --lead-plies plies: one game
answers both "does it mate in 3" and "does the learned evaluation lead the search to a mate".

    .venv/bin/python scripts/krk_seeds.py --seeds 16 --generations 16 --minutes 7 --out krk-seeds

A line per seed and generation goes to OUT/seed-N.jsonl as it is played (a run stopped by
--minutes or killed keeps what it had), and the summary, a line per seed, to standard output.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import get_args

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from training.td.config import KRKCheck, ModelKind, krk_selfplay  # noqa: E402


class _OutOfTime(Exception):
    pass


def play_seed(
    seed: int, generations: int, lead_plies: int, games: int, model: str, out: str, deadline: float
) -> list[dict]:
    import dataclasses

    from training.td.checks import krk_generations

    td = dataclasses.replace(krk_selfplay(), seed=seed, games=games, model=model, workers=1)
    k = KRKCheck(lead_plies=lead_plies, td=td)
    rows: list[dict] = []
    with (Path(out) / f"seed-{seed}.jsonl").open("w") as f:

        def write(row: dict) -> None:
            rows.append({"seed": seed, **row})
            f.write(json.dumps(rows[-1]) + "\n")
            f.flush()
            if time.time() > deadline:
                raise _OutOfTime

        try:
            krk_generations(
                k.td_config(),
                generations,
                mate_plies=k.mate_plies,
                defender_depth=k.defender_depth,
                check_depth=k.check_depth,
                lead_plies=k.lead_plies,
                stop_at_mate=False,
                on_row=write,
            )
        except _OutOfTime:
            pass
    return rows


def first(rows: list[dict], key) -> int | None:
    return next((r["generation"] for r in rows if key(r)), None)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=4, help="seeds 0..N-1, one process each (default 4)")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--generations", type=int, default=8, help="generations per seed (default 8)")
    games = krk_selfplay().games
    ap.add_argument("--games", type=int, default=games, help=f"self-play games a generation (default {games})")
    ap.add_argument("--model", default="linear", choices=get_args(ModelKind), help="the evaluation learnt")
    lead = KRKCheck().lead_plies
    ap.add_argument("--lead-plies", type=int, default=lead, help=f"plies the check game may take to mate ({lead})")
    ap.add_argument("--minutes", type=float, default=0, help="start no generation after this (0: no bound)")
    ap.add_argument("--out", required=True, help="folder of the per-seed JSON lines")
    args = ap.parse_args(argv)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    deadline = time.time() + args.minutes * 60 if args.minutes else float("inf")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    with ProcessPoolExecutor(len(seeds), mp_context=get_context("spawn")) as ex:
        futures = {
            s: ex.submit(play_seed, s, args.generations, args.lead_plies, args.games, args.model, args.out, deadline)
            for s in seeds
        }
        results = {s: f.result() for s, f in futures.items()}
    print("seed  generations  first mate in 3  first mate (any)  mate in 3 at  mate plies by generation")
    for s, rows in results.items():
        strict = [r["generation"] for r in rows if r["mate_in_3"]]
        plies = ",".join("-" if r["mate_plies"] is None else str(r["mate_plies"]) for r in rows)
        print(
            f"{s:>4}  {len(rows) - 1:>11}  {str(first(rows, lambda r: r['mate_in_3'])):>15}  "
            f"{str(first(rows, lambda r: r['mate_plies'] is not None)):>16}  {strict}  {plies}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
