"""Stockfish labels of every distinct position, and their nightly re-labelling."""

import json
import os
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import dagster as dg

from assets.config import DescribedConfig
from assets.metadata import md_table, png_md
from assets.resources import StockfishResource, StoreResource
from pipeline.engine import CP_BOUND, MATE_BOUND, Limit, LimitKind
from pipeline.labels import (
    ORDERS,
    SHARDS,
    LabelProgress,
    LabelRun,
    Order,
    Setting,
    coverage,
    integrity,
    label_store,
    search_timeout,
)
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


class LabelsConfig(DescribedConfig):
    limit: LimitKind = "depth"
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
    order: Order = "first_seen"
    """first_seen (game by game), or for re-labelling: oldest (oldest label first) or most_used."""
    retry_failed: bool = False
    """Try again positions an earlier run of this setting recorded as failed."""
    shards: list[int] = []
    """Shards (0-15, by position key) this run may take; empty = all."""
    archives: list[str] = []
    """Only positions that occur in these archive partitions (keys); empty = the whole store.
    The labels_automation sensor sets it to the archives just ingested."""


def _fmt_eta(seconds) -> str:
    if seconds is None:
        return "?"
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


@dg.asset(
    group_name=GROUP,
    deps=["positions"],
    # New archives start a run over their own positions through the labels_automation sensor
    # below (bounded), not an automation condition: that would label the whole backlog.
    check_specs=[
        dg.AssetCheckSpec(
            "coverage",
            asset="labels",
            description="every distinct position has a label (or a recorded failure) for the run's setting",
        ),
        dg.AssetCheckSpec(
            "scores_in_range",
            asset="labels",
            description=f"exactly one of cp / mate, |cp| < {CP_BOUND}, |mate| <= {MATE_BOUND}, mate scores "
            "consistent, depth "
            "within the limit (ERROR when this run wrote such a label: the CLI fails; "
            "WARN for older labels)",
        ),
        dg.AssetCheckSpec(
            "no_duplicate_labels",
            asset="labels",
            description="no distinct position labelled twice under one engine setting "
            "(ERROR: the CLI fails when it does not pass)",
        ),
    ],
)
def labels(context: dg.AssetExecutionContext, config: LabelsConfig, store: StoreResource, stockfish: StockfishResource):
    """Stockfish evaluations of every distinct position (key + full position), once per engine
    setting, appended under `labels/<engine>_<limit>/`. Positions already labelled under the
    setting cost nothing; a run can be bounded by positions or minutes and resumes where the
    last one stopped. With relabel, positions whose labels fall short of the setting get a
    new label beside the old ones."""
    st = store.get()
    run = LabelRun(
        limit=Limit(config.limit, config.value),
        relabel=config.relabel,
        order=config.order,
        max_positions=config.max_positions,
        max_seconds=config.max_minutes * 60,
        retry_failed=config.retry_failed,
        shards=tuple(config.shards) or tuple(range(SHARDS)),
        archives=tuple(config.archives),
        run_id=context.run.run_id,
    )
    progress_file = context.run.tags.get(PROGRESS_TAG)
    last_log = [0.0]

    def progress(p: LabelProgress) -> None:
        if p.seconds - last_log[0] >= LOG_EVERY_S or p.shard == "done":
            last_log[0] = p.seconds
            context.log.info(
                f"{p.done + p.failed:,} of {p.total:,} positions done ({p.done:,} labelled, {p.failed:,} failed), "
                f"{p.rate:,.0f} positions/s, ETA {_fmt_eta(p.eta_seconds)} (shard {p.shard})"
            )
        if progress_file:
            write_progress(Path(progress_file), p.done, p.failed, p.total)

    pool = stockfish.pool
    setting = Setting.of(pool, run.limit)
    if stockfish.timeout_s > 0:
        timeout = f"{stockfish.timeout_s:g}s (set)"
    else:
        derived = search_timeout(pool, run.limit)
        pool.timeout_s = derived.seconds
        timeout = str(derived)
    scope = f" of archive(s) {', '.join(run.archives)}" if run.archives else ""
    bounds = ", ".join(
        b
        for b in (
            f"at most {run.max_positions:,} positions" if run.max_positions else "",
            f"at most {config.max_minutes:g} minutes" if run.max_seconds else "",
        )
        if b
    )
    context.log.info(
        f"labelling with {setting} on {pool.workers} engine(s), "
        f"{'re-labelling' if run.relabel else 'new positions'}{scope}{', ' + bounds if bounds else ''}; "
        f"search timeout {timeout}, {pool.retries} retries"
    )
    stats = label_store(st, pool, run, progress, progress_every_s=1.0)
    cov = coverage(st, setting)
    ok = integrity(st, setting, context.run.run_id)
    context.log.info(
        f"{stats.labelled:,} labelled, {stats.failed:,} failed in {stats.seconds:.0f}s "
        f"({stats.positions_per_second:,.0f} positions/s); coverage {cov['coverage']:.2%} of "
        f"{cov['distinct_positions']:,} distinct positions"
    )
    if stats.shards_busy:
        context.log.warning(f"shards {stats.shards_busy} were being labelled by another run and were skipped")
    metadata = {
        "engine": setting.engine,
        "limit": str(run.limit),
        "mode": "relabel" if run.relabel else "new",
        "labelled": stats.labelled,
        "failed": stats.failed,
        "seconds": round(stats.seconds, 1),
        "positions_per_second": round(stats.positions_per_second, 1),
        "engines": pool.workers,
        "engine_restarts": stats.engine_restarts,
        "stopped_by": stats.stopped_by or "done",
        "timeout_s": pool.timeout_s,
        "retries": pool.retries,
        "archives": ", ".join(run.archives) or "all",
        "distinct_positions": cov["distinct_positions"],
        "positions": cov["positions"],
        "repeat_share": round(cov["repeat_share"], 4),
        "coverage": round(cov["coverage"], 4),
        "rows": ok["rows"],
        "failure_reasons": md_table(("reason", "positions"), stats.failure_reasons),
        "path": dg.MetadataValue.path(str(st.root / "labels" / setting.slug)),
    }
    if stats.score_sample:
        png = histogram_png(
            [s / 100 for s in stats.score_sample],
            f"{setting}: this run's labels",
            "score, pawns (White's view; mates at the ends)",
            clip=(-10, 10),
        )
        metadata["eval_histogram"] = png_md(png, "evaluation histogram")
    yield dg.MaterializeResult(metadata=metadata)
    pending = cov["distinct_positions"] - cov["labelled"] - cov["failed"]
    yield dg.AssetCheckResult(
        check_name="coverage",
        passed=pending == 0,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "setting": str(setting),
            "coverage": round(cov["coverage"], 4),
            "labelled": cov["labelled"],
            "failed": cov["failed"],
            "unlabelled": pending,
        },
    )
    yield dg.AssetCheckResult(
        # ERROR when this run wrote a broken label (a defect); labels stored before they were
        # validated are a WARN, so that they do not fail every later run.
        check_name="scores_in_range",
        passed=ok["out_of_range"] == 0,
        severity=dg.AssetCheckSeverity.ERROR if ok["out_of_range_this_run"] else dg.AssetCheckSeverity.WARN,
        metadata={
            "setting": str(setting),
            "out_of_range": ok["out_of_range"],
            "out_of_range_this_run": ok["out_of_range_this_run"],
            "min_score": ok["min_score"],
            "max_score": ok["max_score"],
        },
    )
    yield dg.AssetCheckResult(
        check_name="no_duplicate_labels",
        passed=ok["duplicates"] == 0,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={"setting": str(setting), "duplicates": ok["duplicates"], "rows": ok["rows"]},
    )


label_new_job = dg.define_asset_job(
    "label_new_archives",
    selection=["labels"],
    description="Label the positions of newly ingested archives, within a budget (the labels_automation sensor's job).",
)

DEFAULT_AUTO_LABEL = {"enabled": True, "minutes": 10.0, "positions": 0}
AUTO_LABEL_SWITCH = {
    "on": True,
    "1": True,
    "true": True,
    "yes": True,
    "off": False,
    "0": False,
    "false": False,
    "no": False,
}


def auto_label_settings(environ=os.environ) -> dict:
    """The labels_automation sensor's settings: CHESS_PIPELINE_AUTO_LABEL (on/off, default on),
    CHESS_PIPELINE_AUTO_LABEL_MINUTES (default 10) and _POSITIONS (default 0: no bound); a
    minutes or positions budget of 0 is no bound, and both 0 is refused."""
    switch = environ.get("CHESS_PIPELINE_AUTO_LABEL", "on").strip().lower()
    if switch not in AUTO_LABEL_SWITCH:
        raise ValueError(f"CHESS_PIPELINE_AUTO_LABEL must be one of {', '.join(AUTO_LABEL_SWITCH)}, got {switch!r}")
    out = {"enabled": AUTO_LABEL_SWITCH[switch]}
    for key, cast in (("minutes", float), ("positions", int)):
        name = f"CHESS_PIPELINE_AUTO_LABEL_{key.upper()}"
        raw = environ.get(name, "")
        try:
            out[key] = cast(raw) if raw.strip() else DEFAULT_AUTO_LABEL[key]
        except ValueError:
            raise ValueError(f"{name} must be a number (0: no bound), got {raw!r}") from None
        if out[key] < 0:
            raise ValueError(f"{name} must be 0 (no bound) or more, got {raw!r}")
    if out["enabled"] and not out["minutes"] and not out["positions"]:
        raise ValueError(
            "CHESS_PIPELINE_AUTO_LABEL_MINUTES and _POSITIONS are both 0: the automatic runs need a "
            "budget (set one, or CHESS_PIPELINE_AUTO_LABEL=off)"
        )
    return out


@dg.sensor(
    name="labels_automation",
    job=label_new_job,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="After each ingest, labels the positions of the archives just ingested (depth 8), at most "
    "CHESS_PIPELINE_AUTO_LABEL_MINUTES (10) minutes / _POSITIONS positions a run; "
    "CHESS_PIPELINE_AUTO_LABEL=off (or this toggle) turns it off.",
)
def labels_automation(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
    """One `labels` run per tick for the archive partitions whose positions were materialised
    since the last tick, restricted to those archives' positions and bounded by the budget.
    The first tick only notes where the event log stands: what was ingested before the sensor
    ran is left to `chess-pipeline label`."""
    records_filter = dg.AssetRecordsFilter(asset_key=dg.AssetKey("positions"))
    if context.cursor is None:
        latest = context.instance.fetch_materializations(records_filter, limit=1).records
        return dg.SensorResult(
            cursor=str(latest[0].storage_id if latest else 0),
            skip_reason="started: labels archives ingested from now on",
        )
    after = int(context.cursor)
    records = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("positions"), after_storage_id=after), limit=1000, ascending=True
    ).records
    if not records:
        return dg.SkipReason("no archive ingested since the last tick")
    cursor = str(max(r.storage_id for r in records))
    settings = auto_label_settings()
    if not settings["enabled"]:
        return dg.SensorResult(cursor=cursor, skip_reason="CHESS_PIPELINE_AUTO_LABEL is off")
    keys = sorted({r.partition_key for r in records if r.partition_key})
    config = LabelsConfig(archives=keys, max_minutes=settings["minutes"], max_positions=settings["positions"])
    return dg.SensorResult(
        cursor=cursor,
        run_requests=[
            dg.RunRequest(
                run_key=f"label-new-{cursor}",
                run_config=dg.RunConfig(ops={"labels": config}),
                tags={"chess-pipeline/archives": str(len(keys))},
            )
        ],
    )


relabel_job = dg.define_asset_job(
    "relabel_labels",
    selection=["labels"],
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


def relabel_schedule(
    cron: str = DEFAULT_RELABEL["cron"],
    timezone: str = "UTC",
    depth: int = DEFAULT_RELABEL["depth"],
    minutes: float = DEFAULT_RELABEL["minutes"],
    positions: int = DEFAULT_RELABEL["positions"],
    order: Order = DEFAULT_RELABEL["order"],
) -> dg.ScheduleDefinition:
    """Nightly re-labelling: positions whose labels are shallower than `depth` or by an older
    engine get a depth-`depth` label, oldest first, for at most `minutes` and `positions`
    (0: no bound)."""
    config = LabelsConfig(
        limit="depth", value=depth, relabel=True, order=order, max_minutes=minutes, max_positions=positions
    )
    budget = (
        " and ".join(
            b for b in (f"{minutes:g} minutes" if minutes else "", f"{positions:,} positions" if positions else "") if b
        )
        or "no bound"
    )
    return dg.ScheduleDefinition(
        name="nightly_relabel",
        job=relabel_job,
        cron_schedule=cron,
        execution_timezone=timezone,
        run_config=dg.RunConfig(ops={"labels": config}),
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description=f"re-label to depth {depth}, {order} first, at most {budget} ({cron}, {timezone})",
    )


def relabel_schedule_from_env(environ=os.environ) -> dg.ScheduleDefinition:
    """The schedule as CHESS_PIPELINE_RELABEL_{CRON,TZ,DEPTH,MINUTES,POSITIONS,ORDER} set it
    (defaults: 02:00 local time, depth 12, at most 60 minutes, oldest first)."""
    order = environ.get("CHESS_PIPELINE_RELABEL_ORDER", DEFAULT_RELABEL["order"])
    if order not in ORDERS:
        raise ValueError(f"CHESS_PIPELINE_RELABEL_ORDER must be one of {', '.join(ORDERS)}, got {order!r}")
    return relabel_schedule(
        cron=environ.get("CHESS_PIPELINE_RELABEL_CRON", DEFAULT_RELABEL["cron"]),
        timezone=environ.get("CHESS_PIPELINE_RELABEL_TZ") or local_timezone(environ),
        depth=int(environ.get("CHESS_PIPELINE_RELABEL_DEPTH", DEFAULT_RELABEL["depth"])),
        minutes=float(environ.get("CHESS_PIPELINE_RELABEL_MINUTES", DEFAULT_RELABEL["minutes"])),
        positions=int(environ.get("CHESS_PIPELINE_RELABEL_POSITIONS", DEFAULT_RELABEL["positions"])),
        order=order,
    )
