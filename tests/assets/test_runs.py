"""Runs killed with SIGKILL are marked failed; their progress files go (issue 13, item 10)."""

import os
import signal
import subprocess
import sys

import dagster as dg
import pytest

from pipeline.store.store import Store

RUNNER = """
import os, sys, time
from pathlib import Path
import dagster as dg
from cli import _instance
from pipeline.store.store import Store

@dg.asset
def slow():
    print("STARTED", flush=True)
    time.sleep(600)

store = Store(Path(sys.argv[1])).ensure()
instance = _instance(store)
(store.root / "labels").mkdir(exist_ok=True)
(store.root / "labels" / f".progress-{os.getpid()}.json").write_text("{}")  # as the CLI's bar does
dg.materialize([slow], instance=instance)
"""


def _start(store, env):
    p = subprocess.Popen([sys.executable, "-c", RUNNER, str(store.root)], env=env, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "STARTED"
    return p


@pytest.mark.slow  # two Dagster runs in processes of their own: 6 to 19 s on the shared 2-core machine
def test_a_killed_cli_run_is_marked_failed_at_the_next_start(tmp_path, monkeypatch):
    store = Store(tmp_path / "store").ensure()
    home = tmp_path / "dagster"
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    killed, alive = _start(store, env), _start(store, env)
    try:
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait()
        monkeypatch.setenv("DAGSTER_HOME", str(home))
        from cli import _instance

        with dg.DagsterInstance.get() as before:
            assert {r.status for r in before.get_runs()} == {dg.DagsterRunStatus.STARTED}
        instance = _instance(store)
        try:
            status = {}
            for record in instance.get_run_records():
                [entry] = instance.all_logs(record.dagster_run.run_id, of_type=dg.DagsterEventType.RUN_START)
                status[entry.dagster_event.pid] = record.dagster_run.status
            assert status == {killed.pid: dg.DagsterRunStatus.FAILURE, alive.pid: dg.DagsterRunStatus.STARTED}
            [failed] = instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE]))
            message = [e.message for e in instance.all_logs(failed.run_id, of_type=dg.DagsterEventType.RUN_FAILURE)]
            assert any(f"pid {killed.pid}) is gone" in m for m in message)
            assert instance.run_monitoring_enabled  # the daemon's start and cancel timeouts
        finally:
            instance.dispose()
        assert sorted(p.name for p in (store.root / "labels").iterdir()) == [f".progress-{alive.pid}.json"]
    finally:
        for p in (killed, alive):
            if p.poll() is None:
                p.kill()
            p.wait()
