"""`make cluster-test`: the cluster profile on this machine, with real servers, against the embedded one.

Starts Postgres (Dagster's runs, event logs, schedules), Redis (the Celery broker and result
backend), moto's S3 server, and Celery workers started with `dagster-celery worker start`: two
on the `stockfish` queue (the labels steps) and one on `dagster` (every other step). Then it
runs the pipeline through Dagster's own CLI (`dagster asset materialize -m assets.definitions`,
so the Definitions' Celery executor sends each step to the workers): two real archives from
../shared/data/pgn ingested (one run per archive partition, at once), the DuckDB views, labels
at depth 8 bounded to a few shards (a few thousand positions; one run per group of shards, at
once, so both stockfish workers get one), and one labelled dataset. It prints which worker ran
which step and each worker's task count (Celery's inspect stats), runs the same plan through
the embedded profile (SQLite instance, multiprocess executor, a local store) and compares: the
same games, positions and dataset rows, and the same labels for the same positions (the
reproducible label setting: hash cleared, one thread). Every server and worker it started is
stopped by its PID on the way out; the exit status is non-zero if any run or comparison failed.

The store of the cluster side is on the moto S3 server (`s3://chess-cluster/store`) when the
store supports S3 roots (pipeline/storage.py), else a temporary local folder every worker shares.

    .venv/bin/python -m deploy.cluster_test [--store auto|s3|local] [--keep]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from deploy.servers import (
    PostgresServer,
    RedisServer,
    ServerFailed,
    ServerMissing,
    die_with_parent,
    moto_s3,
    postgres,
    stop_pid,
)

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SHARED_PGN = REPO.parent / "shared" / "data" / "pgn"
ARCHIVES = (
    "fics_player-jukey/ficsgamesdb_jukey_2016_nomovetimes.pgn",  # 9 games
    "fics_player-jukey/ficsgamesdb_jukey_2007_nomovetimes.pgn",  # 124 games
)
"""Two small real archives (FICS games of one player), so the whole comparison takes minutes."""
BUCKET = "chess-cluster"
ENGINES_PER_STEP = 1
"""Engines of one labels step in the cluster profile here: the stockfish workers share this machine."""
STOCKFISH_QUEUE = "stockfish"
DAGSTER_QUEUE = "dagster"


@dataclass(frozen=True)
class Worker:
    """One `dagster-celery worker start` process: its name (Celery's node name is name@host)
    and the queues it takes tasks from; concurrency: steps it runs at once."""

    name: str
    queues: tuple[str, ...]
    concurrency: int = 1


WORKERS = (
    Worker("stockfish-1", (STOCKFISH_QUEUE,)),
    Worker("stockfish-2", (STOCKFISH_QUEUE,)),
    Worker("dagster-1", (DAGSTER_QUEUE,)),
)


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
    None: the asset's default (pipeline.labels.SHARD_LEASE_TTL_S)."""


class ClusterTestFailed(RuntimeError):
    """A run or a comparison failed; the message says which."""


# --- environment ----------------------------------------------------------------------------


@contextlib.contextmanager
def environ(values: Mapping[str, str]) -> Iterator[None]:
    """os.environ with these values set, restored afterwards (the in-process Dagster instance
    reads its dagster.yaml's `env:` settings from here)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def base_env(tmp: Path) -> dict[str, str]:
    """The environment every process of a profile gets: this one's, the venv first on PATH, no
    AWS configuration from the user's home (moto takes any key)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "CHESS_PIPELINE_", "AWS_"))}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["CHESS_PIPELINE_CACHE"] = str(tmp / "cache")
    env["AWS_CONFIG_FILE"] = env["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    return env


def s3_store_supported() -> bool:
    """Whether the store takes `s3://bucket/prefix` roots (pipeline/storage.py)."""
    try:
        from pipeline.store import Store

        return Store(f"s3://{BUCKET}/store").remote
    except Exception:
        return False


def write_instance(home: Path, profile: str) -> Path:
    """DAGSTER_HOME of a profile: its dagster.yaml from deploy/<profile>/."""
    from assets.profile import dagster_yaml

    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text(dagster_yaml(profile))  # type: ignore[arg-type]
    return home


def embedded_env(tmp: Path) -> dict[str, str]:
    env = base_env(tmp)
    env.update(
        CHESS_PIPELINE_PROFILE="embedded",
        DAGSTER_HOME=str(write_instance(tmp / "dagster", "embedded")),
        CHESS_PIPELINE_HOME=str(tmp / "store"),
    )
    return env


def cluster_env(tmp: Path, pg: PostgresServer, broker: RedisServer, s3_endpoint: str | None) -> dict[str, str]:
    """The cluster profile's settings: Postgres, the broker, the store (S3 when s3_endpoint)."""
    env = base_env(tmp)
    env.update(pg.env())
    env.update(
        CHESS_PIPELINE_PROFILE="cluster",
        CHESS_PIPELINE_BROKER_URL=broker.url,
        DAGSTER_HOME=str(write_instance(tmp / "dagster", "cluster")),
    )
    if s3_endpoint:
        env.update(
            CHESS_PIPELINE_HOME=f"s3://{BUCKET}/store",
            CHESS_PIPELINE_S3_ENDPOINT=s3_endpoint,
            AWS_ACCESS_KEY_ID="cluster-test",
            AWS_SECRET_ACCESS_KEY="cluster-test",
            AWS_REGION="us-east-1",
        )
    else:
        env["CHESS_PIPELINE_HOME"] = str(tmp / "shared-store")
    return env


def make_bucket(endpoint: str) -> None:
    import boto3

    boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="cluster-test",
        aws_secret_access_key="cluster-test",
        region_name="us-east-1",
    ).create_bucket(Bucket=BUCKET)


def migrate_instance(env: Mapping[str, str], logdir: Path) -> None:
    """`dagster instance migrate` once, before any worker or run loads the instance: on an empty
    database it creates the instance's tables. Without it, the first processes to load the
    instance create them themselves, and several at once (workers started together) race: one
    fails with "type \"runs\" already exists" (psycopg2's DuplicateObject) and exits. Running
    it again on a migrated database changes nothing."""
    logdir.mkdir(parents=True, exist_ok=True)
    log = logdir / "instance-migrate.log"
    with open(log, "wb") as out:
        done = subprocess.run(
            [str(BIN / "dagster"), "instance", "migrate"],
            env=dict(env),
            cwd=logdir,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    if done.returncode:
        tail = log.read_text(errors="replace").splitlines()[-15:]
        raise ClusterTestFailed(f"dagster instance migrate exited with status {done.returncode}:\n" + "\n".join(tail))


# --- workers --------------------------------------------------------------------------------


def celery_yaml() -> Path:
    from assets.profile import celery_yaml_path

    return celery_yaml_path()


def _spawn(cmd: list[str], env: Mapping[str, str], logdir: Path, log: Path) -> subprocess.Popen:
    """cmd in logdir, its output (stdout and stderr) into log, in a process group of its own
    (so signal_group reaches its children: Celery's pool processes, engines, a run's step
    processes), and sent SIGTERM, the graceful stop of both Celery and Dagster, when this
    process dies."""
    logdir.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        return subprocess.Popen(
            cmd,
            env=dict(env),
            cwd=logdir,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent(signal.SIGTERM),
        )


def start_worker(worker: Worker, env: Mapping[str, str], logdir: Path) -> subprocess.Popen:
    """`dagster-celery worker start` for one worker, in a process group of its own (the
    wrapper, the Celery main process, its pool processes and their engines), so stop_worker
    ends them all by the wrapper's PID."""
    cmd = [str(BIN / "dagster-celery"), "worker", "start", "-A", "dagster_celery.app", "-y", str(celery_yaml())]
    # One -q with the queues comma-separated: dagster-celery turns each -q into a -Q of its own,
    # and Celery 5 keeps only the last -Q (a worker given two would listen on one).
    cmd += ["-n", worker.name, "-l", "INFO", "-q", ",".join(worker.queues)]
    cmd += ["--", f"--concurrency={worker.concurrency}", "--without-gossip", "--without-mingle"]
    # Should this script die without stopping it: the wrapper gets SIGTERM and Celery's warm
    # shutdown; the broker dies with this script too (servers.py), after which a Celery main
    # process gives up reconnecting (broker_connection_max_retries) and exits.
    return _spawn(cmd, env, logdir, logdir / f"{worker.name}.log")


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def stop_worker(proc: subprocess.Popen, grace: float = 20.0) -> None:
    """Warm shutdown (SIGTERM to the worker's process group), SIGKILL after grace seconds."""
    signal_group(proc, signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    signal_group(proc, signal.SIGKILL)  # whatever is left of the group (pool processes, engines)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)


def celery_app(broker_url: str):
    from celery import Celery

    return Celery("cluster-test", broker=broker_url, backend=broker_url)


def wait_for_workers(
    broker_url: str, names: list[str], procs: list[subprocess.Popen], logdir: Path, timeout: float = 180.0
) -> None:
    """Until every worker answers a ping (each imports Dagster first: seconds on a busy machine)."""
    app = celery_app(broker_url)
    deadline = time.monotonic() + timeout
    seen: set[str] = set()
    while time.monotonic() < deadline:
        for name, proc in zip(names, procs):
            if proc.poll() is not None:
                log = (logdir / f"{name}.log").read_text(errors="replace").splitlines()[-15:]
                raise ClusterTestFailed(f"worker {name} exited with status {proc.returncode}:\n" + "\n".join(log))
        replies = app.control.ping(timeout=1.0) or []
        seen = {host.split("@")[0] for reply in replies for host in reply}
        if set(names) <= seen:
            return
        time.sleep(1.0)
    missing = sorted(set(names) - seen)
    raise ClusterTestFailed(f"workers {missing} did not answer within {timeout:.0f} s (logs: {logdir})")


def worker_task_counts(broker_url: str) -> dict[str, int]:
    """Steps each worker has run since it started (Celery's inspect stats)."""
    stats = celery_app(broker_url).control.inspect(timeout=5.0).stats() or {}
    return {host.split("@")[0]: sum(s.get("total", {}).values()) for host, s in stats.items()}


@dataclass
class Cluster:
    env: dict[str, str]
    tmp: Path
    pg: PostgresServer
    broker: RedisServer
    broker_proc: subprocess.Popen
    s3_endpoint: str | None
    workers: dict[str, subprocess.Popen]

    @property
    def logdir(self) -> Path:
        return self.tmp / "logs"

    def start_workers(self, workers: tuple[Worker, ...]) -> None:
        for w in workers:
            self.workers[w.name] = start_worker(w, self.env, self.logdir)
        names = [w.name for w in workers]
        wait_for_workers(self.broker.url, names, [self.workers[n] for n in names], self.logdir)

    def stop_workers(self) -> None:
        for proc in self.workers.values():
            stop_worker(proc)
        self.workers.clear()


@contextlib.contextmanager
def cluster(
    tmp: Path, workers: tuple[Worker, ...] = WORKERS, store: str = "auto", start_workers: bool = True
) -> Iterator[Cluster]:
    """Postgres, Redis, moto S3 and the workers, all on 127.0.0.1; everything stopped by PID after.

    store: s3 (the store on the moto server), local (a temp folder the workers share) or auto
    (s3 when the store supports it)."""
    from deploy.servers import start_redis

    use_s3 = s3_store_supported() if store == "auto" else store == "s3"
    with postgres() as pg, moto_s3() as s3_endpoint:
        broker, broker_proc = start_redis(tmp / "redis")
        c = Cluster({}, tmp, pg, broker, broker_proc, s3_endpoint if use_s3 else None, {})
        try:
            if use_s3:
                make_bucket(s3_endpoint)
            c.env = cluster_env(tmp, pg, broker, c.s3_endpoint)
            migrate_instance(c.env, c.logdir)
            if start_workers:
                c.start_workers(workers)
            yield c
        finally:
            c.stop_workers()
            stop_pid(c.broker_proc)


# --- running the plan -----------------------------------------------------------------------


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
    from pipeline.store import Store

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
        [Launch("games,rejected_games,positions", k, {"resources": resources}, f"ingest {k}") for k in keys],
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


# --- what a run left in the store -----------------------------------------------------------


@dataclass
class Summary:
    games: int
    positions: int
    distinct: int
    dataset_rows: dict[str, int]
    labels: dict[int, tuple]
    """position_key -> (cp, mate, best_move, depth, nodes) of the depth-`depth` labels."""
    duplicate_labels: int
    """Labels beyond one per position under the setting (must be 0)."""


def summarize(plan: Plan, env: Mapping[str, str]) -> Summary:
    from pipeline import duck
    from pipeline.store import Store

    with environ(env):
        store = Store(env["CHESS_PIPELINE_HOME"])
        duck.refresh_views(store)

        def one(sql: str, params=None):
            return duck.query(store, sql, params).to_pylist()

        games = one("SELECT count(*) AS n FROM games")[0]["n"]
        positions = one("SELECT count(*) AS n FROM positions")[0]["n"]
        distinct = one("SELECT count(DISTINCT position_key) AS n FROM positions")[0]["n"]
        rows = {
            r["split"]: r["n"]
            for r in one("SELECT split, count(*) AS n FROM datasets WHERE dataset = ? GROUP BY split", [plan.dataset])
        }
        labels = one(
            "SELECT position_key, cp, mate, best_move, depth, nodes FROM labels "
            "WHERE limit_kind = 'depth' AND limit_value = ? AND hash_cleared",
            [plan.depth],
        )
    table: dict[int, tuple] = {}
    dup = 0
    for r in labels:
        if r["position_key"] in table:
            dup += 1
        table[r["position_key"]] = (r["cp"], r["mate"], r["best_move"], r["depth"], r["nodes"])
    return Summary(games, positions, distinct, rows, table, dup)


def compare(a: Summary, b: Summary, names: tuple[str, str] = ("embedded", "cluster")) -> list[str]:
    """The differences between two profiles' results (empty: the same)."""
    out = []
    for what in ("games", "positions", "distinct", "dataset_rows"):
        if getattr(a, what) != getattr(b, what):
            out.append(f"{what}: {names[0]} {getattr(a, what)} != {names[1]} {getattr(b, what)}")
    for s, name in zip((a, b), names):
        if s.duplicate_labels:
            out.append(f"{name}: {s.duplicate_labels} positions labelled twice under one setting")
        if not s.labels:
            out.append(f"{name}: no labels")
    if set(a.labels) != set(b.labels):
        out.append(
            f"labelled positions differ: {len(set(a.labels) - set(b.labels))} only in {names[0]}, "
            f"{len(set(b.labels) - set(a.labels))} only in {names[1]}"
        )
    differing = [k for k in set(a.labels) & set(b.labels) if a.labels[k] != b.labels[k]]
    if differing:
        k = differing[0]
        out.append(f"{len(differing)} positions labelled differently, e.g. {k}: {a.labels[k]} != {b.labels[k]}")
    return out


# --- which worker ran what ------------------------------------------------------------------


def steps_by_worker(env: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(worker, run's partition or '-', step) for every step a Celery worker ran, from the runs'
    event logs in Postgres (dagster-celery's "Executing steps ... in celery worker" event)."""
    import dagster as dg

    out = []
    with environ(env), dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        for run in instance.get_runs():
            for record in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
                event = record.dagster_event
                if event is None:
                    continue
                meta = event.engine_event_data.metadata
                if "Celery worker" in meta:
                    worker = str(meta["Celery worker"].value).split("@")[0]
                    out.append((worker, run.tags.get("dagster/partition", "-"), event.step_key or "?"))
    return sorted(out)


HANDED_OVER = ("Submitting celery task", "Launching subprocess")
"""The executors' events that hand a step over: dagster-celery's engine event, the multiprocess
executor's STEP_WORKER_STARTING."""


@dataclass(frozen=True)
class StepTiming:
    run_id: str
    step: str
    handed: float
    """When the run's executor handed the step over: dagster-celery's "Submitting celery task"
    (the cluster profile), the multiprocess executor's "Launching subprocess" (embedded)."""
    picked: float
    """When a Celery worker took the task ("Executing steps ... in celery worker"); for the
    multiprocess executor the same as handed (no queue)."""
    started: float
    """STEP_START, in the worker (or the step's subprocess)."""
    ended: float
    """STEP_SUCCESS or STEP_FAILURE."""

    @property
    def queued(self) -> float:
        """Seconds in the queue, waiting for a free worker."""
        return self.picked - self.handed

    @property
    def overhead(self) -> float:
        """Seconds from taking the step to starting it: loading the code location, building the
        plan, starting the resources (a Celery worker, or the multiprocess executor's subprocess)."""
        return self.started - self.picked

    @property
    def seconds(self) -> float:
        return self.ended - self.started


def step_timings(env: Mapping[str, str]) -> list[StepTiming]:
    """Every step of every run in the profile's instance, from the event logs."""
    import dagster as dg

    out = []
    with environ(env), dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        for run in instance.get_runs():
            handed: dict[str, float] = {}
            picked: dict[str, float] = {}
            started: dict[str, float] = {}
            for record in instance.all_logs(run.run_id):
                event = record.dagster_event
                if event is None or not event.step_key:
                    continue
                kind, key = event.event_type_value, event.step_key
                message = event.message or ""
                if kind in ("ENGINE_EVENT", "STEP_WORKER_STARTING") and message.startswith(HANDED_OVER):
                    handed.setdefault(key, record.timestamp)
                elif kind == "ENGINE_EVENT" and "Celery worker" in event.engine_event_data.metadata:
                    picked[key] = record.timestamp
                elif kind == "STEP_START":
                    started[key] = record.timestamp
                elif kind in ("STEP_SUCCESS", "STEP_FAILURE") and key in handed and key in started:
                    t = StepTiming(run.run_id, key, handed[key], picked.get(key, handed[key]), started[key], 0.0)
                    out.append(replace(t, ended=record.timestamp))
    return out


def label_rates(env: Mapping[str, str]) -> list[dict]:
    """Each labels materialisation's own figures (the asset's metadata): shards, labelled,
    seconds, positions_per_second, engines."""
    import dagster as dg

    out = []
    with environ(env), dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        records = instance.fetch_materializations(dg.AssetKey("labels"), limit=1000).records
        for r in records:
            meta = r.asset_materialization.metadata if r.asset_materialization else {}
            keys = ("shards", "labelled", "seconds", "positions_per_second", "engines")
            out.append({k: meta[k].value for k in keys if k in meta})
    return out


def median(values: list[float]) -> float:
    v = sorted(values)
    return (v[len(v) // 2] + v[(len(v) - 1) // 2]) / 2 if v else float("nan")


def queue_of(worker: str, workers: tuple[Worker, ...] = WORKERS) -> tuple[str, ...]:
    return next((w.queues for w in workers if w.name == worker), ())


def check_routing(steps: list[tuple[str, str, str]], workers: tuple[Worker, ...] = WORKERS) -> list[str]:
    """Labels steps on stockfish workers only, every other step on dagster workers."""
    out = []
    for worker, _, step in steps:
        want = STOCKFISH_QUEUE if step.startswith("labels") else DAGSTER_QUEUE
        if want not in queue_of(worker, workers):
            queues = ", ".join(queue_of(worker, workers))
            out.append(f"step {step} ran on {worker} (queues {queues}), not on a {want} worker")
    if not any(s.startswith("labels") for _, _, s in steps):
        out.append("no labels step ran on a Celery worker")
    return out


# --- faults ---------------------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    """The processes whose parent is pid (forked by any of its threads)."""
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return kids


def _is_engine(pid: int) -> bool:
    """Whether the process runs a Stockfish binary (its argv[0] is named stockfish*)."""
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return False
    return Path(argv0).name.startswith("stockfish")


def step_process(worker: subprocess.Popen) -> int | None:
    """The PID of the worker's pool process that runs engines right now (a labels step), or None.

    The tree of a worker: dagster-celery (the PID we started) -> celery main -> pool
    processes -> stockfish engines."""
    stack, seen = [worker.pid], set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        kids = _children(pid)
        if any(_is_engine(k) for k in kids):
            return pid
        stack.extend(kids)
    return None


def wait_for_step_process(workers: Mapping[str, subprocess.Popen], timeout: float = 300.0) -> tuple[str, int]:
    """(worker name, PID) of the first worker process seen running engines."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, proc in workers.items():
            pid = step_process(proc)
            if pid is not None:
                return name, pid
        time.sleep(0.2)
    raise ClusterTestFailed(f"no worker started a labels step within {timeout:.0f} s")


# --- the whole comparison -------------------------------------------------------------------


@dataclass
class Result:
    embedded: Summary
    cluster: Summary
    steps: list[tuple[str, str, str]]
    task_counts: dict[str, int]
    label_seconds: dict[str, float]
    differences: list[str]
    """Where the two profiles' results differ (empty: the same)."""
    routing: list[str]
    """Steps that ran on a worker of the wrong queue."""

    @property
    def problems(self) -> list[str]:
        return self.differences + self.routing


def run_comparison(tmp: Path, plan: Plan = Plan(), store: str = "auto", out=print) -> Result:
    """The plan through both profiles, compared; never raises for a difference (see problems)."""
    check_archives(plan)
    with cluster(tmp / "cluster", store=store) as c:
        return compare_on(c, plan, tmp / "embedded", out)


def check_archives(plan: Plan) -> None:
    for p in plan.archives:
        if not p.is_file():
            raise ClusterTestFailed(f"archive {p} not found (the shared data lives in ../shared/data)")


def compare_on(
    c: Cluster, plan: Plan, embedded_tmp: Path, out=print, resources: dict | None = None, together: bool = False
) -> Result:
    """The plan on a running cluster, then through the embedded profile (its instance and store
    under embedded_tmp), compared. resources: the cluster's store has the plan's archives
    ingested already (what ingest() returned); the embedded side ingests them itself.
    together: run the embedded side while the cluster side runs, not after it (they share no
    instance, store or log folder), so the comparison takes about the longer of the two rather
    than their sum; each side's seconds then include the other's load on the machine. Only with
    resources: both sides ingesting at once would race on os.environ (ingest sets the profile's
    variables in this process), so together without resources is refused."""
    if together and resources is None:
        raise ValueError(
            "compare_on(together=True) needs resources (the cluster store's archives ingested first, "
            "what ingest() returned): two ingests at once would race on os.environ"
        )
    seconds = {}
    out(
        f"cluster: postgres 127.0.0.1:{c.pg.port}, redis {c.broker.url}, "
        f"store {c.env['CHESS_PIPELINE_HOME']}" + (f" on {c.s3_endpoint}" if c.s3_endpoint else " (local folder)")
    )
    out(f"workers: {', '.join(f'{n} (pid {p.pid})' for n, p in c.workers.items())}")
    env = embedded_env(embedded_tmp)

    def embedded() -> tuple[float, float]:
        t0 = time.monotonic()
        return run_plan(plan, env, embedded_tmp / "logs"), time.monotonic() - t0

    with ThreadPoolExecutor(1) as side:
        embedded_run = side.submit(embedded) if together else None
        t0 = time.monotonic()
        seconds["cluster labels"] = run_plan(plan, c.env, c.logdir, resources)
        seconds["cluster total"] = time.monotonic() - t0
        if embedded_run is None:
            embedded_run = side.submit(embedded)
        seconds["embedded labels"], seconds["embedded total"] = embedded_run.result()
    steps = steps_by_worker(c.env)
    counts = worker_task_counts(c.broker.url)
    cluster_summary = summarize(plan, c.env)
    embedded_summary = summarize(plan, env)
    differences = compare(embedded_summary, cluster_summary)
    return Result(embedded_summary, cluster_summary, steps, counts, seconds, differences, check_routing(steps))


def measure(tmp: Path, plan: Plan = Plan(), out=print) -> dict:
    """The README's scaling figures, on a local shared store: labels throughput with one
    stockfish worker (shards 0-3), then with two (shards 4-7: as many positions, give or take),
    each worker one engine; each engine's own positions/s; the Celery overhead per step."""
    first = tuple(plan.shards)
    second = tuple(s + len(first) for s in first)
    dagster_w, sf1, sf2 = (
        Worker("dagster-1", (DAGSTER_QUEUE,)),
        Worker("stockfish-1", (STOCKFISH_QUEUE,)),
        Worker("stockfish-2", (STOCKFISH_QUEUE,)),
    )
    figures: dict = {}
    with cluster(tmp, workers=(dagster_w, sf1), store="local") as c:
        resources = ingest(plan, c.env, c.logdir)
        for workers, shards in ((1, first), (2, second)):
            if workers == 2:
                c.start_workers((sf2,))
            before = {r.get("shards") for r in label_rates(c.env)}
            t0 = time.monotonic()
            run_together(label_launches(replace(plan, shards=shards), resources, "cluster"), c.env, c.logdir)
            wall = time.monotonic() - t0
            done = [r for r in label_rates(c.env) if r.get("shards") not in before]
            labelled = sum(r["labelled"] for r in done)
            figures[f"{workers} worker(s)"] = {
                "shards": shards,
                "labelled": labelled,
                "wall_s": round(wall, 1),
                "positions_per_s": round(labelled / wall, 1),
            }
        rates = [r["positions_per_second"] for r in label_rates(c.env) if r.get("engines") == 1]
        timings = step_timings(c.env)
    figures["per engine positions/s (median of steps)"] = round(median(rates), 1)
    figures["celery worker overhead per step, s (median: task taken to STEP_START)"] = round(
        median([t.overhead for t in timings]), 2
    )
    figures["celery queue wait per step, s (median: submitted to taken)"] = round(
        median([t.queued for t in timings]), 2
    )
    figures["labels step seconds (median)"] = round(median([t.seconds for t in timings if t.step == "labels"]), 1)
    emb = embedded_env(tmp / "embedded")
    ingest(plan, emb, tmp / "embedded" / "logs")
    figures["multiprocess overhead per step, s (median: subprocess launched to STEP_START, embedded ingest)"] = round(
        median([t.overhead for t in step_timings(emb)]), 2
    )
    for k, v in figures.items():
        out(f"{k}: {v}")
    return figures


def report(r: Result, out=print) -> None:
    out("steps by worker (from the runs' event logs in Postgres):")
    for worker, partition, step in r.steps:
        out(f"  {worker:12} {step:40} partition {partition}")
    out("tasks per worker (Celery inspect stats): " + ", ".join(f"{w} {n}" for w, n in sorted(r.task_counts.items())))
    per_step = Counter(w for w, _, _ in r.steps)
    out("steps per worker (event logs):          " + ", ".join(f"{w} {n}" for w, n in sorted(per_step.items())))
    s = r.cluster
    out(
        f"cluster:  {s.games} games, {s.positions} positions ({s.distinct} distinct), {len(s.labels)} labels, "
        f"dataset rows {s.dataset_rows}"
    )
    s = r.embedded
    out(
        f"embedded: {s.games} games, {s.positions} positions ({s.distinct} distinct), {len(s.labels)} labels, "
        f"dataset rows {s.dataset_rows}"
    )
    out("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in r.label_seconds.items()))
    if r.problems:
        out("DIFFERENCES:\n  " + "\n  ".join(r.problems))
    else:
        out("same games, positions, dataset rows and labels in both profiles")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make cluster-test", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--store", choices=("auto", "s3", "local"), default="auto", help="where the cluster's store lives"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temp folder (logs) afterwards")
    parser.add_argument(
        "--measure", action="store_true", help="measure the README's scaling figures instead (1 vs 2 workers, overhead)"
    )
    args = parser.parse_args(argv)
    # SIGTERM (e.g. a CI timeout) unwinds like Ctrl-C, so every server and worker is stopped.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    tmp = Path(tempfile.mkdtemp(prefix="cluster-test-"))
    try:
        if args.measure:
            measure(tmp)
            return 0
        result = run_comparison(tmp, store=args.store)
        report(result)
        return 1 if result.problems else 0
    except (ServerMissing, ServerFailed, ClusterTestFailed) as e:
        print(f"cluster-test: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("cluster-test: interrupted; servers and workers stopped", file=sys.stderr)
        return 130
    finally:
        if args.keep:
            print(f"cluster-test: logs kept in {tmp}", file=sys.stderr)
        else:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
