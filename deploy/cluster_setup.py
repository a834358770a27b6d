"""The cluster of `make cluster-test` started on this machine: Postgres, Redis, moto's S3 server
(deploy/servers.py starts each) and the Celery workers started with `dagster-celery worker
start`, with each profile's environment (instance, broker, store) and the workers' start, stop and
readiness. Everything it starts is stopped by its PID on the way out (`cluster`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from deploy.servers import PostgresServer, RedisServer, die_with_parent, moto_s3, postgres, stop_pid

BIN = Path(sys.executable).parent
BUCKET = "chess-cluster"
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
    """Whether the store takes `s3://bucket/prefix` roots (pipeline/store/storage.py)."""
    try:
        from pipeline.store.store import Store

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
