"""The reproduction: every published table on the store's data, on both split protocols.

`reproduction_job` selects the unpartitioned assets from the datasets to the report: every
dataset as ours (by game, leakage guard) and as published (`published_split_<dataset>`:
positions split one by one, no guard), every model trained on each (the published-split copies
for the models whose published figures were measured on a split of their own data:
pipeline.research.published.SPLIT_MODELS), the evaluation (suites, matches, Elo, head to head,
DeepChess's pairs, the piece values; the pairs and piece values of the copies too),
`model_results` and `reproduction_report`
(reports/reproduction.md: each published figure beside ours, with n and the protocol, how long
each step took, and the pictures). Ingest (partitioned by archive) and labels (by shard) run
before it as their own runs: `chess-pipeline reproduce` runs all of it, resumably.
"""

import base64
import json
import operator
import re
import time
from dataclasses import asdict, dataclass
from functools import reduce

import dagster as dg
from pydantic import Field

from assets.config import DescribedConfig
from assets.datasets import CONFIGS, _results
from assets.datasets import GROUP as DATASETS_GROUP
from assets.evaluation import HEAD_TO_HEAD_MODELS
from assets.lubeck_grid import lubeck_grid
from assets.resources import StoreResource
from assets.shared import COMMAND_TAG, MODEL_TAG, MODELS_GROUP, SPLIT_MODELS, report_dir
from assets.shared import EVALUATION_GROUP as EVAL_GROUP
from assets.shared import REPRODUCTION_GROUP as GROUP
from assets.training import MODELS, TrainRunConfig, train_and_record
from pipeline.datasets.datasets import DATASETS, build_dataset
from pipeline.research import published, step_records
from pipeline.research.published import DEEPCHESS_MODEL, TD_MODEL, OptionalStage
from pipeline.research.reproduction import ReportInputs, Step, on_published_split, ours_from_store, render
from pipeline.store import storage
from pipeline.store.store import Store
from pipeline.store.store_files import atomic_path, read_json, write_json
from training.catalog import PIECE_VALUE_MODELS
from training.td.config import TDConfig, TDEvaluation

REPORT = "reproduction_report"
LUBECK_GRID = "lubeck_grid"
"""Lubeck's experiment grid (assets.lubeck_grid; reports/lubeck_grid.md): in the job when its model is."""


def published_split_store(store: Store) -> Store:
    """Where the published-split copies of the datasets live: a store of their own under the
    main one (<store>/reproduction/published_split/datasets/<name>/), so the datasets and the
    training loop read them as any dataset; their positions and labels are the main store's."""
    return Store(store.root / "reproduction" / "published_split")


def split_config(name: str) -> type:
    """The dataset's run config with the published protocol as its defaults."""
    base = CONFIGS[name]
    return type(
        f"{base.__name__}PublishedSplit",
        (base,),
        {
            "__annotations__": {"split_by": base.model_fields["split_by"].annotation, "leakage_guard": bool},
            "split_by": Field(default="position", description=base.model_fields["split_by"].description),
            "leakage_guard": Field(default=False, description=base.model_fields["leakage_guard"].description),
            "__doc__": f"{base.__doc__}\n\nDefaults: the published protocol (split by position, no leakage guard).",
            "__module__": __name__,
        },
    )


def split_dataset_asset(name: str) -> dg.AssetsDefinition:
    spec = DATASETS[name]
    key = on_published_split(name)
    checks = [
        dg.AssetCheckSpec(c, asset=key)
        for c in ("disjoint_splits", "class_balance", "label_coverage", "rows_per_split")
    ]

    @dg.asset(
        name=key,
        group_name=GROUP,
        deps=["games", "positions"] + (["labels"] if spec.labelled else []),
        check_specs=checks,
        description=f"{name} split as published (positions one by one, no leakage guard), for comparing "
        f"with the published figures; files under reproduction/published_split/datasets/{name}/. "
        "disjoint_splits fails by design: that is the leak the published figures had.",
    )
    def _dataset(context: dg.AssetExecutionContext, config: split_config(name), store: StoreResource):
        st = store.get()
        stats = build_dataset(st, name, config.params(), config.split(), out=published_split_store(st))
        context.log.info(f"{key}: rows {stats.rows}; test keys also in train: {stats.overlap.get('train/test', 0):,}")
        yield from _results(name, stats)

    return _dataset


def split_model_asset(name: str) -> dg.AssetsDefinition:
    from pipeline.datasets.datasets import dataset_problem

    m = MODELS[name]
    key = on_published_split(name)

    @dg.asset(
        name=key,
        group_name=GROUP,
        deps=[on_published_split(m.dataset)],
        description=f"{name} trained and tested on {m.dataset}'s published split (no leakage guard): "
        f"ours on the published protocol ({published.anchor(name) or m.anchor}).",
    )
    def _model(context: dg.AssetExecutionContext, config: TrainRunConfig, store: StoreResource):
        st = store.get()
        split_store = published_split_store(st)
        problem = dataset_problem(split_store, m.dataset)
        if problem:
            raise ValueError(f"{key}: {problem.replace('chess-pipeline datasets', 'chess-pipeline reproduce')}")
        return train_and_record(
            context,
            config,
            st,
            name,
            key,
            split_store,
            on_published_split(m.dataset),
            published.anchor(name) or m.anchor,
        )

    return _model


UNPUBLISHED = [n for n, spec in DATASETS.items() if spec.search or not spec.published]
"""Datasets of ours with no published counterpart (DatasetSpec.published: the searched sets, on
static labels only, and deepchess_scored): neither split as published nor in the reproduction's job."""
REPRODUCED = [m for m in MODELS if MODELS[m].dataset not in UNPUBLISHED]
"""The models the reproduction trains and evaluates: every model asset but those of an UNPUBLISHED
dataset (mlp_search_regression, mlp_bitmap_3class_search, deepchess_scored_net: trained and
evaluated by `chess-pipeline train` and `evaluate`)."""
NOT_REPRODUCED = [m for m in MODELS if m not in REPRODUCED]
PUBLISHED_MODELS = [m for m in REPRODUCED if m in published.SPLIT_MODELS]
"""The models with a published figure (pipeline.research.published.SPLIT_MODELS): the default
selection. The others (mlp_material_3class, mlp_counts_3class, cnn_bitmap_3class_regularised,
cnn_features_3class_regularised, mlp_bitmap_15class_regularised, mlp_bitmap_20class_regularised,
mlp_bitmap_regression_regularised, piece_value_net_result: ours, no published figure) run with the
optional stage `ours` (OptionalStage), or when named."""
OURS_STEPS = ("eval_matches_", "eval_head_to_head", "elo_ratings", "eval_report_")
"""The steps (names, or prefixes of a model's steps) of the optional stage `ours` only: the matches, the
Elo they give and each model's evaluation page; no published figure reads them."""
TD_STEPS = (TD_MODEL, "td_evaluation")
"""Hui's TD learner: its line's generations, then the published check of its last checkpoint."""
PUBLISHED_DEPTHS = [1]
"""The suites' search depths the published figures read (1-ply: Kaufman's test, DeepChess's STS
points); `ours` adds the evaluation's deeper ones (SuitesConfig.depths)."""
TD_LINE = TDConfig(name="reproduction", generations=8, curve_games=0)
"""Hui's TD learner as the reproduction plays it: TDConfig's published settings (TD-Leaf, linear,
lambda 0.7, learning rate 0.01, depth 2, 20 games a generation), 8 generations (160 games:
21 s a generation on this 2-core machine, two processes at load 3.6: the published number of
self-play games is not recorded here, and this is what fits the one-sitting budget beside the
check's 10 minutes), no learning-curve games (no published figure reads them)."""
TD_QUICK_LINE = TDConfig(name="reproduction_quick", generations=1, games=4, curve_games=0)
"""--quick-eval's TD line: one generation of 4 games (its own line, so the full one is never continued by it)."""
TD_CHECK = TDEvaluation(line=TD_LINE.name, openings=0)
"""Hui's check of the line: 10 batches of 100 games against the random mover within 80 plies, at the
line's depth; the match against the traditional evaluation (openings) only with `ours`."""
TD_QUICK_CHECK = TDEvaluation(line=TD_QUICK_LINE.name, batches=2, batch_games=10, openings=0)
"""--quick-eval's check: 2 batches of 10 games (not Hui's protocol: a first look)."""


def default_models(stages: tuple[OptionalStage, ...] = ()) -> list[str]:
    """The models a reproduce command runs when it names none: those with a published figure
    (PUBLISHED_MODELS); with the stage `ours`, every model of REPRODUCED."""
    return list(REPRODUCED) if "ours" in stages else list(PUBLISHED_MODELS)


def runs_td(models: list[str]) -> bool:
    """Whether the run plays Hui's TD learner (TD_STEPS): when it covers every model with a published
    figure (the default selection), as the head-to-head needs both its models."""
    return set(PUBLISHED_MODELS) <= set(models)


def ours_only(name: str) -> bool:
    """Whether step `name` belongs to the optional stage `ours` only (OURS_STEPS)."""
    return any(name == s or (s.endswith("_") and name.startswith(s)) for s in OURS_STEPS)


def stage_configs(
    ops: dict, stages: tuple[OptionalStage, ...], quick: bool, workers: int = 0, openings: int = 0
) -> dict:
    """The run configs `ops` (step -> config) with what the stages decide: without `ours` the suites
    search at PUBLISHED_DEPTHS only; the TD steps' settings (TD_LINE and TD_CHECK, or --quick-eval's);
    the report told the stages."""
    import dataclasses

    from assets.selfplay import TDEvaluationConfig, TDSelfPlayConfig

    out = dict(ops)
    ours = "ours" in stages
    for name, config in ops.items():
        if name.startswith("eval_suites_") and not ours:
            out[name] = type(config)(**{**config.model_dump(), "depths": PUBLISHED_DEPTHS})
        if name == REPORT:
            out[name] = type(config)(**{**config.model_dump(), "stages": list(stages)})
    line, check = (TD_QUICK_LINE, TD_QUICK_CHECK) if quick else (TD_LINE, TD_CHECK)
    out[TD_STEPS[0]] = TDSelfPlayConfig(**dataclasses.asdict(dataclasses.replace(line, workers=workers)))
    check = dataclasses.replace(check, workers=workers, openings=(openings or TDEvaluation.openings) if ours else 0)
    out[TD_STEPS[1]] = TDEvaluationConfig(**dataclasses.asdict(check))
    return out


split_dataset_assets = [split_dataset_asset(n) for n in DATASETS if n not in UNPUBLISHED]
split_model_assets = [split_model_asset(n) for n in SPLIT_MODELS]


class ReportConfig(DescribedConfig):
    settings: dict[str, str] = {}
    """What the run was asked for (archives, labels, profile, bounds), as the report's first lines."""
    models: list[str] = []
    """The models the run covered (empty: every model of REPRODUCED)."""
    schedules: dict[str, str] = {}
    """model (or its published-split copy) -> its resolved schedule in words (its profile's rows, epochs and
    minutes, with the run's caps and its share of the time budget)."""
    outcomes: dict[str, str] = {}
    """step -> what this run did with it: done, kept, `failed: <why>`, `skipped: <why>` (a step not
    named: as its latest materialisation says)."""
    stages: list[str] = []
    """The optional stages the run took (`reproduce --with`: pipeline.research.published.OptionalStage)."""


def _png_from_md(value) -> bytes | None:
    """The PNG of a png_md metadata value (a data URI in Markdown; the value, or its text), or None."""
    text = value if isinstance(value, str) else getattr(value, "value", None) or getattr(value, "md_str", None) or ""
    hit = re.search(r"data:image/png;base64,([A-Za-z0-9+/=]+)", str(text))
    return base64.b64decode(hit.group(1)) if hit else None


def _latest(instance: dg.DagsterInstance, key: str):
    event = instance.get_latest_materialization_event(dg.AssetKey(key))
    return None if event is None or event.asset_materialization is None else event


INPUTS_DIR = "reports/reproduction/inputs"
"""Where the report keeps, beside each step's record in the store (pipeline.research.step_records),
what it reads of that step's making (<step>.json: its metadata, when it finished, its wall time), so
a second machine on the same store, whose Dagster instance never made the step, reports the same."""


@dataclass(frozen=True)
class Made:
    """What the report reads of a step's latest making."""

    meta: dict
    """Its materialisation's metadata, plain values (Markdown and paths as text)."""
    timestamp: float
    """When it finished (seconds since the epoch)."""
    seconds: float | None
    """Its wall time as Dagster recorded it (the run's step stats)."""


def _plain(meta) -> dict:
    """Metadata as plain JSON values (what is not one, such as a table of records, left out)."""
    out = {}
    for k, v in meta.items():
        v = getattr(v, "value", v)
        try:
            json.dumps(v)
        except (TypeError, ValueError):
            continue
        out[k] = v
    return out


def made_of(instance: dg.DagsterInstance, st: Store | None, key: str) -> Made | None:
    """Step `key`'s latest making: from this instance where its materialisation is the one the
    store's record of the step describes (made within the record's run; then kept in the store,
    INPUTS_DIR), else from the store where what it keeps is of the recorded making, else from this
    instance (a step no reproduce run recorded), else None. Without a store: this instance's."""
    record = None if st is None else step_records.read_record(st.root, key)
    finished = record is not None and record.finished
    event = _latest(instance, key)
    if event is not None:
        made = Made(
            _plain(event.asset_materialization.metadata), event.timestamp, step_seconds(instance, event.run_id, key)
        )
        if finished and record.made_during(event.timestamp):
            write_json(st.root / INPUTS_DIR / f"{key}.json", {"made_at": record.made_at, **asdict(made)})
            return made
    kept = read_json(st.root / INPUTS_DIR / f"{key}.json") if finished else {}
    if finished and kept.get("made_at") == record.made_at and (event is None or event.timestamp < record.made_at):
        return Made(kept["meta"], kept["timestamp"], kept["seconds"])
    return made if event is not None else None


def step_seconds(instance: dg.DagsterInstance, run_id: str, step: str) -> float | None:
    for s in instance.get_run_step_stats(run_id, step_keys=[step]):
        if s.start_time and s.end_time:
            return s.end_time - s.start_time
    return None


def size_text(meta: dict, schedule: str = "") -> str:
    """What a model was trained on, from its materialisation's metadata, with the schedule the run
    gave it (its own profile settings and the run's caps)."""
    v = {k: getattr(x, "value", x) for k, x in meta.items()}
    # Where training stopped and why (training.train.TrainResult.stop_text: epochs done of those
    # asked, "stopped by the time budget"); older materialisations have only the epochs.
    epochs = v.get("training_stop") or f"{v.get('epochs', '?')} epoch(s)"
    text = f"{v.get('profile', '?')} profile, {int(v.get('rows_train', 0)):,} train rows, {epochs}"
    return text + (f"; schedule: {schedule}" if schedule else "")


def job_assets(
    models: list[str] | None = None, extra: tuple[str, ...] = (), stages: tuple[OptionalStage, ...] = ()
) -> list[str]:
    """The reproduction's assets in the order they run (upstream first), for these models (those
    default_models gives by default; ValueError for one not of REPRODUCED); `extra`: other assets to
    run before the report (Lubeck's grid where defined); `stages`: the optional stages (without
    `ours`, the steps of OURS_STEPS are left out). Hui's TD learner (TD_STEPS) where runs_td."""
    models = list(models or default_models(stages))
    if left_out := [m for m in models if m not in REPRODUCED]:
        raise ValueError(f"not models of the reproduction: {', '.join(left_out)}")
    datasets = sorted({MODELS[m].dataset for m in models}, key=list(DATASETS).index)
    names = datasets + [on_published_split(d) for d in datasets]
    names += models + [on_published_split(m) for m in models if m in SPLIT_MODELS] + ["model_results"]
    names += [f"eval_suites_{m}" for m in models] + [f"eval_matches_{m}" for m in models]
    names += [f"eval_pairs_{m}" for m in models if m == DEEPCHESS_MODEL]
    names += [f"eval_piece_values_{m}" for m in models if m in PIECE_VALUE_MODELS]
    # The published-split copies' own evaluations (DeepChess's pairs, Team 44's piece values).
    split = [m for m in models if m in SPLIT_MODELS]
    names += [f"eval_pairs_{on_published_split(m)}" for m in split if m == DEEPCHESS_MODEL]
    names += [f"eval_piece_values_{on_published_split(m)}" for m in split if m in PIECE_VALUE_MODELS]
    if all(m in models for m in HEAD_TO_HEAD_MODELS):
        names.append("eval_head_to_head")
    if runs_td(models):  # before elo_ratings, which rates td_evaluation's games
        names += list(TD_STEPS)
    names += ["elo_ratings"] + [f"eval_report_{m}" for m in models] + list(extra)
    if "ours" not in stages:
        names = [n for n in names if not ours_only(n)]
    return names + [REPORT]


@dg.asset(
    name=REPORT,
    group_name=GROUP,
    # It reads the evaluation's results too; `chess-pipeline reproduce` runs it last, every time.
    # (Its deps name no evaluation asset, so a code location without them shows none as a stub.)
    deps=[*(a.key for a in split_model_assets), "model_results"],
    description="Every published figure beside ours (both split protocols), with n and the protocol, how "
    "long each step took, and each model's learning curves, confusion matrix and Kaufman table "
    "(reports/reproduction.md in the store).",
)
def reproduction_report(
    context: dg.AssetExecutionContext, config: ReportConfig, store: StoreResource
) -> dg.MaterializeResult:
    from pipeline.store.duck import memory_connection

    st = store.get()
    instance = context.instance
    models = [m for m in (config.models or REPRODUCED) if m in REPRODUCED]
    figures = [*published.MODEL_FIGURES.values(), *published.EVALUATION_FIGURES]
    figures += published.deepchess_figures(published.DEEPCHESS, published.DEEPCHESS_BUCKETS)
    figures += published.piece_value_figures(published.TEAM44)
    names = ["archive_tables", "labels", *job_assets(models, grid_extra(models), tuple(config.stages))]
    figures = [f for f in figures if f.model in models or (f.model == TD_MODEL and TD_MODEL in names)]
    with memory_connection(st) as con:
        ours = ours_from_store(con, figures, [*models, *(on_published_split(m) for m in models)])
    folder = st.root / "reports" / "reproduction"
    sizes, pictures, kaufman, stops = {}, {}, {}, {}
    for m in models:
        for key in (m, on_published_split(m)):
            made = made_of(instance, st, key)
            if made is None:
                continue
            meta = made.meta
            if key == m or m not in sizes:
                sizes[m] = size_text(meta, config.schedules.get(m, ""))
            stops[key] = size_text(meta, config.schedules.get(key) or config.schedules.get(m, ""))
            for pic in ("learning_curves", "confusion_matrix"):
                png = _png_from_md(meta.get(pic))
                if png:
                    path = folder / f"{key}_{pic}.png"
                    with atomic_path(path) as tmp:
                        tmp.write_bytes(png)
                    pictures.setdefault(m, []).append((f"{key}: {pic.replace('_', ' ')}", f"reproduction/{path.name}"))
        suites = made_of(instance, st, f"eval_suites_{m}")
        if suites is not None:
            table = suites.meta.get("kaufman_positions_depth1")
            if table is not None:
                scale = suites.meta.get("kaufman_scale")
                kaufman[m] = table + (
                    "\n\nStockfish's own delta on the same positions, the scale:\n\n" + scale if scale else ""
                )
            chart = report_dir(st, m) / "kaufman_depth1.png"
            if storage.exists(chart):
                pictures.setdefault(m, []).append((f"{m}: Kaufman test per position", f"evaluation/{m}/{chart.name}"))
    if TD_MODEL in names:
        hui = td_row(instance, st)
        if hui is not None:
            ours.update({(f.model, f.table, f.where, f.metric): hui[0] for f in figures if f.model == TD_MODEL})
            sizes[TD_MODEL] = hui[1]
    steps = [_step(instance, n, config.outcomes.get(n), st) for n in names]
    steps = [s for s in steps if s.name != REPORT]
    grid = st.root / "reports" / "lubeck_grid.md"
    if storage.exists(grid):
        lubeck = f"The table: [lubeck_grid.md](lubeck_grid.md) (asset `{LUBECK_GRID}`, in the steps below)."
    else:
        lubeck = (
            f"`{LUBECK_GRID}` is defined but has not written reports/lubeck_grid.md: its model was not part of "
            "this run, or its step failed (the steps below say which)."
        )
    text = render(
        ReportInputs(figures, ours, sizes, steps, dict(config.settings), pictures, kaufman, lubeck, stops=stops)
    )
    path = st.root / "reports" / "reproduction.md"
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    table = text.split("## Published figures beside ours", 1)[1].split("## Lubeck", 1)[0].strip()
    return dg.MaterializeResult(
        metadata={
            "table": dg.MetadataValue.md(table),
            "figures": len(figures),
            "measured": sum(1 for f in figures if (f.model, f.table, f.where, f.metric) in ours),
            "path": dg.MetadataValue.path(str(path)),
        }
    )


def td_row(instance: dg.DagsterInstance, st: Store) -> tuple | None:
    """Hui's row from td_evaluation's latest result (made_of: this instance's, or the store's): (Ours,
    what the line was trained on and how it was checked), or None before a check."""
    from pipeline.research.reproduction import batches_ours

    check = made_of(instance, st, TD_STEPS[1])
    if check is None:
        return None
    meta = check.meta
    ours = batches_ours(meta)
    if ours is None:
        return None
    line = made_of(instance, st, TD_STEPS[0])
    lmeta = {} if line is None else line.meta
    ratios = meta.get("batch_ratios") or []
    trained = (
        f"line {lmeta.get('line', '?')}: {lmeta.get('generation', '?')} generation(s) of TD-Leaf self-play "
        f"({TD_LINE.games} games each with the reproduction's settings; Hui's own number of self-play games is "
        f"not recorded here, so the line plays what fits the budget); checked by {meta.get('player', '?')} in "
        f"{len(ratios)} batches of {meta.get('batch_games', '?')} games, peak batch {meta.get('win_ratio_peak', 0):.0%}"
    )
    return ours, trained


def grid_extra(models: list[str]) -> tuple[str, ...]:
    """(LUBECK_GRID,) where the models Lubeck's grid plays are among `models`."""
    deps = {d.to_user_string() for d in lubeck_grid.asset_deps.get(dg.AssetKey(LUBECK_GRID), ())}
    return (LUBECK_GRID,) if deps <= set(models) else ()


def _step(instance: dg.DagsterInstance, name: str, outcome: str | None = None, st: Store | None = None) -> Step:
    """A step's wall time from Dagster: an unpartitioned asset's latest making's step (made_of: this
    instance's, or what the store keeps of another machine's); the labels and ingest steps summed over
    every run of them the reproduce command started with this instance. Its status: `outcome` (this
    run's: done, kept, failed: why, skipped: why), else materialised or missing as its latest making says."""
    status, _, why = (outcome or "").partition(": ")
    if status in ("failed", "skipped"):
        return Step(name, None, status, why)

    if name in ("labels", "archive_tables"):
        runs = instance.get_runs(filters=dg.RunsFilter(tags={COMMAND_TAG: "reproduce"}))
        total, n = 0.0, 0
        for run in runs:
            s = step_seconds(instance, run.run_id, name)
            if s is not None:
                total, n = total + s, n + 1
        what = "archives" if name == "archive_tables" else "runs"
        return Step(name, total if n else None, status or ("materialised" if n else "not run by reproduce"),
                    f"{n} {what}")  # fmt: skip
    made = made_of(instance, st, name)
    if made is None:
        return Step(name, None, "missing")
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(made.timestamp))
    return Step(name, made.seconds, status or "materialised", f"finished {when}")


reproduction_assets = [*split_dataset_assets, *split_model_assets, reproduction_report]


def job_selection(stages: tuple[OptionalStage, ...] = ()) -> dg.AssetSelection:
    """What a reproduction job selects, by group, tag and key pattern (so a code location without
    some module still loads): every dataset, model and evaluation asset and the TD learner's two
    steps, less the datasets of ours (UNPUBLISHED) and the models it does not train (with their evaluations);
    without the stage `ours`, less the models with no published figure and OURS_STEPS."""
    models = NOT_REPRODUCED if "ours" in stages else [m for m in MODELS if m not in PUBLISHED_MODELS]
    selection = (
        dg.AssetSelection.groups(DATASETS_GROUP, MODELS_GROUP, EVAL_GROUP, GROUP)
        | dg.AssetSelection.from_string(" or ".join(f'key:"{s}"' for s in TD_STEPS))
    ) - dg.AssetSelection.assets(*UNPUBLISHED)
    selection -= reduce(operator.or_, (dg.AssetSelection.tag(MODEL_TAG, m) for m in models), dg.AssetSelection.assets())
    if "ours" not in stages:
        selection -= dg.AssetSelection.from_string(
            " or ".join(f'key:"{s}{"*" if s.endswith("_") else ""}"' for s in OURS_STEPS)
        )
    return selection


reproduction_job = dg.define_asset_job(
    "reproduction_job",
    selection=job_selection(),
    description="The published tables reproduced (`chess-pipeline reproduce`'s default): datasets both ways, "
    "the models with a published figure, the evaluation the published figures read (1-ply suites, DeepChess's "
    "pairs, the piece values, Lubeck's grid), Hui's TD learner and its check, and reports/reproduction.md "
    "(after ingest and labels: `chess-pipeline reproduce` runs them all, resumably).",
)
reproduction_ours_job = dg.define_asset_job(
    "reproduction_ours_job",
    selection=job_selection(("ours",)),
    description="reproduction_job with the optional stage `ours` (`chess-pipeline reproduce --with ours`): also "
    "the matches, head to head, Elo, each model's evaluation page, and the models with no published figure.",
)
