"""`chess-pipeline evaluate [MODEL...]`: test suites, matches and Elo of trained models."""

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import dagster as dg

from cli.flags import add_field_flag
from cli.output import print_table
from cli.progress import run_bar
from cli.runtime import materialize, open_instance, open_store, require_success
from pipeline.store import duck
from pipeline.store.store import Store

Only = Literal["suites", "matches"]

QUICK_EVALUATION = {
    # One process: the quick suites' 1-ply searches take about 3 s, less than starting more (5.5 s
    # a step against 8.3 with two, mlp_bitmap_3class on 2 cores).
    "suites": {"depths": [1], "max_positions": 100, "kaufman_depth": 12, "workers": 1},
    "matches": {"openings": 4, "stockfish_skills": [0], "movetime": 0.0, "endgames": 2, "endgame_max_plies": 60},
    "head_to_head": {"openings": 4},
}
"""--quick: a few minutes a model (fewer positions, openings, opponents), for a first look."""
QUICK_PIECE_VALUE_ROWS = 4000
"""--quick: test positions a piece-value network values (eval_piece_values_<model>)."""


@dataclass(frozen=True)
class EvaluationRequest:
    """What to evaluate and how (the evaluate command's arguments)."""

    models: tuple[str, ...] = ()
    """Model assets to evaluate; empty: every trained one."""
    quick: bool = False
    """A first look: QUICK_EVALUATION's settings."""
    suites_dir: str | None = None
    """Folder of .epd suites (default: $CHESS_PIPELINE_SUITES, else <home>/suites)."""
    depths: tuple[int, ...] = ()
    """Search depths for the suites; empty: the asset's (1 2)."""
    openings: int | None = None
    """Openings per match, each played with both colours; None: the asset's (20)."""
    only: Only | None = None
    """Only the suites, or only the matches (and Elo)."""
    workers: int | None = None
    """Processes searching suites and playing match games at once; None: the evaluation's (one per
    core; --quick's suites one)."""


@dataclass(frozen=True)
class EvaluationResult:
    models: list[str]
    table: object
    """Arrow table: model, suite, metric, value, n (the headline figures)."""
    reports: Path


def trained_models(instance: dg.DagsterInstance) -> list[str]:
    from assets.training import MODELS

    return [m for m in MODELS if instance.get_latest_materialization_event(dg.AssetKey(m)) is not None]


def evaluate(store: Store, instance: dg.DagsterInstance, request: EvaluationRequest) -> EvaluationResult:
    """One Dagster run of the evaluation assets of the models asked for. SystemExit naming an
    unknown or untrained model, or why the run failed."""
    from assets.deepchess import MODEL as DEEPCHESS
    from assets.deepchess import PairsConfig, deepchess_assets
    from assets.evaluation import HEAD_TO_HEAD_MODELS, HeadToHeadConfig, MatchesConfig, SuitesConfig, evaluation_assets
    from assets.piece_values import PieceValuesEvalConfig, piece_values_assets
    from assets.training import MODELS
    from training.catalog import PIECE_VALUE_MODELS

    trained = trained_models(instance)
    names = list(request.models) or trained
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise SystemExit(f"chess-pipeline evaluate: no model {', '.join(unknown)}; known: {', '.join(MODELS)}")
    untrained = [n for n in names if n not in trained]
    if untrained or not names:
        raise SystemExit(
            f"chess-pipeline evaluate: not trained yet: {', '.join(untrained) or 'any model'} "
            f"(chess-pipeline train ...)"
        )
    quick = QUICK_EVALUATION if request.quick else {"suites": {}, "matches": {}, "head_to_head": {}}
    suites, matches, head = dict(quick["suites"]), dict(quick["matches"]), dict(quick["head_to_head"])
    if request.suites_dir:
        suites["suites_dir"] = str(Path(request.suites_dir).resolve())
    if request.depths:
        suites["depths"] = list(request.depths)
    if request.openings:
        matches["openings"] = head["openings"] = request.openings
        matches["time_openings"] = min(request.openings, 10)
    if request.workers is not None:
        suites["workers"] = matches["workers"] = request.workers
    ops = {}
    for m in names:
        if request.only != "matches":
            ops[f"eval_suites_{m}"] = SuitesConfig(**suites)
        if request.only != "suites":
            ops[f"eval_matches_{m}"] = MatchesConfig(**matches)
        if request.only != "matches" and m in PIECE_VALUE_MODELS:  # values per piece type, test error
            rows = QUICK_PIECE_VALUE_ROWS if request.quick else 0
            ops[f"eval_piece_values_{m}"] = PieceValuesEvalConfig(max_rows=rows)
        if request.only != "matches" and m == DEEPCHESS:  # Experiment 1 and the STS solution ranking
            ops[f"eval_pairs_{m}"] = PairsConfig(suites_dir=suites.get("suites_dir", ""))
    selection = [*ops, *(["elo_ratings"] if request.only != "suites" else []), *(f"eval_report_{m}" for m in names)]
    if request.only != "suites" and all(m in names for m in HEAD_TO_HEAD_MODELS):
        selection.append("eval_head_to_head")
        ops["eval_head_to_head"] = HeadToHeadConfig(**head)
    with run_bar(store, "evaluation_results", "evaluate", "step") as tags:
        result = materialize(
            [*evaluation_assets, *piece_values_assets, *deepchess_assets],
            store,
            instance,
            selection=selection,
            ops=ops,
            tags=tags,
        )
    require_success(result, "evaluation")
    duck.create_views(store)
    table = duck.query(
        store,
        "SELECT model, suite, metric, round(value, 4) AS value, n FROM evaluation_results "
        "WHERE model IN (SELECT unnest($models)) AND suite NOT LIKE '%/%' "
        "ORDER BY model, suite, metric",
        params={"models": names},
    )
    return EvaluationResult(names, table, store.root / "reports" / "evaluation")


def print_result(result: EvaluationResult) -> None:
    print_table(result.table, "table")
    print(f"reports: {result.reports}")


def cmd_evaluate(args: argparse.Namespace) -> None:
    if args.workers is not None and args.workers < 0:
        raise SystemExit(f"chess-pipeline evaluate: --workers must be 0 or more (0: one per core), got {args.workers}")
    store = open_store(args.home)
    instance = open_instance(store)
    request = EvaluationRequest(
        models=tuple(args.models),
        quick=args.quick,
        suites_dir=args.suites,
        depths=tuple(args.depths or ()),
        openings=args.openings,
        only=args.only,
        workers=args.workers,
    )
    print_result(evaluate(store, instance, request))


def add_parser(sub) -> None:
    from typing import get_args

    from assets.evaluation import MatchesConfig, SuitesConfig

    s = sub.add_parser("evaluate", help="test suites, matches and Elo of trained models (default: all trained)")
    s.add_argument("models", nargs="*", help="model assets to evaluate (default: every trained one)")
    add_field_flag(s, SuitesConfig, "suites_dir", "--suites", default=None, metavar="FOLDER")
    s.add_argument(
        "--quick", action="store_true", help="a first look: 100 positions a suite at 1 ply, 4 openings, fewer opponents"
    )
    # None: the asset's default (or --quick's), which the help names.
    add_field_flag(s, SuitesConfig, "depths", "--depths", type=int, nargs="+", default=None, metavar="DEPTH")
    add_field_flag(s, MatchesConfig, "openings", "--openings", default=None, metavar="N")
    s.add_argument("--only", choices=get_args(Only), help="run only the suites or only the matches (and Elo)")
    add_field_flag(
        s,
        SuitesConfig,
        "workers",
        "--workers",
        default=None,
        metavar="N",
        help="processes searching the suites and playing the match games at once (0: one per core this "
        "process may use; the results do not depend on it, but the fixed-time match's; default: one per core, "
        "--quick's suites one)",
    )
    s.set_defaults(func=cmd_evaluate)
