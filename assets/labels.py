"""Stockfish labels of every distinct position, and their nightly re-labelling."""

import json
import os
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import dagster as dg

from assets.metadata import md_table, png_md
from assets.resources import StockfishResource, StoreResource
from pipeline.engine import Limit
from pipeline.labels import SHARDS, LabelProgress, LabelRun, Setting, coverage, integrity, label_store
from pipeline.plots import histogram_png
from pipeline.store import atomic_path

GROUP = "labels"
PROGRESS_TAG = "chess-pipeline/progress-file"
"""Run tag naming a JSON file the asset keeps up to date with its progress (the CLI's bar)."""
WRITE_EVERY_S = 0.5
"""How often a progress file is rewritten at most (the CLI's bar polls it twice a second)."""
LOG_EVERY_S = 10.0


def write_progress(path: Path, done: int, failed: int, total: int) -> None:
    """The progress file the CLI's bar reads (assets.cli.progress_bar), written atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps({"done": done, "failed": failed, "total": total}))


class LabelsConfig(dg.Config):
    limit: str = "depth"
    """depth, nodes or static (Stockfish's `eval`: no search)."""
    value: int = 8
    """Depth or node count of the search (ignored for static)."""
    max_positions: int = 0
    """Bound on positions this run labels; 0 = no bound."""
    max_minutes: float = 0.0
    """Bound on this run's labelling time; 0 = no bound."""
    relabel: bool = False
    """Re-label positions whose labels all fall short of this setting (shallower, or by
    another engine version) instead of labelling unlabelled ones."""
    order: str = "first_seen"
    """first_seen (game by game), or for re-labelling: oldest (oldest label first) or most_used."""
    retry_failed: bool = False
    """Try again positions an earlier run of this setting recorded as failed."""
    shards: list[int] = []
    """Shards (0-15, by position key) this run may take; empty = all."""


def _fmt_eta(seconds) -> str:
    if seconds is None:
        return "?"
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


@dg.asset(
    group_name=GROUP,
    deps=["positions"],
    # New positions (an archive ingested) start a run that labels just those.
    automation_condition=dg.AutomationCondition.eager(),
    check_specs=[
        dg.AssetCheckSpec("coverage", asset="labels",
                          description="every distinct position has a label (or a recorded failure) for the run's setting"),
        dg.AssetCheckSpec("scores_in_range", asset="labels",
                          description="exactly one of cp / mate, |cp| < 30000, mate scores consistent, depth within the limit"),
        dg.AssetCheckSpec("no_duplicate_labels", asset="labels",
                          description="no distinct position labelled twice under one engine setting"),
    ],
)
def labels(context: dg.AssetExecutionContext, config: LabelsConfig, store: StoreResource, stockfish: StockfishResource):
    """Stockfish evaluations of every distinct position (key + full position), once per engine
    setting, appended under labels/<engine>_<limit>/. Positions already labelled under the
    setting cost nothing; a run can be bounded by positions or minutes and resumes where the
    last one stopped. With relabel, positions whose labels fall short of the setting get a
    new label beside the old ones."""
    st = store.get()
    run = LabelRun(
        limit=Limit(config.limit, config.value), relabel=config.relabel, order=config.order,
        max_positions=config.max_positions, max_seconds=config.max_minutes * 60,
        retry_failed=config.retry_failed, shards=tuple(config.shards) or tuple(range(SHARDS)),
        run_id=context.run.run_id,
    )
    progress_file = context.run.tags.get(PROGRESS_TAG)
    last_log = [0.0]

    def progress(p: LabelProgress) -> None:
        if p.seconds - last_log[0] >= LOG_EVERY_S or p.shard == "done":
            last_log[0] = p.seconds
            context.log.info(
                f"{p.done:,} of {p.total:,} positions labelled, {p.failed:,} failed, {p.rate:,.0f} positions/s, "
                f"ETA {_fmt_eta(p.eta_seconds)} (shard {p.shard})")
        if progress_file:
            write_progress(Path(progress_file), p.done, p.failed, p.total)

    pool = stockfish.pool
    setting = Setting(pool.name, run.limit)
    context.log.info(f"labelling with {setting} on {pool.workers} engine(s), "
                     f"{'re-labelling' if run.relabel else 'new positions'}")
    stats = label_store(st, pool, run, progress, progress_every_s=1.0)
    cov = coverage(st, setting)
    ok = integrity(st, setting)
    context.log.info(
        f"{stats.labelled:,} labelled, {stats.failed:,} failed in {stats.seconds:.0f}s "
        f"({stats.positions_per_second:,.0f} positions/s); coverage {cov['coverage']:.2%} of "
        f"{cov['distinct_positions']:,} distinct positions")
    if stats.shards_busy:
        context.log.warning(f"shards {stats.shards_busy} were being labelled by another run and were skipped")
    metadata = {
        "engine": setting.engine, "limit": str(run.limit), "mode": "relabel" if run.relabel else "new",
        "labelled": stats.labelled, "failed": stats.failed, "seconds": round(stats.seconds, 1),
        "positions_per_second": round(stats.positions_per_second, 1), "engines": pool.workers,
        "engine_restarts": stats.engine_restarts, "stopped_by": stats.stopped_by or "done",
        "distinct_positions": cov["distinct_positions"], "positions": cov["positions"],
        "repeat_share": round(cov["repeat_share"], 4), "coverage": round(cov["coverage"], 4),
        "rows": ok["rows"],
        "failure_reasons": md_table(("reason", "positions"), stats.failure_reasons),
        "path": dg.MetadataValue.path(str(st.root / "labels" / setting.slug)),
    }
    if stats.score_sample:
        png = histogram_png([s / 100 for s in stats.score_sample], f"{setting}: this run's labels",
                            "score, pawns (White's view; mates at the ends)", clip=(-10, 10))
        metadata["eval_histogram"] = png_md(png, "evaluation histogram")
    yield dg.MaterializeResult(metadata=metadata)
    pending = cov["distinct_positions"] - cov["labelled"] - cov["failed"]
    yield dg.AssetCheckResult(
        check_name="coverage", passed=pending == 0, severity=dg.AssetCheckSeverity.WARN,
        metadata={"setting": str(setting), "coverage": round(cov["coverage"], 4), "labelled": cov["labelled"],
                  "failed": cov["failed"], "unlabelled": pending})
    yield dg.AssetCheckResult(
        check_name="scores_in_range", passed=ok["out_of_range"] == 0,
        metadata={"setting": str(setting), "out_of_range": ok["out_of_range"],
                  "min_score": ok["min_score"], "max_score": ok["max_score"]})
    yield dg.AssetCheckResult(
        check_name="no_duplicate_labels", passed=ok["duplicates"] == 0,
        metadata={"setting": str(setting), "duplicates": ok["duplicates"], "rows": ok["rows"]})


labels_automation = dg.AutomationConditionSensorDefinition(
    "labels_automation", target=dg.AssetSelection.assets("labels"), default_status=dg.DefaultSensorStatus.RUNNING,
    description="Labels new positions after each ingest (the labels asset's eager condition).",
)

relabel_job = dg.define_asset_job(
    "relabel_labels", selection=["labels"],
    description="Re-label positions whose best label falls short of a target setting (the nightly schedule's job).",
)

DEFAULT_RELABEL = {"cron": "0 2 * * *", "depth": 12, "minutes": 60.0, "positions": 0, "order": "oldest"}


def local_timezone(environ=os.environ) -> str:
    """IANA name of the machine's time zone (TZ, else /etc/localtime), UTC when unknown."""
    candidates = [environ.get("TZ", "").lstrip(":")]
    target = os.path.realpath("/etc/localtime")
    if "zoneinfo/" in target:
        candidates.append(target.split("zoneinfo/", 1)[1])
    for name in candidates:
        try:
            if name:
                ZoneInfo(name)
                return name
        except (ValueError, ZoneInfoNotFoundError):
            continue
    return "UTC"


def relabel_schedule(cron: str = DEFAULT_RELABEL["cron"], timezone: str = "UTC", depth: int = DEFAULT_RELABEL["depth"],
                     minutes: float = DEFAULT_RELABEL["minutes"], positions: int = DEFAULT_RELABEL["positions"],
                     order: str = DEFAULT_RELABEL["order"]) -> dg.ScheduleDefinition:
    """Nightly re-labelling: positions whose labels are shallower than `depth` or by an older
    engine get a depth-`depth` label, oldest first, for at most `minutes` and `positions`
    (0: no bound)."""
    config = LabelsConfig(limit="depth", value=depth, relabel=True, order=order, max_minutes=minutes,
                          max_positions=positions)
    budget = " and ".join(b for b in (f"{minutes:g} minutes" if minutes else "",
                                      f"{positions:,} positions" if positions else "") if b) or "no bound"
    return dg.ScheduleDefinition(
        name="nightly_relabel", job=relabel_job, cron_schedule=cron, execution_timezone=timezone,
        run_config=dg.RunConfig(ops={"labels": config}),
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description=f"re-label to depth {depth}, {order} first, at most {budget} ({cron}, {timezone})",
    )


def relabel_schedule_from_env(environ=os.environ) -> dg.ScheduleDefinition:
    """The schedule as CHESS_PIPELINE_RELABEL_{CRON,TZ,DEPTH,MINUTES,POSITIONS,ORDER} set it
    (defaults: 02:00 local time, depth 12, at most 60 minutes, oldest first)."""
    return relabel_schedule(
        cron=environ.get("CHESS_PIPELINE_RELABEL_CRON", DEFAULT_RELABEL["cron"]),
        timezone=environ.get("CHESS_PIPELINE_RELABEL_TZ") or local_timezone(environ),
        depth=int(environ.get("CHESS_PIPELINE_RELABEL_DEPTH", DEFAULT_RELABEL["depth"])),
        minutes=float(environ.get("CHESS_PIPELINE_RELABEL_MINUTES", DEFAULT_RELABEL["minutes"])),
        positions=int(environ.get("CHESS_PIPELINE_RELABEL_POSITIONS", DEFAULT_RELABEL["positions"])),
        order=environ.get("CHESS_PIPELINE_RELABEL_ORDER", DEFAULT_RELABEL["order"]),
    )
