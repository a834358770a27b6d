"""`chess-pipeline reproduce`: the published tables on the shared data, in one resumable command.

Ingest every archive of the data folder (or those matching --archives), label every distinct
position of them (depth 8, reproducible, by default), then the assets of `reproduction_job`
one run each, upstream first: the datasets both ways, the models (both ways where the published
figures were measured on a split of their own data), the evaluation, and reports/reproduction.md.

Resuming: killed at any point, the same command continues, deciding from the store itself (the
step records of pipeline.research.step_records: a second machine on the same store keeps them
too). An archive ingested with the same bytes is not ingested again; labels label only the
positions without a label of the setting; an asset of the job is kept when a reproduce run with
the same settings made it and none of its inputs changed since (for `labels`: a run that
labelled something). Everything else, and everything downstream of it, runs. A step killed
half-way runs again from its start, except a model run, which trains on in its own run folder
from its checkpoint.

The command's flags and their help, the settings refused before any store work (check_config),
and cmd_reproduce; ReproduceConfig and each step's settings are in cli/reproduce_config.py, the
step loop in cli/reproduce_steps.py, the whole run (ingest, labels, the time budget's ledger) in
cli/reproduce_run.py.
"""

import argparse
import dataclasses
import math
import sys
import time
from dataclasses import fields
from typing import get_args

from cli.flags import add_field_flag, add_limit_flags, limit_from_args
from cli.reproduce_config import ReproduceConfig
from cli.reproduce_run import check_models, reproduce, select_archives
from cli.runtime import open_instance, open_store
from cli.train import add_override_flags, overrides_from_args
from pipeline.research.published import OptionalStage
from pipeline.settings import from_namespace
from training.choices import Profile

CAP_FLAGS = {"epochs": "--max-epochs", "max_train_rows": "--max-train-rows"}
"""`reproduce`'s flag for each ScheduleOverrides field it takes (ReproduceConfig.caps): a cap, hence `--max-`."""
CAP_NOTE = " A cap: each model gets the smaller of its profile's and this; stated in the report."
"""What `reproduce` adds to the help of each flag of CAP_FLAGS."""

LABEL_HELP = {
    "depth": "Stockfish depth of the labels",
    "nodes": "Stockfish nodes of the labels instead of a depth",
    "static": "label with Stockfish's static evaluation instead of a search (for a fast, small run)",
}
"""What each kind of label setting does, as `reproduce`'s flags say it (ReproduceConfig.label)."""


def openings_help() -> str:
    from cli.evaluate import QUICK_EVALUATION
    from pipeline.play.evaluation import MatchConfig  # MatchesConfig's fields (assets.evaluation: slow to import)

    full = next(f.default for f in fields(MatchConfig) if f.name == "openings")
    return (
        f"openings per match, each played with both colours (0: the evaluation's, {full}; "
        f"--quick-eval's {QUICK_EVALUATION['matches']['openings']})"
    )


def quick_eval_help() -> str:
    from cli.evaluate import QUICK_EVALUATION
    from pipeline.play.lubeck_grid import QUICK_GRID

    suites, matches = QUICK_EVALUATION["suites"], QUICK_EVALUATION["matches"]
    return (
        f"the evaluation's quick settings (evaluate --quick: {suites['max_positions']} positions a suite at "
        f"{', '.join(map(str, suites['depths']))} ply, {matches['openings']} openings; Lubeck's grid on "
        f"{QUICK_GRID['positions']} positions a kind)"
    )


def check_config(cfg: ReproduceConfig) -> None:
    """Refuse a bad setting with one line, before any store work."""
    problems = [
        ("--openings", cfg.openings, 0, " (0: the evaluation's)"),
        ("--workers", cfg.workers, 0, " (0: one per core)"),
    ]
    for flag, value, least, note in problems:
        if value < least:
            raise SystemExit(f"chess-pipeline reproduce: {flag} must be {least} or more{note}, got {value}")
    if not (math.isfinite(cfg.hours) and cfg.hours >= 0):
        raise SystemExit(
            f"chess-pipeline reproduce: --hours must be a number of hours, 0 or more (0: no budget), got {cfg.hours}"
        )
    if cfg.new_budget and not cfg.hours:
        raise SystemExit("chess-pipeline reproduce: --new-budget starts a time budget: give it with --hours H")


def cmd_reproduce(args: argparse.Namespace) -> None:
    flagged = [f.name for f in fields(ReproduceConfig) if f.name not in ("models", "label", "caps", "with_stages")]
    label = limit_from_args(args, "reproduce", ReproduceConfig.label)  # refused in one line before any store work
    caps = overrides_from_args(args, "reproduce", CAP_FLAGS)  # likewise
    stages = tuple(dict.fromkeys(args.with_stages or ()))
    cfg = from_namespace(ReproduceConfig, args, flagged, models=tuple(args.models), label=label, caps=caps,
                         with_stages=stages)  # fmt: skip
    check_config(cfg)  # before a store is made
    if not cfg.models:  # the default selection: the models with a published figure (all with --with ours)
        from assets.reproduce import default_models

        cfg = dataclasses.replace(cfg, models=tuple(default_models(cfg.with_stages)))
    check_models(cfg.models)
    select_archives(cfg)
    store = open_store(args.home)
    instance = open_instance(store)
    start = time.monotonic()
    failures = reproduce(store, instance, cfg)
    from assets.reproduce import REPORT

    if not any(f.startswith(f"{REPORT}: ") for f in failures):
        print(f"report: {store.root / 'reports' / 'reproduction.md'} ({time.monotonic() - start:.0f} s this run)")
    if failures:
        print(
            f"chess-pipeline reproduce: {len(failures)} step(s) failed, first {failures[0]} "
            "(fix it and run the same command again: finished steps are kept)",
            file=sys.stderr,
        )
        raise SystemExit(1)


def add_parser(sub) -> None:
    s = sub.add_parser(
        "reproduce", help="the published tables on the shared data: ingest, label, train, evaluate, report"
    )
    s.add_argument(
        "models",
        nargs="*",
        help="model assets to reproduce (default: those with a published figure; with --with ours, every model "
        "but those on a set of ours: mlp_search_regression, mlp_bitmap_3class_search, deepchess_scored_net)",
    )
    add_field_flag(
        s, ReproduceConfig, "with_stages", "--with", dest="with_stages", action="append", default=None,
        choices=get_args(OptionalStage), metavar="STAGE",
    )  # fmt: skip
    add_field_flag(s, ReproduceConfig, "data", "--data", metavar="FOLDER")
    add_field_flag(s, ReproduceConfig, "archives", "--archives", metavar="GLOB")
    add_field_flag(s, ReproduceConfig, "suites", "--suites", metavar="FOLDER")
    add_field_flag(s, ReproduceConfig, "profile", "--profile", choices=get_args(Profile))
    add_limit_flags(s, LABEL_HELP.get, ReproduceConfig.label)
    add_override_flags(s, CAP_FLAGS, CAP_NOTE)
    add_field_flag(s, ReproduceConfig, "hours", "--hours", metavar="H")
    add_field_flag(s, ReproduceConfig, "new_budget", "--new-budget", action="store_true")
    add_field_flag(s, ReproduceConfig, "quick_eval", "--quick-eval", action="store_true", help=quick_eval_help())
    add_field_flag(
        s, ReproduceConfig, "openings", "--openings", metavar="N", help=openings_help() + " (default {default})"
    )
    add_field_flag(s, ReproduceConfig, "workers", "--workers", metavar="N")
    s.set_defaults(func=cmd_reproduce)
