"""Stockfish labels of every distinct position, and their nightly re-labelling."""

import os
import warnings
from collections.abc import Iterator
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import dagster as dg

from assets.config import config_from
from assets.metadata import md_table, png_md
from assets.partitions import (
    SHARD_KEYS,
    partition_request_args,
    partition_runs,
    shard_key,
    shard_partitions,
    shards_of,
)
from assets.profile import ENGINE_OP_TAGS, Profile
from assets.progress import run_progress
from assets.resources import StockfishResource, StoreResource
from pipeline.labels.calibration import search_timeout
from pipeline.labels.labels import LabelProgress, label_store, retries_text
from pipeline.labels.setting import ORDERS, LabelRun, Order, Setting
from pipeline.labels.shards import coverage, integrity
from pipeline.labels.uci import CP_BOUND, MATE_BOUND, Limit
from pipeline.plots import histogram_png

GROUP = "labels"
POOL = "stockfish"
"""The Dagster concurrency pool of the labels step: its instance-wide limit bounds how many
labels steps (each an engine pool) run at once (README, "Stockfish labels")."""

# BackfillPolicy is beta in Dagster 1.13: said once here, not on every command's stderr.
warnings.filterwarnings("ignore", message="Parameter `backfill_policy` of function `asset`", category=dg.BetaWarning)


class LabelsConfig(
    config_from(
        LabelRun,
        name="LabelRunSettings",
        base=config_from(Limit, name="LimitSettings", rename={"kind": "limit"}),
        names=["max_positions", "relabel", "order", "retry_failed", "archives", "shard_lease_ttl_s"],
    )
):
    """A labels run: pipeline.labels.uci.Limit's fields (`kind` as `limit`), then
    pipeline.labels.setting.LabelRun's (the labels_automation sensor sets `archives` to the archives
    just ingested), and the time bound in minutes."""

    max_minutes: float = 0.0
    """Bound on this run's labelling time; 0 = no bound (LabelRun.max_seconds, in minutes)."""

    @classmethod
    def of(cls, limit: Limit, **fields) -> "LabelsConfig":
        """The run config labelling with `limit` (the other fields as given, or their defaults)."""
        return cls(limit=limit.kind, value=limit.value, **fields)

    def run(self, shards: tuple[int, ...], run_id: str) -> LabelRun:
        """The one LabelRun of a labels run over these shards: this config's choices, checked
        (ValueError with the field and its valid values)."""
        return LabelRun(
            limit=Limit(self.limit, self.value),
            relabel=self.relabel,
            order=self.order,
            max_positions=self.max_positions,
            max_seconds=self.max_minutes * 60,
            retry_failed=self.retry_failed,
            shards=shards,
            archives=tuple(self.archives),
            run_id=run_id,
            shard_lease_ttl_s=self.shard_lease_ttl_s,
        )


def metadata_shards(keys) -> str:
    """A run's partitions as the metadata says them: "03", or a range "00..15"."""
    return keys[0] if len(keys) == 1 else f"{keys[0]}..{keys[-1]}"


@dg.asset(
    group_name=GROUP,
    deps=["positions"],
    # One partition per position-key shard, one step per run: a single-run backfill labels every
    # shard of its range with the run's one engine pool (the embedded default); a profile whose
    # steps go to workers sets multi_run (labels_for_profile) and each partition is a run.
    partitions_def=shard_partitions,
    backfill_policy=dg.BackfillPolicy.single_run(),
    pool=POOL,
    op_tags=ENGINE_OP_TAGS,  # the cluster's Celery executor sends the step to the `stockfish` queue
    # New archives start a run over their own positions through the labels_automation sensor
    # below (bounded), not an automation condition: that would label the whole backlog.
    check_specs=[
        dg.AssetCheckSpec(
            "coverage",
            asset="labels",
            description="every distinct position of the run's shards has a label (or a recorded failure) "
            "for the run's setting",
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
            description="no distinct position of the run's shards labelled twice under one engine setting "
            "(ERROR: the CLI fails when it does not pass)",
        ),
    ],
)
def labels(context: dg.AssetExecutionContext, config: LabelsConfig, store: StoreResource, stockfish: StockfishResource):
    """Stockfish evaluations of every distinct position (key + full position), once per engine
    setting, appended under `labels/<engine>_<limit>/`. Positions already labelled under the
    setting cost nothing; a run can be bounded by positions or minutes and resumes where the
    last one stopped. With relabel, positions whose labels fall short of the setting get a
    new label beside the old ones. Partitioned by position-key shard: a run labels the shards
    of its partition (range), and its checks cover those shards."""
    if not (context.has_partition_key or context.has_partition_key_range):
        raise dg.Failure(
            f"labels is partitioned by position-key shard ({SHARD_KEYS[0]}..{SHARD_KEYS[-1]}): run it for a partition "
            "or a range (the UI asks; `chess-pipeline label` runs them all)"
        )
    keys = context.partition_keys
    shards = shards_of(keys)
    st = store.get()
    try:
        run = config.run(shards, context.run.run_id)
    except ValueError as e:  # a bad value in the run config: its one line, not a traceback
        raise dg.Failure(description=f"labels run config: {e}") from None
    reporter = run_progress(context, "positions")

    def progress(p: LabelProgress) -> None:
        reporter.update(
            p.done,
            p.failed,
            p.total,
            detail=f" ({p.done:,} labelled, {p.failed:,} failed{p.retries_text})",
            suffix=f" (shard {p.shard})",
            budget_left_s=p.budget_left_s,
            final=p.shard == "done",
        )

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
        f"labelling shard(s) {metadata_shards(keys)} with {setting} on {pool.workers} engine(s)"
        f"{' pinned to cores ' + ', '.join(str(c) for cs in pool.cores for c in cs) if pool.cores else ''}, "
        f"{'re-labelling' if run.relabel else 'new positions'}{scope}{', ' + bounds if bounds else ''}; "
        f"search timeout {timeout}, {pool.retries} retries"
    )
    stats = label_store(st, pool, run, progress, progress_every_s=1.0)
    cov = coverage(st, setting, shards)
    ok = integrity(st, setting, context.run.run_id, shards)
    context.log.info(
        f"{stats.labelled:,} labelled, {stats.failed:,} failed"
        f"{retries_text(stats.retried, stats.engine_restarts)} in {stats.seconds:.0f}s "
        f"({stats.positions_per_second:,.0f} positions/s); coverage {cov['coverage']:.2%} of "
        f"{cov['distinct_positions']:,} distinct positions"
    )
    if stats.shards_busy:
        context.log.warning(
            f"shard(s) {', '.join(shard_key(s) for s in stats.shards_busy)} were being labelled by another run and "
            "were skipped: that run labels them"
        )
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
        "retried": stats.retried,
        "stopped_by": stats.stopped_by or "done",
        "timeout_s": pool.timeout_s,
        "retries": pool.retries,
        "archives": ", ".join(run.archives) or "all",
        "shards": metadata_shards(keys),
        "shards_busy": ", ".join(shard_key(s) for s in stats.shards_busy) or "none",
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
            "retried_this_run": stats.retried,
            "engine_restarts_this_run": stats.engine_restarts,
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


BACKFILL_POLICIES: dict[Profile, dg.BackfillPolicy] = {
    "embedded": dg.BackfillPolicy.single_run(),
    "cluster": dg.BackfillPolicy.multi_run(max_partitions_per_run=1),
}
"""How a backfill (and the sensor's and the schedule's runs) splits the labels partitions:
embedded, one run over every shard with the machine's one engine pool; cluster, one run per
shard, each a step that the Celery executor sends to a worker of the stockfish queue."""


def labels_for_profile(profile: Profile) -> dg.AssetsDefinition:
    """The labels asset with the profile's backfill policy (the Definitions' one)."""
    return labels.with_attributes(backfill_policy=BACKFILL_POLICIES[profile])


def budget_shares(budget: int, runs: int) -> list[int]:
    """A positions budget split over `runs` runs (0: no bound, for each); the shares add up to
    the budget, and a run whose share would be 0 (more runs than positions) gets none."""
    if not budget:
        return [0] * runs
    return [budget // runs + (1 if i < budget % runs else 0) for i in range(runs)]


def label_run_requests(
    policy: dg.BackfillPolicy | None, config: dict, run_key: str | None = None, tags: dict | None = None
) -> list[dg.RunRequest]:
    """The runs that label every shard with this LabelsConfig (as a dict), split as `policy`
    splits a backfill (one run over the range, or one per partition); a positions budget is
    shared out between the runs (a time budget is each run's: they run side by side)."""
    runs = partition_runs(policy)
    shares = budget_shares(config.get("max_positions", 0), len(runs))
    requests = []
    for keys, share in zip(runs, shares):
        if config.get("max_positions", 0) and not share:
            continue
        args = partition_request_args(keys)
        requests.append(
            dg.RunRequest(
                run_key=(f"{run_key}:{keys[0]}" if len(runs) > 1 else run_key) if run_key else None,
                run_config=dg.RunConfig(ops={"labels": LabelsConfig(**{**config, "max_positions": share})}),
                tags={**(tags or {}), **args.get("tags", {})},
                partition_key=args.get("partition_key"),
            )
        )
    return requests


def _policy_in(context: dg.SensorEvaluationContext | dg.ScheduleEvaluationContext) -> dg.BackfillPolicy | None:
    """The labels asset's backfill policy in the code location the tick runs in (this module's
    asset's when the context knows none, as in a test that evaluates the function alone)."""
    try:
        repository_def = context.repository_def
    except dg.DagsterInvariantViolationError:  # a schedule context without definitions
        repository_def = None
    assets_def = repository_def.assets_defs_by_key.get(dg.AssetKey("labels")) if repository_def else None
    return (assets_def or labels).backfill_policy


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
    description=f"After each ingest, labels the positions of the archives just ingested ({Limit()}), at most "
    "CHESS_PIPELINE_AUTO_LABEL_MINUTES (10) minutes a run / _POSITIONS positions a tick (one run over every "
    "shard, or one per shard under the cluster profile); CHESS_PIPELINE_AUTO_LABEL=off (or this toggle) turns it off.",
)
def labels_automation(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
    """The `labels` runs of one tick for the archive partitions whose positions were materialised
    since the last tick, restricted to those archives' positions and bounded by the budget: one
    run over every shard, or one per shard, as the asset's backfill policy says (the profile's).
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
    config = {"archives": keys, "max_minutes": settings["minutes"], "max_positions": settings["positions"]}
    return dg.SensorResult(
        cursor=cursor,
        run_requests=label_run_requests(
            _policy_in(context),
            config,
            run_key=f"label-new-{cursor}",
            tags={"chess-pipeline/archives": str(len(keys))},
        ),
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
    (0: no bound). Its runs cover every shard, split as the asset's backfill policy says (the
    positions budget shared out between them)."""
    config = {
        "limit": "depth",
        "value": depth,
        "relabel": True,
        "order": order,
        "max_minutes": minutes,
        "max_positions": positions,
    }
    LabelsConfig(**config)  # a bad value fails when the definitions load, not at 02:00

    def requests(context: dg.ScheduleEvaluationContext) -> Iterator[dg.RunRequest]:
        # Dagster wants a run key on each of several requests of one tick: the tick's time.
        when = context.scheduled_execution_time
        yield from label_run_requests(
            _policy_in(context), config, run_key=f"relabel-{when:%Y%m%dT%H%M}" if when else "relabel"
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
        execution_fn=requests,
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
