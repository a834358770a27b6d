"""`chess-pipeline reproduce`: the published tables on the shared data, in one resumable command.

Ingest every archive of the data folder (or those matching --archives), label every distinct
position of them (depth 8, reproducible, by default), then the assets of `reproduction_job`
one run each, upstream first: the datasets both ways, the models (both ways where the published
figures were measured on a split of their own data), the evaluation, and reports/reproduction.md.

Resuming: killed at any point, the same command continues. An archive whose partition was
ingested after its file last changed is not ingested again; labels label only the positions
without a label of the setting; an asset of the job is kept when its latest materialisation
was made by a reproduce run with the same settings (the `chess-pipeline/reproduce` run tag) and
after the last change of each of its inputs (for `labels`: the last run that labelled
something). Everything else, and everything downstream of it, runs. A step killed half-way
runs again from its start (a training run starts a new run folder).
"""

import argparse
import contextlib
import dataclasses
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import get_args

import dagster as dg

from cli.flags import add_field_flag, add_limit_flags, limit_from_args
from cli.runtime import failure_message, materialize, open_instance, open_store
from cli.train import add_override_flags, overrides_from_args
from pipeline.labels.uci import Limit
from pipeline.settings import from_namespace
from pipeline.store import duck
from pipeline.store.store import Store
from training.choices import Profile
from training.config import ScheduleOverrides

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
SETTINGS_TAG = "chess-pipeline/reproduce"
"""Run tag: the settings a reproduce run materialised an asset with (a change of them redoes it)."""


@dataclass(frozen=True)
class ReproduceConfig:
    data: str = str(SHARED / "pgn")
    """Folder of the archives to reproduce on (read in place, linked into the store)."""
    archives: str = "*"
    """Only the archives whose path under the data folder matches this glob (e.g. 'ficsgamesdb_2024*')."""
    suites: str = str(SHARED / "epd")
    """Folder of the EPD suites (STS, Kaufman)."""
    models: tuple[str, ...] = ()
    """Model assets to reproduce (empty: every model but mlp_search_regression, ours on searched positions)."""
    profile: Profile = "full"
    """Training profile: full (the published schedules) or quick (a few CPU minutes a model)."""
    label: Limit = Limit()
    """The label setting (--depth N, --nodes N, or --static: Stockfish's static evaluation, for a fast,
    small run); reproducible: a fresh hash for every position."""
    caps: ScheduleOverrides = ScheduleOverrides()
    """Bounds on every model's schedule (--max-epochs N, --max-train-rows N: ScheduleOverrides' epochs and
    max_train_rows), each a cap: a model gets the smaller of its profile's and this, never more; stated in
    the report."""
    hours: float = 0.0
    """Time budget in hours of run time (0: none): each model run trains at most an equal share of the
    training time left (pipeline.research.budget: what ingest, labels and datasets leave, less the evaluation's
    measured time), below its profile's bound; the report says where each model's training stopped. A
    command killed, or ended with failed steps, and run again with the same settings goes on with its budget."""
    new_budget: bool = False
    """With --hours: start a new time budget even where an earlier command with these settings left one open."""
    quick_eval: bool = False
    """The evaluation's quick settings (evaluate --quick: fewer suite positions at 1 ply, fewer openings, a
    small Lubeck grid)."""
    openings: int = 0
    """Openings per match, each played with both colours (0: the evaluation's; --quick-eval's fewer)."""
    workers: int = 0
    """Worker processes of ingest, engines of labels, processes of the evaluation's suite searches and match
    games (0: one per core)."""


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


STEP_KINDS = ("dataset", "model", "evaluation")
"""What a reproduce step makes, which decides the settings it is kept under (settings_text)."""


def settings_text(cfg: ReproduceConfig, kind: str) -> str:
    """The settings that decide what a step of this kind (STEP_KINDS) holds: a change of them
    redoes those steps, and what is downstream of them through their inputs' changes; a change of
    another kind's settings keeps them (a new --hours retrains, and keeps the datasets)."""
    label = cfg.label.slug
    if kind == "dataset":
        return f"labels={label}"
    if kind == "model":
        return (f"profile={cfg.profile} labels={label} {caps_text(cfg.caps)}") + (
            f" hours={cfg.hours:g}" if cfg.hours else ""
        )  # a budget changes what a model holds
    if kind == "evaluation":
        suites = Path(cfg.suites).expanduser().resolve()
        return f"eval={'quick' if cfg.quick_eval else 'full'} openings={cfg.openings} suites={suites}"
    raise ValueError(f"step kind must be one of {STEP_KINDS}, got {kind!r}")


def caps_text(caps: ScheduleOverrides) -> str:
    """The caps as a settings text: no cap written as before ScheduleOverrides (max_epochs=0, max_train_rows=-1),
    so a store's reproduce runs made then are kept; 0 train rows (no cap) the same as none."""
    return f"max_epochs={caps.epochs or 0} max_train_rows={caps.max_train_rows or -1}"


def step_kind(name: str) -> str:
    """The kind (STEP_KINDS) of the reproduction job's step `name`."""
    from assets.training import MODELS
    from pipeline.datasets.datasets import DATASETS
    from pipeline.research.reproduction import PUBLISHED_SPLIT

    base = name.removeprefix(PUBLISHED_SPLIT)
    if base in DATASETS:
        return "dataset"
    if base in MODELS or name == "model_results":
        return "model"
    return "evaluation"


def bounds_text(cfg: ReproduceConfig) -> str:
    """The run's bounds below the profile, in words (each model's resolved schedule: schedule_text)."""
    parts = []
    if cfg.caps.epochs:
        parts.append(f"at most {cfg.caps.epochs} epoch(s)")
    if cfg.caps.max_train_rows:
        parts.append(f"at most {cfg.caps.max_train_rows:,} train rows")
    if cfg.hours:
        parts.append(f"a time budget of {cfg.hours:g} h (each model run's share: where its training stopped, below)")
    return "; ".join(parts) or "none"


def train_run(cfg: ReproduceConfig, model: str, minutes: float = 0.0):
    """A model's TrainRunConfig: its profile's schedule (PROFILES and the model's own) under
    cfg.caps (ScheduleOverrides.cap: the smaller of the two, never raising it); `minutes` (> 0):
    its share of the time budget, a cap on the profile's max_minutes likewise. A field not capped
    is left out (the profile's)."""
    from assets.training import TrainRunConfig
    from training.catalog import schedule

    caps = dataclasses.replace(cfg.caps, max_minutes=minutes if minutes > 0 else None)
    capped = caps.cap(schedule(model, cfg.profile))
    return TrainRunConfig(profile=cfg.profile, device="auto", **{name: capped[name] for name in caps.given()})


def schedule_text(cfg: ReproduceConfig, model: str, minutes: float = 0.0) -> str:
    """A model's resolved schedule in words ('quick profile: at most 200,000 train rows, 4 epochs, 3 minutes');
    `minutes`: its share of the time budget (train_run)."""
    from assets.training import train_config

    t = train_config(model, train_run(cfg, model, minutes), "", "")
    rows = f"at most {t.max_train_rows:,} train rows" if t.max_train_rows else "every train row"
    limit = f", {t.max_minutes:g} minutes" if t.max_minutes else ""
    if minutes > 0:  # the run's share of --hours, or the profile's own bound where that is smaller
        own = t.max_minutes == minutes
        limit += " (its time budget share)" if own else f" (below its time budget share {minutes:g} min)"
    return f"{cfg.profile} profile: {rows}, at most {t.epochs} epoch(s){limit}"


def select_archives(cfg: ReproduceConfig) -> list[Path]:
    folder = Path(cfg.data).expanduser()
    if not folder.is_dir():
        raise SystemExit(f"chess-pipeline reproduce: {folder}: no such folder (give the archives' folder with --data)")
    suffixes = (".pgn", ".pgn.zst", ".pgn.bz2", ".pgn.gz")
    found = sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and p.name.endswith(suffixes) and p.relative_to(folder).match(cfg.archives)
    )
    if not found:
        raise SystemExit(
            f"chess-pipeline reproduce: no archive in {folder} matches --archives {cfg.archives!r} "
            f"(files ending {', '.join(suffixes)})"
        )
    return found


def check_models(models: tuple[str, ...]) -> list[str]:
    from assets.reproduce import REPRODUCED
    from assets.training import MODELS

    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise SystemExit(f"chess-pipeline reproduce: no model {', '.join(unknown)}; known: {', '.join(REPRODUCED)}")
    ours = [m for m in models if m not in REPRODUCED]
    if ours:
        datasets = sorted({MODELS[m].dataset for m in ours})
        raise SystemExit(
            f"chess-pipeline reproduce: {', '.join(ours)} {'is' if len(ours) == 1 else 'are'} not part of the "
            f"reproduction (trained on {', '.join(datasets)}, ours, with no published figure); label, build and "
            f"train with `chess-pipeline label --static`, `chess-pipeline datasets {datasets[0]}` and "
            f"`chess-pipeline train {ours[0]}`"
        )
    return list(models) or list(REPRODUCED)


def ingest_missing(
    store: Store, instance: dg.DagsterInstance, paths: list[Path], workers: int
) -> tuple[list[str], int]:
    """Link the archives and ingest those whose bytes are not the ones last ingested (the sha256
    the games run recorded; a run from before it recorded one: the file changed since); their
    keys and how many were ingested. A file touched, or copied again, with the same bytes is
    not ingested again, and so does not redo the datasets and models downstream."""
    from assets.records import GamesMetadata
    from cli import ingest
    from pipeline.ingest.ingest import IngestConfig

    keys = [store.add_archive(p) for p in paths]
    hashes = store.scan_archives().hashes
    todo = []
    for key, path in zip(keys, paths, strict=True):
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("games"), asset_partitions=[key]), limit=1
        ).records
        if not records:
            todo.append(key)
            continue
        meta = records[0].asset_materialization.metadata if records[0].asset_materialization else {}
        ingested = GamesMetadata.read(meta).sha256 if meta else None
        if ingested is not None:
            changed = ingested != hashes.get(key)
        else:  # ingested before the runs recorded the bytes' hash
            changed = records[0].timestamp < path.stat().st_mtime
        if changed:
            todo.append(key)
    print(f"ingest: {len(keys) - len(todo)} of {len(keys)} archives already ingested; {len(todo)} to ingest")
    if todo:
        result = ingest.ingest_archives(store, instance, todo, IngestConfig(workers=workers))
        if result.failures:
            key, why = result.failures[0]
            raise SystemExit(f"chess-pipeline reproduce: ingest of {key} failed: {why}")
    return keys, len(todo)


def changed_at(instance: dg.DagsterInstance, key: str) -> float | None:
    """When an input last changed: its latest materialisation; for labels, the latest run that
    labelled something (a run with nothing pending changes nothing)."""
    if key == "labels":
        for r in instance.fetch_materializations(dg.AssetKey("labels"), limit=200).records:
            meta = r.asset_materialization.metadata if r.asset_materialization else {}
            labelled = getattr(meta.get("labelled"), "value", 0) or 0
            if labelled:
                return r.timestamp
        return None
    event = instance.get_latest_materialization_event(dg.AssetKey(key))
    return None if event is None else event.timestamp


def made_with(instance: dg.DagsterInstance, name: str, settings: str):
    """The latest materialisation event of asset `name` when a reproduce command with these
    settings made it, else None."""
    event = instance.get_latest_materialization_event(dg.AssetKey(name))
    if event is None:
        return None
    run = instance.get_run_by_id(event.run_id)
    if run is None or run.tags.get(SETTINGS_TAG) != settings:
        return None
    return event


def up_to_date(instance: dg.DagsterInstance, asset: dg.AssetsDefinition, name: str, settings: str) -> str | None:
    """Why the asset's latest materialisation can be kept, or None when it must run."""
    event = made_with(instance, name, settings)
    if event is None:
        return None
    for dep in asset.asset_deps.get(dg.AssetKey(name), set()):
        t = changed_at(instance, dep.to_user_string())
        if t is not None and t >= event.timestamp:
            return None
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(event.timestamp))


def op_configs(cfg: ReproduceConfig, names: list[str], settings: dict[str, str], models: list[str]) -> dict:
    """Each asset's run config."""
    from assets.datasets import CONFIGS
    from assets.deepchess import PairsConfig
    from assets.evaluation import HeadToHeadConfig, MatchesConfig, SuitesConfig
    from assets.piece_values import PieceValuesEvalConfig
    from assets.reproduce import LUBECK_GRID, REPORT, ReportConfig, split_config
    from assets.training import MODELS
    from cli.datasets import takes_labels
    from cli.evaluate import QUICK_EVALUATION, QUICK_PIECE_VALUE_ROWS
    from pipeline.datasets.datasets import DATASETS
    from pipeline.research.reproduction import PUBLISHED_SPLIT

    label = {"label_kind": cfg.label.kind, "label_value": cfg.label.value}
    quick = QUICK_EVALUATION if cfg.quick_eval else {"suites": {}, "matches": {}, "head_to_head": {}}
    matches, head = dict(quick["matches"]), dict(quick["head_to_head"])
    if cfg.openings:
        matches.update(openings=cfg.openings, time_openings=min(cfg.openings, 10))
        head["openings"] = cfg.openings
    suites = str(Path(cfg.suites).expanduser().resolve())
    processes = {"workers": cfg.workers} if cfg.workers else {}  # 0: the evaluation's own (one per core)
    ops = {}
    for n in names:
        base = n.removeprefix(PUBLISHED_SPLIT)
        if base in DATASETS:
            cls = split_config(base) if n.startswith(PUBLISHED_SPLIT) else CONFIGS[base]
            ops[n] = cls(**(label if takes_labels(base) else {}))
        elif base in MODELS:
            ops[n] = train_run(cfg, base)
        elif n.startswith("eval_suites_"):
            ops[n] = SuitesConfig(**{**quick["suites"], "suites_dir": suites, **processes})
        elif n.startswith("eval_matches_"):
            ops[n] = MatchesConfig(**{**matches, **processes})
        elif n.startswith("eval_pairs_"):
            ops[n] = PairsConfig(suites_dir=suites)
        elif n.startswith("eval_piece_values_"):
            ops[n] = PieceValuesEvalConfig(max_rows=QUICK_PIECE_VALUE_ROWS if cfg.quick_eval else 0)
        elif n == "eval_head_to_head":
            ops[n] = HeadToHeadConfig(**head)
        elif n == REPORT:
            ops[n] = ReportConfig(
                settings=settings, models=models, schedules={m: schedule_text(cfg, m) for m in models}
            )
        elif n == LUBECK_GRID and cfg.quick_eval:
            from assets.lubeck_grid import LubeckGridConfig
            from pipeline.play.lubeck_grid import QUICK_GRID

            ops[n] = LubeckGridConfig(**QUICK_GRID)
    return ops


def will_run(
    instance: dg.DagsterInstance,
    cfg: ReproduceConfig,
    defs: dict[str, dg.AssetsDefinition],
    names: list[str],
    deps_of: dict[str, set[str]],
) -> list[str]:
    """The steps of `names` (in order) that the step loop will run rather than keep: a step runs
    when it is not up to date now, or when a step upstream of it in `names` runs (its input then
    changes, so up_to_date no longer keeps it when its turn comes); the report always runs."""
    from assets.reproduce import REPORT

    runs: set[str] = set()
    for name in names:
        if name == REPORT or deps_of[name] & runs:
            runs.add(name)
        elif not up_to_date(instance, defs[name], name, settings_text(cfg, step_kind(name))):
            runs.add(name)
    return [n for n in names if n in runs]


def to_go_text(instance: dg.DagsterInstance, cfg: ReproduceConfig, left: list[str], budget, elapsed: float) -> str:
    """What a finished step's line adds: the steps still to run (`left`), once no model run is
    among them how long they should take (the time budget's reserve rule: this store's earlier
    time for each, else its kind's measured figure), and with --hours the budget spent so far."""
    if not left:
        return ""
    out = f"; {len(left)} step{'s' if len(left) > 1 else ''} to go"
    if not any(trains(n) for n in left):
        try:
            minutes = evaluation_reserve_of(instance, cfg, left).seconds / 60
            out += f", about {minutes:.{0 if minutes >= 10 else 1}f} min by the measured figures"
        except ValueError:  # a step no figure covers (a dataset, before training): no estimate
            pass
    if budget is not None:
        out += f"; {elapsed / 60:.1f} of the {budget.hours:g} h budget's {budget.seconds / 60:.0f} min spent"
    return out


def trains(name: str) -> bool:
    """Whether step `name` is a model run (one that takes a share of the time budget)."""
    return step_kind(name) == "model" and name != "model_results"


def blocked_by(name: str, failed: dict[str, str], deps_of: dict[str, set[str]]) -> bool:
    """Whether step `name` will be skipped because a step upstream of it (through the steps of
    `deps_of`) has failed or been skipped, the others succeeding."""
    return any(d in failed or (d in deps_of and blocked_by(d, failed, deps_of)) for d in deps_of[name])


def run_seconds(instance: dg.DagsterInstance, name: str, settings: str) -> float | None:
    """How long the run took (start to end, Dagster's own time included, as the budget counts it)
    that made step `name` last, when a reproduce command with these settings made it; else None."""
    event = made_with(instance, name, settings)
    record = None if event is None else instance.get_run_record_by_id(event.run_id)
    if record is None or record.start_time is None or record.end_time is None:
        return None
    return record.end_time - record.start_time


def evaluation_reserve_of(instance: dg.DagsterInstance, cfg: ReproduceConfig, names: list[str]):
    """The time budget's reserve (pipeline.research.budget rule 2) for the steps of `names` (those that will
    run) after training, model_results on: what each took here last time with these settings, else
    its kind's measured figure."""
    from pipeline.research.budget import evaluation_reserve

    last = max((i for i, n in enumerate(names) if trains(n)), default=-1)
    after = names[last + 1 :]
    timed = {}
    for n in after:
        seconds = run_seconds(instance, n, settings_text(cfg, step_kind(n)))
        if seconds is not None:
            timed[n] = seconds
    return evaluation_reserve(after, timed, "quick" if cfg.quick_eval else "full")


def defined_assets() -> dict[str, dg.AssetsDefinition]:
    """{asset key: its definition} of the code location the CLI runs (assets.definitions)."""
    from assets.definitions import build_defs

    return {k.to_user_string(): a for a in build_defs().assets or [] for k in getattr(a, "keys", ())}


def run_steps(
    store: Store,
    instance: dg.DagsterInstance,
    cfg: ReproduceConfig,
    models: list[str],
    settings: dict,
    outcomes: dict[str, str] | None = None,
    started: float | None = None,
    ledger=None,
) -> list[str]:
    """The job's assets one run each, upstream first, keeping what is up to date; the failures.
    `outcomes` (step -> done, kept, failed: why, skipped: why) gains each step's, and the report
    is given them (with those of the steps before the job: ingest and labels). With --hours, each
    model run gets its share of the time budget (pipeline.research.budget) counted from `started` (the
    command's time.monotonic(); default: now), or from `ledger` (pipeline.research.budget.BudgetLedger:
    the budget earlier commands with the same settings began, saved after each step), and the
    report the budget's figures."""
    from assets.reproduce import REPORT, ReportConfig, grid_extra, job_assets
    from pipeline.research.budget import MIN_MINUTES, TimeBudget
    from pipeline.research.reproduction import PUBLISHED_SPLIT

    outcomes = {} if outcomes is None else outcomes
    defs = defined_assets()
    names = job_assets(models, grid_extra(models))
    ops = op_configs(cfg, names, settings, models)
    failed: dict[str, str] = {}
    started = time.monotonic() if started is None else started
    if ledger is not None:
        budget, elapsed = ledger.budget, ledger.elapsed
    else:
        budget = TimeBudget(cfg.hours) if cfg.hours else None

        def elapsed() -> float:
            return time.monotonic() - started

    schedules: dict[str, str] = {}  # model run -> its schedule with its share of the budget
    deps_of = {n: {d.to_user_string() for d in defs[n].asset_deps.get(dg.AssetKey(n), set())} for n in names}
    runs = set(will_run(instance, cfg, defs, names, deps_of))
    training = {n for n in runs if trains(n)}
    for i, name in enumerate(names, 1):
        asset = defs[name]
        head = f"[{i}/{len(names)}] {name}"
        blocked = sorted(deps_of[name] & failed.keys())
        if blocked and name != REPORT:
            failed[name] = f"skipped: {blocked[0]} failed"
            outcomes[name] = failed[name]
            print(f"{head}: skipped ({blocked[0]} failed)", flush=True)
            continue
        fingerprint = settings_text(cfg, step_kind(name))
        kept = None if name == REPORT else up_to_date(instance, asset, name, fingerprint)
        if kept:
            outcomes[name] = "kept"
            print(f"{head}: kept (up to date, made {kept})", flush=True)
            continue
        if budget is not None and name in training:
            base = name.removeprefix(PUBLISHED_SPLIT)
            # The model runs still to come that will train: not kept, not skipped by a failure so far.
            to_come = [n for n in names[i - 1 :] if n in training and not blocked_by(n, failed, deps_of)]
            reserve = None
            if budget.training_from is None:  # the first model run: set the evaluation's time aside
                reserve = evaluation_reserve_of(instance, cfg, [n for n in names if n in runs])
            with ledger.changing() if ledger is not None else contextlib.nullcontext():
                minutes = budget.model_minutes(name, elapsed(), len(to_come), reserve)
            if reserve is not None and budget.training_seconds < len(to_come) * MIN_MINUTES * 60:
                print(
                    f"time budget {cfg.hours:g} h: {budget.training_seconds / 60:.1f} min are left for "
                    f"{len(to_come)} model runs after {reserve.text()}, so each gets the least, {MIN_MINUTES:g} min, "
                    "and the command will end over its budget (give more --hours, or --quick-eval)",
                    flush=True,
                )
            ops[name] = train_run(cfg, base, minutes)
            schedules[name] = schedule_text(cfg, base, minutes)
            print(f"{head}: time budget share {minutes:g} min", flush=True)
        if name == REPORT:
            report = ops[name].model_dump()
            report["schedules"] = {**report["schedules"], **schedules}
            if budget is not None:
                text = budget.text(elapsed())
                if ledger is not None and ledger.commands > 1:
                    text += f"; counted over {ledger.commands} commands (a command run again goes on with the budget)"
                report["settings"] = {**report["settings"], "time budget": text}
            ops[name] = ReportConfig(**{**report, "outcomes": dict(outcomes)})
        print(f"{head}: running ...", flush=True)
        start = time.monotonic()
        result = materialize(
            [asset],
            store,
            instance,
            selection=[name],
            ops={name: ops[name]} if name in ops else None,
            tags={SETTINGS_TAG: fingerprint, "chess-pipeline/job": "reproduction_job"},
        )
        took = time.monotonic() - start
        if budget is not None and name in budget.shares:
            with ledger.changing() if ledger is not None else contextlib.nullcontext():
                budget.finished(name, took)
        if ledger is not None:
            save_ledger(ledger)
        if result.success:
            outcomes[name] = "done"
            said = f"done in {took:.1f} s"
        else:
            failed[name] = failure_message(result)
            outcomes[name] = f"failed: {failed[name]}"
            said = f"failed after {took:.1f} s: {failed[name]}"
        # The steps still to run: those that will not be kept, less those a failure will skip.
        left = [n for n in names[i:] if n in runs and (n == REPORT or not blocked_by(n, failed, deps_of))]
        print(f"{head}: {said}{to_go_text(instance, cfg, left, budget, elapsed())}", flush=True)
    return [f"{n}: {why}" for n, why in failed.items() if not why.startswith("skipped")]


def reproduce(store: Store, instance: dg.DagsterInstance, cfg: ReproduceConfig) -> list[str]:
    """Ingest, labels, then the job's assets; the failed steps (empty: all done)."""
    from pipeline.research.budget import LEDGER_DIR, BudgetLedger, ledger_name

    started = time.monotonic()  # the time budget (--hours) counts from here, or goes on (BudgetLedger)
    models = check_models(cfg.models)  # a bad setting is said before a budget is opened or saved
    paths = select_archives(cfg)
    if not Path(cfg.suites).expanduser().is_dir():
        raise SystemExit(f"chess-pipeline reproduce: {cfg.suites}: no such folder (give the EPD suites with --suites)")
    ledger = None
    if cfg.hours:
        key = budget_key(cfg)
        ledger = BudgetLedger.open(store.root / LEDGER_DIR / ledger_name(key), key, cfg.hours, new=cfg.new_budget)
        if ledger.commands > 1:
            print(
                f"time budget {cfg.hours:g} h: going on with the budget of {ledger.commands - 1} earlier command(s) "
                f"with these settings, {ledger.spent_before / 60:.1f} min spent (--new-budget starts afresh)",
                flush=True,
            )
        save_ledger(ledger)
    failures: list[str] | None = None  # None: stopped before the end
    try:
        with ledger.heartbeat(warn=warn) if ledger is not None else contextlib.nullcontext():
            failures = _reproduce(store, instance, cfg, models, paths, started, ledger)
    finally:  # failed steps, or stopped: the command run again goes on with the budget
        if ledger is not None:
            save_ledger(ledger, finished=failures == [])
    if ledger is not None:
        took = ledger.elapsed()
        verdict = "within it" if took <= cfg.hours * 3600 else f"over it by {(took - cfg.hours * 3600) / 60:.1f} min"
        so_far = f", {took / 60:.1f} min over {ledger.commands} commands" if ledger.commands > 1 else ""
        this = (time.monotonic() - started) / 60
        print(f"time budget {cfg.hours:g} h: the command took {this:.1f} min{so_far}, {verdict}")
    return failures


def budget_key(cfg: ReproduceConfig) -> str:
    """The settings a time budget belongs to: a command with other settings starts a new one. The
    same settings written otherwise are the same (a relative folder, the models' order, 0 train
    rows or none); the workers and --new-budget are not settings of what is made."""
    key = {k: v for k, v in asdict(cfg).items() if k not in ("workers", "new_budget")}
    key.update(
        data=str(Path(cfg.data).expanduser().resolve()),
        suites=str(Path(cfg.suites).expanduser().resolve()),
        models=sorted(check_models(cfg.models)),
        max_epochs=cfg.caps.epochs or 0,  # the key as before ScheduleOverrides: a budget left open then goes on
        max_train_rows=cfg.caps.max_train_rows or 0,
    )
    del key["caps"]
    return json.dumps(key, sort_keys=True)


def warn(message: str) -> None:
    print(f"chess-pipeline reproduce: {message}", file=sys.stderr, flush=True)


def save_ledger(ledger, finished: bool = False) -> None:
    """Save the budget's ledger; a store that refuses it is said in one line, and the command goes on."""
    if not ledger.save(finished=finished):
        warn(f"the time budget's ledger {ledger.path} could not be saved ({ledger.save_error})")


def _reproduce(
    store: Store,
    instance: dg.DagsterInstance,
    cfg: ReproduceConfig,
    models: list[str],
    paths: list[Path],
    started: float,
    ledger,
) -> list[str]:
    from assets.ingest import duckdb_views
    from assets.labels import LabelsConfig
    from assets.resources import StockfishResource
    from cli import label

    keys, ingested = ingest_missing(store, instance, paths, cfg.workers)
    materialize([duckdb_views], store, instance)
    setting = LabelsConfig.of(cfg.label, archives=keys)
    labelled = label.label(store, instance, setting, StockfishResource(workers=cfg.workers))
    label.print_result(labelled)
    if ledger is not None:
        save_ledger(ledger)
    outcomes = {
        "archive_tables": "done" if ingested else "kept",
        "labels": "done" if labelled.metadata.labelled else "kept",
    }
    settings = {
        "archives": f"{len(keys)} ({cfg.archives!r} in {cfg.data})",
        "labels": ("Stockfish static evaluation" if cfg.label.kind == "static" else f"Stockfish {cfg.label}")
        + ", reproducible setting (fresh hash each position)",
        "profile": cfg.profile,
        "bounds": bounds_text(cfg),
        "evaluation": ("quick (evaluate --quick settings)" if cfg.quick_eval else "full")
        + (f", {cfg.openings} openings a match" if cfg.openings else ""),
        "suites": cfg.suites,
        "models": ", ".join(models),
    }
    failures = run_steps(store, instance, cfg, models, settings, outcomes, started, ledger)
    duck.create_views(store)
    return failures


def cmd_reproduce(args: argparse.Namespace) -> None:
    flagged = [f.name for f in fields(ReproduceConfig) if f.name not in ("models", "label", "caps")]
    label = limit_from_args(args, "reproduce", ReproduceConfig.label)  # refused in one line before any store work
    caps = overrides_from_args(args, "reproduce", CAP_FLAGS)  # likewise
    cfg = from_namespace(ReproduceConfig, args, flagged, models=tuple(args.models), label=label, caps=caps)
    check_config(cfg)  # before a store is made
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
        "models", nargs="*", help="model assets to reproduce (default: every model but mlp_search_regression)"
    )
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
