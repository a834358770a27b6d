"""The cluster profile with real servers on loopback (deploy/cluster_test.py does the work).

Postgres, Redis, moto's S3 server and Celery workers started by `dagster-celery worker start`
run the same plan as the embedded profile; the results must match. Then the faults: a worker
process SIGKILLed in the middle of a labels step, and the broker going away mid-run.

The tests share one cluster (the servers and the three workers of `make cluster-test`) and one
ingest of its two archives: each test labels shards of its own (the comparison 00 and 01, the
worker kill 02, the broker loss 03), so none sees another's labels.

Marked `cluster` (and slow: real engine, shared data). Skipped with the reason when the Debian
servers are missing; a failure instead under CHESS_PIPELINE_REQUIRE_SHARED=1 (CI installs them).
"""

import os
import signal
import subprocess
import time

import pytest

from deploy import cluster_test as ct
from deploy.servers import ServerMissing, moto_binary, postgres_bindir, redis_binary, start_redis, stop_pid
from pipeline.labels import SHARD_LEASE_TTL_S

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


@pytest.fixture(scope="session")
def servers():
    """The server binaries: skipped when one is missing, a failure when CI requires them."""
    try:
        postgres_bindir(), redis_binary(), moto_binary()
    except ServerMissing as e:
        if os.environ.get("CHESS_PIPELINE_REQUIRE_SHARED") == "1":
            pytest.fail(f"{e} (CHESS_PIPELINE_REQUIRE_SHARED=1: CI installs them, see .ci/run)")
        pytest.skip(str(e))


def _no_process_left(pids):
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        status = open(f"/proc/{pid}/status").read()
        if "\nState:\tZ" not in status:
            alive.append(pid)
    return alive


PLAN = ct.Plan(shards=(0, 1))
"""The comparison's bound: two labels partitions (about 800 positions), so that both stockfish
workers take one; the archives and the depth are `make cluster-test`'s."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, servers, shared_data, stockfish):
    """Postgres, Redis, moto S3 and `make cluster-test`'s three workers, for the whole module;
    every worker stopped by its PID afterwards (checked)."""
    with ct.cluster(tmp_path_factory.mktemp("cluster")) as c:
        pids = [p.pid for p in c.workers.values()]
        yield c
    assert not _no_process_left(pids), "a worker outlived the cluster"


@pytest.fixture(scope="module")
def ingested(cluster):
    """The plan's two archives ingested once into the cluster's store (one run per archive
    partition on the dagster worker, then the views); the run config's resources."""
    return ct.ingest(PLAN, cluster.env, cluster.logdir)


def test_cluster_profile_gives_the_embedded_results(tmp_path, cluster, ingested):
    lines = []
    result = ct.compare_on(cluster, PLAN, tmp_path / "embedded", out=lines.append, resources=ingested)
    ct.report(result, out=lines.append)
    text = "\n".join(lines)
    assert not result.differences, text
    # Independent facts about the two archives (the shared data's README: 9 + 124 games).
    assert result.cluster.games == 133, text
    assert result.cluster.labels and sum(result.cluster.dataset_rows.values()) > 0, text
    # The work was spread: the ingest partitions and the labels partitions ran on Celery workers,
    # more than one of them, and the inspect stats count what the event logs show.
    workers = {w for w, _, _ in result.steps}
    assert len(workers) >= 2, text
    assert not result.routing, text  # labels steps on the stockfish workers, the rest on dagster-1
    assert sum(result.task_counts.values()) == len(result.steps), text


def _labels_launch(resources, key):
    """The cluster's run of one labels partition (one engine: the workers share this machine)."""
    (launch,) = ct.label_launches(ct.Plan(shards=(int(key),)), resources, "cluster")
    return launch


def _shard_lease_left(env, shard: str) -> bool:
    """Whether a lease object of the shard is still in the store (its holder died holding it)."""
    from pipeline import storage
    from pipeline.store import Store

    with ct.environ(env):
        root = Store(env["CHESS_PIPELINE_HOME"]).root
        return any(f"shard-{shard}" in o["Key"] for o in storage.list_objects(root / storage.LEASES))


def _shard_facts(env, shard):
    """(distinct positions of the shard, labels of the shard, labels beyond one per position)."""
    from pipeline import duck
    from pipeline.store import Store

    with ct.environ(env):
        store = Store(env["CHESS_PIPELINE_HOME"])
        duck.refresh_views(store)
        distinct = duck.query(
            store, "SELECT count(DISTINCT position_key) AS n FROM positions WHERE position_key % 16 = ?", [shard]
        ).to_pylist()[0]["n"]
        row = duck.query(
            store,
            "SELECT count(*) AS n, count(*) - count(DISTINCT position_key) AS dup FROM labels "
            "WHERE position_key % 16 = ? AND limit_kind = 'depth' AND limit_value = 8 AND hash_cleared",
            [shard],
        ).to_pylist()[0]
    return distinct, row["n"], row["dup"]


def test_worker_killed_mid_labels_step_then_rerun_loses_and_repeats_nothing(cluster, ingested):
    c, shard = cluster, "02"
    run, log = ct.start_run(_labels_launch(ingested, shard), c.env, c.logdir, 90)
    name, pid = ct.wait_for_step_process(c.workers)
    assert ct.queue_of(name) == (ct.STOCKFISH_QUEUE,), name
    deadline = time.monotonic() + 120
    while not _shard_lease_left(c.env, shard) and time.monotonic() < deadline:
        time.sleep(0.2)  # until the step holds the shard's lease: then it is labelling
    assert _shard_lease_left(c.env, shard), "the step never took the shard's lease"
    time.sleep(2.0)  # engines busy on the shard's positions
    os.kill(pid, signal.SIGKILL)  # the worker process running the step, engines and all
    killed_at = time.monotonic()
    assert run.wait(300) != 0, log.read_text()[-3000:]
    distinct, before, _ = _shard_facts(c.env, int(shard))
    assert before < distinct, "the kill came after the step had finished: nothing was tested"
    # The dead step's lease stays until it expires (SHARD_LEASE_TTL_S after its last renewal):
    # a re-run before then leaves the shard to its holder (a warning, nothing labelled twice) ...
    assert _shard_lease_left(c.env, shard)
    ct.run_together([_labels_launch(ingested, shard)], c.env, c.logdir)
    assert _shard_facts(c.env, int(shard))[1:] == (before, 0)
    time.sleep(max(0.0, SHARD_LEASE_TTL_S + 5 - (time.monotonic() - killed_at)))
    # Re-run the partition: it must complete the shard, and label no position twice.
    ct.run_together([_labels_launch(ingested, shard)], c.env, c.logdir)
    distinct, labelled, dup = _shard_facts(c.env, int(shard))
    assert (labelled, dup) == (distinct, 0)


def test_broker_gone_mid_run_fails_the_run_clearly_and_a_rerun_completes(cluster, ingested):
    c, shard = cluster, "03"
    run, log = ct.start_run(_labels_launch(ingested, shard), c.env, c.logdir, 91)
    name, _ = ct.wait_for_step_process(c.workers)
    port = c.broker.port
    stop_pid(c.broker_proc, signal.SIGKILL)  # the broker goes away mid-run
    assert run.wait(300) != 0
    text = log.read_text()
    assert f"127.0.0.1:{port}" in text and "Connection refused" in text, text[-3000:]
    # The broker comes back on its port (empty: no persistence); the workers reconnect.
    c.broker, c.broker_proc = start_redis(c.tmp / "redis-again", port)
    deadline = time.monotonic() + 120
    while ct.step_process(c.workers[name]) is not None and time.monotonic() < deadline:
        time.sleep(1)  # the orphaned step finishes its shard (its result has nowhere to go)
    ct.run_together([_labels_launch(ingested, shard)], c.env, c.logdir)
    distinct, labelled, dup = _shard_facts(c.env, int(shard))
    assert (labelled, dup) == (distinct, 0)


def test_servers_stop_by_pid_and_name_what_to_install(tmp_path, monkeypatch, servers):
    from deploy import servers as srv

    with srv.postgres() as pg, srv.redis() as rd, srv.moto_s3() as url:
        pids = [pg.pid, rd.pid]
        assert url.startswith("http://127.0.0.1:")
        out = (
            subprocess.run(["ss", "-ltnp"], capture_output=True, text=True).stdout
            if os.path.exists("/usr/bin/ss")
            else ""
        )
        for line in out.splitlines():
            if f":{pg.port} " in line or f":{rd.port} " in line:
                assert "127.0.0.1:" in line, line  # loopback only
    assert not _no_process_left(pids)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(srv.Path, "exists", lambda self: False)
    with pytest.raises(ServerMissing, match="apt-get install -y redis-server"):
        srv.redis_binary()
