"""Ctrl-C and SIGTERM stop a command, not just the Dagster run it is in.

Dagster turns a SIGINT or SIGTERM that arrives inside an in-process run into that run's failure
and returns; `reproduce` and `ingest`, which go through their steps one run each, took that for
one step's failure and started the next (found when a `reproduce` sent SIGTERM went on to its
next dataset). Real signals, a real Dagster instance and the real CLI."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from cli.runtime import interrupted, materialize, signals_seen
from pipeline.store.store import Store
from tests.fixtures_pgn import RATED_GAMES

REPO = Path(__file__).resolve().parents[1]


@dg.asset
def stopped_by_a_signal() -> None:
    """Sends its own process the signal the test names, inside the step, then waits for it."""
    os.kill(os.getpid(), getattr(signal, os.environ["TEST_SIGNAL"]))
    time.sleep(30)  # the signal lands here: the run fails with Dagster's interrupt


class _SignalledWhileFinalised:
    """Sends its process SIGINT from its finaliser and stays there while the handler runs: the
    interrupt is raised inside the finaliser, where Python can only print and drop it."""

    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)


@dg.asset
def interrupted_in_a_finaliser() -> None:
    """Found in a `reproduce` that went on with its step after Ctrl-C: Dagster's handler raised its
    interrupt while a weakref callback ran ("Exception ignored in: ... WeakSet ...")."""
    _SignalledWhileFinalised()  # finalised at once (no reference kept)
    time.sleep(30)  # the run would go on here; the interrupt must land here instead


@dg.asset
def fails_on_its_own() -> None:
    raise ValueError("a bad row")


def assert_interrupted_at_once(asset: dg.AssetsDefinition, store: Store) -> None:
    """materialize(asset) raises KeyboardInterrupt well before the asset's 30 s wait ends."""
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with dg.DagsterInstance.ephemeral() as instance:
            start = time.monotonic()
            with pytest.raises(KeyboardInterrupt):
                materialize([asset], store, instance)
            assert time.monotonic() - start < 25  # stopped in the step, not waited out
    finally:
        for s, handler in previous.items():  # Dagster leaves SIGTERM mapped to SIGINT's handler
            signal.signal(s, handler)


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_a_signal_inside_a_run_stops_the_command(name, tmp_path, monkeypatch):
    monkeypatch.setenv("TEST_SIGNAL", name)
    assert_interrupted_at_once(stopped_by_a_signal, Store(tmp_path / "store"))


def test_an_interrupt_dropped_in_a_finaliser_still_stops_the_run_at_once_without_a_traceback(tmp_path, capfd):
    assert_interrupted_at_once(interrupted_in_a_finaliser, Store(tmp_path / "store"))
    assert "Exception ignored" not in capfd.readouterr().err


def test_a_signal_a_handler_swallows_is_still_seen():
    """Dagster records a signal that lands outside a step's own code (as the run ends) and lets
    the run succeed; materialize sees it anyway. Here a handler that swallows SIGINT and SIGTERM
    stands for Dagster's, and real signals are sent."""
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    swallowed = []
    try:
        for s in previous:
            signal.signal(s, lambda signo, frame: swallowed.append(signo))
        with signals_seen() as seen:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.1)
        assert seen == {signal.SIGTERM} and swallowed == [signal.SIGTERM]
        with signals_seen() as quiet:
            time.sleep(0.1)
        assert quiet == set()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def test_a_run_that_fails_by_itself_is_returned_as_failed(tmp_path):
    with dg.DagsterInstance.ephemeral() as instance:
        result = materialize([fails_on_its_own], Store(tmp_path / "store"), instance)
    assert not result.success and not interrupted(result)


@pytest.mark.slow
def test_ctrl_c_stops_ingest_in_one_line_and_ingests_no_further_archive(tmp_path):
    """`chess-pipeline ingest` of a small archive, a large one and four more; SIGINT while the
    large one is being ingested: the command stops there (exit 130, one line), and none of the
    archives after it is ingested."""
    folder = tmp_path / "pgn"
    folder.mkdir()
    games = RATED_GAMES.split("\n\n[Event")[0] + "\n\n"  # one game; distinct Event tags make distinct bytes
    (folder / "a0.pgn").write_text(games.replace('"g1"', '"small"'))
    (folder / "a1.pgn").write_text("".join(games.replace('"g1"', f'"big {i}"') for i in range(50_000)))
    for i in range(2, 6):
        (folder / f"a{i}.pgn").write_text(games.replace('"g1"', f'"after {i}"'))
    home = tmp_path / "store"
    env = {**os.environ, "CHESS_PIPELINE_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
    env.pop("CHESS_PIPELINE_DEBUG", None)
    cmd = [sys.executable, "-m", "cli", "ingest", *sorted(map(str, folder.iterdir()))]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stdout.readline()  # a0's line: a1's run has begun
    assert "a0" in first, (first, proc.stderr.read())
    time.sleep(2.0)  # inside a1's ingest (50,000 games: many seconds)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (first + out, err)
    assert err.strip().splitlines()[-1] == "chess-pipeline ingest: interrupted", err
    assert "Traceback" not in err
    assert not any(f"a{i}" in out for i in range(1, 6)), first + out  # nothing after a0 went in
