"""`chess-pipeline ui` starts `dagster dev` through the interpreter it runs in (no venv on PATH
needed) and stops what it started: a SIGTERM to the command stops `dagster dev`, its webserver,
daemon and code server, and frees the port (issue 36)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

CLI = Path(sys.executable).parent / "chess-pipeline"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _pids_with_env(marker: str) -> list[int]:
    """Live processes whose environment holds marker (this test's own DAGSTER_HOME)."""
    pids = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if marker.encode() in environ.read_bytes():
                pids.append(int(environ.parent.name))
        except OSError:
            continue
    return [p for p in pids if p != os.getpid()]


def _wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


@pytest.mark.slow
def test_ui_starts_without_the_venv_on_path_and_sigterm_stops_dagster_and_frees_the_port(tmp_path):
    port = _free_port()
    dagster_home = tmp_path / "dagster-ui-sigterm"
    env = {"PATH": "/usr/bin:/bin", "DAGSTER_HOME": str(dagster_home), "HOME": str(tmp_path)}
    log = (tmp_path / "ui.log").open("w")
    proc = subprocess.Popen(
        [str(CLI), "ui", "--port", str(port), "--home", str(tmp_path / "store")],
        env=env,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 240
        answered = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=5) as r:
                    answered = json.loads(r.read())
                    break
            except OSError:
                time.sleep(1)
        assert answered is not None, (tmp_path / "ui.log").read_text()[-3000:]
        assert "dagster_webserver_version" in answered
        started = [p for p in _pids_with_env(str(dagster_home)) if p != proc.pid]
        assert len(started) >= 3  # dagster dev, its webserver and its daemon (and the code server)
        proc.send_signal(signal.SIGTERM)  # to the command only, as a service manager or `kill` does
        assert _wait_for(lambda: not _answers(port), 20), "the port still answers 20 s after SIGTERM"
        assert proc.wait(timeout=20) == 128 + signal.SIGTERM  # as a shell reports a process a SIGTERM stopped
        assert _wait_for(lambda: not _pids_with_env(str(dagster_home)), 5), [
            Path(f"/proc/{p}/cmdline").read_bytes() for p in _pids_with_env(str(dagster_home))
        ]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in _pids_with_env(str(dagster_home)):  # whatever a failure above left running
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        log.close()


def test_a_child_that_ignores_sigterm_is_killed_with_its_group_after_the_grace(tmp_path):
    # A stuck `dagster dev`: a shell and its child ignoring SIGTERM (ignored signals are inherited).
    marker = f"CHESS_PIPELINE_UI_TEST={tmp_path}"
    stuck = ["sh", "-c", "trap '' TERM; sleep 60 & wait"]
    code = f"import sys; from cli.ui import run_group; sys.exit(run_group({stuck!r}, 'stuck', grace_s=1))"
    env = {**os.environ, "CHESS_PIPELINE_UI_TEST": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert _wait_for(lambda: len(_pids_with_env(marker)) >= 3, 20)  # python, sh, sleep
        time.sleep(0.5)  # the handlers are in place once the child runs
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
        assert time.monotonic() - started < 5
        assert proc.returncode == 128 + signal.SIGTERM
        assert err.strip() == "chess-pipeline ui: stuck did not stop within 1 s of SIGTERM: killing its processes"
        assert _wait_for(lambda: not _pids_with_env(marker), 5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        for pid in _pids_with_env(marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
