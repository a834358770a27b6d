"""The reproduction job's steps (assets.reproduce.job_assets), one Dagster run each, upstream first.

run_steps runs them in turn: a step is kept when a reproduce run with the same settings made it
after the last change of each of its inputs (up_to_date: the step's record in the store,
pipeline.research.step_records, so a second machine on the same store keeps it too, with what the
report reads of it, kept as it finishes: step_finished; for a step made before the records, the
instance's SETTINGS_TAG run tag), skipped when
a step upstream failed, else run with its run config (op_configs); with --hours each model run
gets its share of the time budget (pipeline.research.budget) and the ledger is saved after each
step; each finished step's line says what is left to run and for how long (to_go_text).
"""

import contextlib
import sys
import time
from pathlib import Path

import dagster as dg

from assets.shared import RUN_FOLDER_TAG
from cli.reproduce_config import ReproduceConfig, schedule_text, settings_text, step_kind, train_run
from cli.runtime import failure_message, materialize
from pipeline.research import step_records
from pipeline.store.store import Store

SETTINGS_TAG = "chess-pipeline/reproduce"
"""Run tag: the settings a reproduce run materialised an asset with (a change of them redoes it)."""
STORE_STEP = {
    "games": "archive_tables",
    "positions": "archive_tables",
    "rejected_games": "archive_tables",
    "position_book": "archive_tables",
}
"""The reproduce step whose record in the store says when an input that is not a step of its own changed."""


def changed_at(instance: dg.DagsterInstance, key: str, store: Store | None = None) -> float | None:
    """When an input last changed: the later of its latest materialisation in this instance (for
    labels, the latest run that labelled something: a run with nothing pending changes nothing)
    and, with the store, when a reproduce step that made it last finished (its record there)."""
    times = [instance_changed_at(instance, key)]
    if store is not None:
        record = step_records.read_record(store.root, STORE_STEP.get(key, key))
        times.append(record.made_at if record is not None else None)
    known = [t for t in times if t is not None]
    return max(known) if known else None


def instance_changed_at(instance: dg.DagsterInstance, key: str) -> float | None:
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


def inputs_of(asset: dg.AssetsDefinition, name: str) -> list[str]:
    return sorted(d.to_user_string() for d in asset.asset_deps.get(dg.AssetKey(name), set()))


def up_to_date(
    instance: dg.DagsterInstance, asset: dg.AssetsDefinition, name: str, settings: str, store: Store | None = None
) -> str | None:
    """When the step was made, where it can be kept, else None (it must run). Its record in the
    store where it has one (made with these settings, no input changed since it began); else,
    for a step made before the records, its latest materialisation in this instance (made by a
    reproduce run with these settings after each input's last change)."""
    record = None if store is None else step_records.read_record(store.root, name)
    if record is not None:
        if not record.finished or record.settings != settings:
            return None
        for dep in inputs_of(asset, name):
            t = changed_at(instance, dep, store)
            made_from = record.inputs.get(dep)
            if t is not None and t > (made_from if made_from is not None else record.made_at):
                return None
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(record.made_at))
    event = made_with(instance, name, settings)
    if event is None:
        return None
    for dep in inputs_of(asset, name):
        t = changed_at(instance, dep, store)
        if t is not None and t >= event.timestamp:
            return None
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(event.timestamp))


def op_configs(cfg: ReproduceConfig, names: list[str], settings: dict[str, str], models: list[str]) -> dict:
    """Each asset's run config."""
    from assets.datasets import CONFIGS
    from assets.deepchess import PairsConfig
    from assets.evaluation import HeadToHeadConfig, MatchesConfig, SuitesConfig
    from assets.piece_values import PieceValuesEvalConfig
    from assets.reproduce import LUBECK_GRID, REPORT, ReportConfig, split_config, stage_configs
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
    return stage_configs(ops, cfg.with_stages, cfg.quick_eval, cfg.workers, cfg.openings)  # TD steps, suite depths


def will_run(
    instance: dg.DagsterInstance,
    cfg: ReproduceConfig,
    defs: dict[str, dg.AssetsDefinition],
    names: list[str],
    deps_of: dict[str, set[str]],
    store: Store | None = None,
) -> list[str]:
    """The steps of `names` (in order) that the step loop will run rather than keep: a step runs
    when it is not up to date now, or when a step upstream of it in `names` runs (its input then
    changes, so up_to_date no longer keeps it when its turn comes); the report always runs."""
    from assets.reproduce import REPORT

    runs: set[str] = set()
    for name in names:
        if name == REPORT or deps_of[name] & runs:
            runs.add(name)
        elif not up_to_date(instance, defs[name], name, settings_text(cfg, step_kind(name)), store=store):
            runs.add(name)
    return [n for n in names if n in runs]


def to_go_text(
    instance: dg.DagsterInstance, cfg: ReproduceConfig, left: list[str], budget, elapsed: float, store=None
) -> str:
    """What a finished step's line adds: the steps still to run (`left`), once no model run is
    among them how long they should take (the time budget's reserve rule: this store's earlier
    time for each, else its kind's measured figure), and with --hours the budget spent so far."""
    if not left:
        return ""
    out = f"; {len(left)} step{'s' if len(left) > 1 else ''} to go"
    if not any(trains(n) for n in left):
        try:
            minutes = evaluation_reserve_of(instance, cfg, left, store).seconds / 60
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


def run_seconds(instance: dg.DagsterInstance, name: str, settings: str, store: Store | None = None) -> float | None:
    """How long the run took (start to end, Dagster's own time included, as the budget counts it)
    that made step `name` last, when a reproduce command with these settings made it; else, with
    the store, what the step's record there says it took with these settings; else None."""
    event = made_with(instance, name, settings)
    record = None if event is None else instance.get_run_record_by_id(event.run_id)
    if record is None or record.start_time is None or record.end_time is None:
        kept = None if store is None else step_records.read_record(store.root, name)
        if kept is not None and kept.finished and kept.settings == settings:
            return kept.seconds
        return None
    return record.end_time - record.start_time


def evaluation_reserve_of(instance: dg.DagsterInstance, cfg: ReproduceConfig, names: list[str], store=None):
    """The time budget's reserve (pipeline.research.budget rule 2) for the steps of `names` (those that will
    run) after training, model_results on: what each took here last time with these settings, else
    its kind's measured figure."""
    from pipeline.research.budget import evaluation_of, evaluation_reserve

    last = max((i for i, n in enumerate(names) if trains(n)), default=-1)
    after = names[last + 1 :]
    timed = {}
    for n in after:
        seconds = run_seconds(instance, n, settings_text(cfg, step_kind(n)), store)
        if seconds is not None:
            timed[n] = seconds
    return evaluation_reserve(after, timed, evaluation_of(cfg.quick_eval, cfg.with_stages))


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
    names = job_assets(models, grid_extra(models), cfg.with_stages)
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
    runs = set(will_run(instance, cfg, defs, names, deps_of, store))
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
        kept = None if name == REPORT else up_to_date(instance, asset, name, fingerprint, store=store)
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
                reserve = evaluation_reserve_of(instance, cfg, [n for n in names if n in runs], store)
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
        inputs = {d: changed_at(instance, d, store) for d in inputs_of(asset, name)}  # what it is made from
        tags = {SETTINGS_TAG: fingerprint, "chess-pipeline/job": "reproduction_job"}
        folder = ""
        if trains(name):  # a run killed half-way trains on in its own folder
            folder = tags[RUN_FOLDER_TAG] = step_records.run_folder(store.root, name, fingerprint, inputs)
        print(f"{head}: running ...", flush=True)
        start = time.monotonic()
        result = materialize(
            [asset],
            store,
            instance,
            selection=[name],
            ops={name: ops[name]} if name in ops else None,
            tags=tags,
        )
        took = time.monotonic() - start
        if budget is not None and name in budget.shares:
            with ledger.changing() if ledger is not None else contextlib.nullcontext():
                budget.finished(name, took)
        if ledger is not None:
            save_ledger(ledger)
        if result.success:
            if name != REPORT:
                step_finished(store, instance, name, fingerprint, inputs, took, folder)
            outcomes[name] = "done"
            said = f"done in {took:.1f} s"
        else:
            failed[name] = failure_message(result)
            outcomes[name] = f"failed: {failed[name]}"
            said = f"failed after {took:.1f} s: {failed[name]}"
        # The steps still to run: those that will not be kept, less those a failure will skip.
        left = [n for n in names[i:] if n in runs and (n == REPORT or not blocked_by(n, failed, deps_of))]
        print(f"{head}: {said}{to_go_text(instance, cfg, left, budget, elapsed(), store)}", flush=True)
    return [f"{n}: {why}" for n, why in failed.items() if not why.startswith("skipped")]


def step_finished(
    store: Store,
    instance: dg.DagsterInstance,
    name: str,
    settings: str,
    inputs: dict[str, float | None],
    seconds: float,
    folder: str = "",
) -> None:
    """Record step `name` finished in the store (step_records.finished), then keep there what the
    report reads of its making (assets.reproduce.made_of), now rather than when the report runs:
    a command killed between the two leaves a step another machine keeps (its instance never made
    it) and whose report row would otherwise be missing."""
    from assets.reproduce import made_of

    step_records.finished(store.root, name, settings, inputs, seconds, folder=folder)
    made_of(instance, store, name)


def warn(message: str) -> None:
    print(f"chess-pipeline reproduce: {message}", file=sys.stderr, flush=True)


def save_ledger(ledger, finished: bool = False) -> None:
    """Save the budget's ledger; a store that refuses it is said in one line, and the command goes on."""
    if not ledger.save(finished=finished):
        warn(f"the time budget's ledger {ledger.path} could not be saved ({ledger.save_error})")
