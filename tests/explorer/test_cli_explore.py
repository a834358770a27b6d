"""`chess-pipeline explore`: the server on 127.0.0.1 over the store, as the CLI starts it;
a bad port in one line; the explorer package free of Dagster."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_explore_serves_the_api_and_page_on_loopback(explorer_store, tmp_path):
    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli", "--home", str(explorer_store.root), "explore", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        body = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/models", timeout=5) as r:
                    body = json.loads(r.read())
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.2)
        assert body == {"value_networks": [], "piece_value_networks": []}, proc.stderr.read() if proc.poll() else body
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/fen?fen=8/8/8/8/8/8/8/K6k", timeout=5) as r:
            assert json.loads(r.read())["fen"] == "8/8/8/8/8/8/8/K6k w - - 0 1"
        with pytest.raises(urllib.error.HTTPError) as bad:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/fen?fen=K6k", timeout=5)
        assert bad.value.code == 400 and "not a FEN" in json.loads(bad.value.read())["error"]
        # Only on loopback.
        with socket.socket() as s:
            s.settimeout(2)
            other = socket.gethostbyname(socket.gethostname())
            if not other.startswith("127."):
                assert s.connect_ex((other, port)) != 0
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.slow  # a Python that imports the CLI (Dagster) in a process of its own: 5 to 15 s
def test_a_bad_port_is_one_line(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "cli", "--home", str(tmp_path / "s"), "explore", "--port", "70000"],
        cwd=ROOT,
        env={**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1] == "chess-pipeline explore: --port must be from 1 to 65535, got 70000"
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("module", ["explorer.app", "explorer.queries", "explorer.evaluations", "explorer.position"])
def test_the_explorer_imports_without_dagster(module):
    code = (
        f"import sys, importlib; importlib.import_module({module!r}); "
        "print(','.join(sorted(m for m in sys.modules if m == 'dagster' or m.startswith('dagster.'))[:3]))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "", f"{module} imports Dagster: {out.stdout.strip()}"


@pytest.mark.slow  # a Python that imports the CLI (Dagster) in a process of its own: 5 to 15 s
def test_a_taken_port_is_one_line_naming_port_before_any_serving_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "-m", "cli", "--home", str(tmp_path / "s"), "explore", "--port", str(port)],
            cwd=ROOT,
            env={**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster")},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert out.returncode == 1, out.stderr
    lines = out.stderr.strip().splitlines()
    said = f"chess-pipeline explore: port {port} on 127.0.0.1 is in use (another explorer or server?)"
    assert lines[-1] == said + ": choose another with --port N"
    assert not any("http://127.0.0.1" in line for line in lines), lines  # never said to be serving
    assert "Traceback" not in out.stderr
