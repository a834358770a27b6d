"""`chess-pipeline label`: Stockfish labels of the store's distinct positions (the labels asset)."""

import argparse
import dataclasses
from dataclasses import dataclass, field

import dagster as dg

from assets.records import LabelsMetadata
from cli.checks import exit_on_check_errors, failed_checks
from cli.flags import add_field_flag, add_limit_flags, limit_from_args
from cli.progress import run_bar
from cli.runtime import materializations, materialize, open_instance, open_store, require_success
from pipeline.labels.labels import retries_text
from pipeline.labels.pool import EngineSettings
from pipeline.labels.setting import LabelRun
from pipeline.labels.uci import Limit
from pipeline.settings import add_arguments, from_namespace
from pipeline.store import duck
from pipeline.store.store import Store


@dataclass(frozen=True)
class LabelResult:
    """One labels run: its metadata, and its checks (one line per check that did not pass)."""

    metadata: LabelsMetadata
    checks: dict[str, bool] = field(default_factory=dict)
    check_errors: list[str] = field(default_factory=list)
    """Checks of ERROR severity that did not pass: the command fails."""
    check_warnings: list[str] = field(default_factory=list)
    """The other checks that did not pass: said as notes."""

    @staticmethod
    def combine(results: list["LabelResult"]) -> "LabelResult":
        """The runs of one command (each over its own shards) as one: counts added, shares
        recomputed from them."""
        if len(results) == 1:
            return results[0]
        ms = [r.metadata for r in results]
        labelled, failed = sum(m.labelled for m in ms), sum(m.failed for m in ms)
        seconds = round(sum(m.seconds for m in ms), 1)
        distinct, positions = sum(m.distinct_positions for m in ms), sum(m.positions for m in ms)
        covered = sum(m.coverage * m.distinct_positions for m in ms)
        metadata = dataclasses.replace(
            ms[0],
            labelled=labelled,
            failed=failed,
            retried=sum(m.retried for m in ms),
            engine_restarts=sum(m.engine_restarts for m in ms),
            seconds=seconds,
            positions_per_second=round(labelled / seconds, 1) if seconds else 0.0,
            engines=max(m.engines for m in ms),
            distinct_positions=distinct,
            positions=positions,
            repeat_share=round(1 - distinct / positions, 4) if positions else 0.0,
            coverage=round(covered / distinct, 4) if distinct else 1.0,
        )
        checks: dict[str, bool] = {}
        for r in results:
            for name, passed in r.checks.items():
                checks[name] = checks.get(name, True) and passed
        return LabelResult(
            metadata,
            checks,
            [line for r in results for line in r.check_errors],
            [line for r in results for line in r.check_warnings],
        )

    def line(self) -> str:
        m = self.metadata
        return (
            f"labels ({m.engine}, {m.limit}, {m.mode}): {m.labelled:,} labelled, {m.failed:,} failed"
            f"{retries_text(m.retried, m.engine_restarts)} in {m.seconds:,}s "
            f"({m.positions_per_second:,} positions/s on {m.engines} engine(s)); "
            f"coverage {m.coverage:.2%} of {m.distinct_positions:,} distinct positions "
            f"({m.positions:,} positions, {m.repeat_share:.1%} repeats)"
        )


def partition_runs_of(asset: dg.AssetsDefinition) -> list[dict]:
    """The runs (their materialize arguments: partition_key, or a range's tags) that cover every
    partition of `asset`, split as its backfill policy splits a backfill: the embedded labels
    asset's single-run policy gives one run over all the shards."""
    if asset.partitions_def is None:
        return [{}]
    from assets.partitions import partition_request_args, partition_runs

    keys = asset.partitions_def.get_partition_keys()
    return [partition_request_args(k) for k in partition_runs(asset.backfill_policy, keys)]


def label(store: Store, instance: dg.DagsterInstance, config=None, stockfish=None) -> LabelResult:
    """Materialise `labels` over all its shard partitions with this LabelsConfig and
    StockfishResource (their defaults when None): one run, or as many as the asset's backfill
    policy asks, the later ones bounded by what is left of max_positions / max_minutes. Raises
    SystemExit with the reason when a run fails."""
    from assets.labels import LabelsConfig, labels

    config = config or LabelsConfig()
    results: list[LabelResult] = []
    with run_bar(store, "labels", "re-label" if config.relabel else "label", "position") as progress_tags:
        for run in partition_runs_of(labels):
            done = sum(r.metadata.labelled + r.metadata.failed for r in results)
            seconds = sum(r.metadata.seconds for r in results)
            left = {}
            if config.max_positions:
                left["max_positions"] = config.max_positions - done
            if config.max_minutes:
                left["max_minutes"] = config.max_minutes - seconds / 60
            if results and any(v <= 0 for v in left.values()):
                break
            result = materialize(
                [labels],
                store,
                instance,
                ops={"labels": config.model_copy(update=left) if left else config},
                stockfish=stockfish,
                partition_key=run.get("partition_key"),
                tags={**run.get("tags", {}), **progress_tags},
            )
            require_success(result, "labelling")
            errors, warnings = failed_checks(result)
            results.append(
                LabelResult(
                    metadata=LabelsMetadata.read(materializations(result)["labels"]),
                    checks={e.check_name: e.passed for e in result.get_asset_check_evaluations()},
                    check_errors=errors,
                    check_warnings=warnings,
                )
            )
    return LabelResult.combine(results)


def print_result(result: LabelResult) -> None:
    print(result.line())
    for line in result.check_warnings:
        print(f"note: {line}")


def config_from_args(args: argparse.Namespace):
    """The LabelsConfig and StockfishResource the flags ask for."""
    from assets.labels import LabelsConfig
    from assets.resources import StockfishResource

    limit = limit_from_args(args, "label", Limit())
    from pipeline.labels.setting import SHARD_LEASE_MIN_TTL_S, SHARD_LEASE_TTL_S

    if not args.shard_lease >= SHARD_LEASE_MIN_TTL_S:  # said as the flag, not as the run config's field
        raise SystemExit(
            f"chess-pipeline label: --shard-lease must be at least {SHARD_LEASE_MIN_TTL_S:g} seconds "
            f"(default {SHARD_LEASE_TTL_S:g}), got {args.shard_lease:g}"
        )
    # The run config, not a LabelRun: the asset makes the one LabelRun of a run (LabelsConfig.run).
    config = LabelsConfig.of(
        limit,
        max_positions=args.limit,
        max_minutes=args.minutes,
        shard_lease_ttl_s=args.shard_lease,
        **{name: getattr(args, name) for name in RUN_FLAGS},
    )
    engine = from_namespace(
        EngineSettings, args, names=ENGINE_FLAGS, timeout_s=args.timeout, clear_hash=not args.keep_hash
    )
    return config, StockfishResource(**dataclasses.asdict(engine))


def cmd_label(args: argparse.Namespace) -> None:
    config, stockfish = config_from_args(args)  # a bad value is said before a store is made
    store = open_store(args.home)
    instance = open_instance(store)
    result = label(store, instance, config, stockfish)
    print_result(result)
    duck.create_views(store)
    exit_on_check_errors(result.check_errors, "label")


def _seconds(text: str) -> float:
    """argparse type of --timeout: seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (0 or more)")
    return value


def _count(text: str) -> int:
    """argparse type of --retries: a whole number, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (0 or more)")
    return value


LIMIT_HELP = {
    "depth": "search depth",
    "nodes": "search nodes instead of a depth",
    "static": "Stockfish's static evaluation (`eval`), no search",
}
"""What each kind of label setting does, as `label`'s flags say it."""
RUN_FLAGS = ["relabel", "order", "retry_failed"]
"""LabelRun's fields that are flags of their own name."""
ENGINE_FLAGS = ["workers", "retries"]
"""EngineSettings' fields that are flags of their own name."""


def add_parser(sub) -> None:
    from assets.labels import LabelsConfig

    s = sub.add_parser("label", help="label distinct positions with Stockfish through Dagster (the labels asset)")
    add_limit_flags(s, LIMIT_HELP.get, Limit())
    add_field_flag(s, LabelRun, "max_positions", "--limit", metavar="N")
    add_field_flag(s, LabelsConfig, "max_minutes", "--minutes", metavar="MINUTES")
    add_arguments(s, EngineSettings, names=["workers"])
    add_arguments(s, LabelRun, names=RUN_FLAGS)
    add_field_flag(s, LabelRun, "shard_lease_ttl_s", "--shard-lease", metavar="SECONDS")
    add_field_flag(s, EngineSettings, "timeout_s", "--timeout", type=_seconds, metavar="SECONDS")
    add_field_flag(s, EngineSettings, "retries", "--retries", type=_count, metavar="N")
    add_field_flag(
        s,
        EngineSettings,
        "clear_hash",
        "--keep-hash",
        action="store_true",
        help="the faster hash-kept setting (clear_hash off): labels depend on what the engine searched "
        "before, stored apart as <engine>_<limit>_hash-kept (default: reproducible labels)",
    )
    s.set_defaults(func=cmd_label)
