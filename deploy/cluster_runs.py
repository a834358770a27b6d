"""What both profiles run in `make cluster-test` (`Plan`), as runs through Dagster's own CLI
(`dagster asset materialize`): the archives ingested, the DuckDB views, labels bounded to a few
shards, one dataset. The cluster and its environment: deploy/cluster_setup.py.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from deploy.cluster_setup import BIN, ClusterTestFailed, _spawn, environ, signal_group

REPO = Path(__file__).resolve().parent.parent
SHARED_PGN = REPO.parent / "shared" / "data" / "pgn"


ARCHIVES = (
    "fics_player-jukey/ficsgamesdb_jukey_2016_nomovetimes.pgn",  # 9 games
    "fics_player-jukey/ficsgamesdb_jukey_2007_nomovetimes.pgn",  # 124 games
)
"""Two small real archives (FICS games of one player), so the whole comparison takes minutes."""


ENGINES_PER_STEP = 1
"""Engines of one labels step in the cluster profile here: the stockfish workers share this machine."""


@dataclass(frozen=True)
class Plan:
    """What both profiles run: the same archives, label bound and dataset."""

    archives: tuple[Path, ...] = tuple(SHARED_PGN / a for a in ARCHIVES)
    shards: tuple[int, ...] = (0, 1, 2, 3)
    """The label bound: only positions of these position-key shards (labels partitions, of 16,
    consecutive) are labelled: about 1,600 of the two archives' 6,548 distinct positions."""
    depth: int = 8
    dataset: str = "piece_values"
    dataset_config: Mapping = field(default_factory=lambda: {"min_elo": 0})
    label_archives: tuple[str, ...] = ()
    """A tighter label bound: only the shards' positions that occur in these archives (their
    partition keys, the file names; the labels asset's `archives`); empty: every archive's."""
    shard_lease_ttl_s: float | None = None
    """The labels runs' shard lease time on an S3 store (the labels asset's `shard_lease_ttl_s`);
    None: the asset's default (pipeline.labels.setting.SHARD_LEASE_TTL_S)."""


@dataclass(frozen=True)
class Launch:
    """One `dagster asset materialize` run: what it selects, its partition and run config."""

    select: str
    partition: str | None = None
    config: Mapping = field(default_factory=dict)
    what: str = ""
    partition_range: str | None = None
    """first...last: one run over a range (assets with a single-run backfill policy)."""


def start_run(launch: Launch, env: Mapping[str, str], logdir: Path, n: int) -> tuple[subprocess.Popen, Path]:
    """Dagster's own CLI runs it (the run's coordinator: with the Celery executor it only
    submits steps and waits on their results)."""
    cmd = [str(BIN / "dagster"), "asset", "materialize", "-m", "assets.definitions", "--select", launch.select]
    if launch.partition:
        cmd += ["--partition", launch.partition]
    if launch.partition_range:
        cmd += ["--partition-range", launch.partition_range]
    if launch.config:
        cmd += ["--config-json", json.dumps(launch.config)]
    log = logdir / f"run-{n:02d}-{launch.select.replace(',', '+')}.log"
    # A run outlives no script: SIGTERM (Dagster's own interrupt) when this process dies.
    return _spawn(cmd, env, logdir, log), log


def run_together(launches: list[Launch], env: Mapping[str, str], logdir: Path, timeout: float = 900.0) -> list[str]:
    """Start the runs at once and wait for all; ClusterTestFailed naming each failed run (with
    its log's last lines). Returns the runs' log paths."""
    counter = run_together.counter  # type: ignore[attr-defined]
    started = []
    for launch in launches:
        counter[0] += 1
        started.append((launch, *start_run(launch, env, logdir, counter[0])))
    failures = []
    deadline = time.monotonic() + timeout
    for launch, proc, log in started:
        try:
            rc = proc.wait(max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            signal_group(proc, signal.SIGKILL)
            proc.wait()
            rc = "timeout"
        if rc != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-12:])
            failures.append(f"run {launch.what or launch.select} failed ({rc}); {log}:\n{tail}")
    if failures:
        raise ClusterTestFailed("\n".join(failures))
    return [str(log) for _, _, log in started]


run_together.counter = [0]  # type: ignore[attr-defined]


def label_launches(plan: Plan, resources: dict, profile: str) -> list[Launch]:
    """The labels runs of the bound: the labels asset is partitioned by position-key shard
    ("00".."15"); the embedded profile labels the range in one run (its single-run backfill
    policy, one engine pool), the cluster profile one run per partition (each one step, one
    Celery task on the stockfish queue), all started at once as a backfill would."""
    from assets.partitions import shard_key

    labels_config: dict = {"limit": "depth", "value": plan.depth}
    if plan.label_archives:
        labels_config["archives"] = list(plan.label_archives)
    if plan.shard_lease_ttl_s is not None:
        labels_config["shard_lease_ttl_s"] = plan.shard_lease_ttl_s
    config = {"ops": {"labels": {"config": labels_config}}, "resources": resources}
    keys = [shard_key(s) for s in plan.shards]
    if profile == "cluster":
        # One engine per step: each stockfish worker here runs one step at a time (concurrency
        # 1), and two of them share this machine's cores. A machine of its own per worker would
        # keep the default (one engine per core).
        config["resources"] = {**resources, "stockfish": {"config": {"workers": ENGINES_PER_STEP}}}
    if profile == "embedded":
        return [Launch("labels", None, config, f"labels {keys[0]}...{keys[-1]}", f"{keys[0]}...{keys[-1]}")]
    return [Launch("labels", k, config, f"labels {k}") for k in keys]


def add_archives(plan: Plan, env: Mapping[str, str]) -> list[str]:
    """Copy the archives into the store (the workers may be elsewhere) and register their
    partitions with the profile's instance; returns the partition keys."""
    import dagster as dg

    from assets.partitions import archives_partitions
    from pipeline.store.store import Store

    with environ(env):
        store = Store(env["CHESS_PIPELINE_HOME"]).ensure()
        keys = [store.add_archive(p, copy=True) for p in plan.archives]
        with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
            instance.add_dynamic_partitions(archives_partitions.name, keys)
    return keys


def views_launch(resources: dict) -> Launch:
    """The run of the DuckDB views asset."""
    return Launch("duckdb_views", None, {"resources": resources})


def ingest(plan: Plan, env: Mapping[str, str], logdir: Path, views: bool = True) -> dict:
    """The archives' partitions (one run each, at once), then the DuckDB views (views=False:
    not); returns the run config's resources (the store root) for the later runs."""
    keys = add_archives(plan, env)
    resources = {"store": {"config": {"root": env["CHESS_PIPELINE_HOME"]}}}
    run_together(
        [
            Launch("games,rejected_games,positions,position_book", k, {"resources": resources}, f"ingest {k}")
            for k in keys
        ],
        env,
        logdir,
    )
    if views:
        run_together([views_launch(resources)], env, logdir)
    return resources


def run_plan(plan: Plan, env: Mapping[str, str], logdir: Path, resources: dict | None = None) -> float:
    """Ingest, views, labels, dataset, as runs through `dagster asset materialize`; returns
    the seconds the labels runs took. The views run beside the labels runs: neither asset reads
    the other (both depend on the ingest's tables only). resources: what ingest() returned when
    the plan's archives are ingested already (then only the labels and the dataset run)."""
    views = []
    if resources is None:
        resources = ingest(plan, env, logdir, views=False)
        views = [views_launch(resources)]
    t0 = time.monotonic()
    run_together(views + label_launches(plan, resources, env["CHESS_PIPELINE_PROFILE"]), env, logdir)
    label_s = time.monotonic() - t0
    dataset_config = {"ops": {plan.dataset: {"config": dict(plan.dataset_config)}}, "resources": resources}
    run_together([Launch(plan.dataset, None, dataset_config)], env, logdir)
    return label_s
