"""`chess-pipeline label` on a disk that fills up during the run: a real full file system (a
small tmpfs, filled by the test once labels are being written), the CLI in a subprocess."""

import os
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from pipeline.ingest.ingest import IngestConfig, ingest_archive
from pipeline.store.store import Store
from tests.stores import first_games

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def small_disk(tmp_path):
    """A 24 MB tmpfs at tmp_path/disk (mounting needs root; skipped where it is refused)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {mounted.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def _fill(disk: Path, leave_kb: int) -> Path:
    filler = disk / "filler"
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    fd = os.open(filler, os.O_CREAT | os.O_WRONLY)
    try:
        os.posix_fallocate(fd, 0, max(4096, free - leave_kb * 1024))
    finally:
        os.close(fd)
    return filler


@pytest.mark.parametrize("leave_kb", [0, 256])
def test_a_disk_that_fills_during_label_is_one_line_and_the_run_is_marked_failed(
    small_disk, fics_search, stockfish, tmp_path, leave_kb
):
    """The disk fills while labels are written (leaving nothing, or a little: then SQLite's
    writes of the run's events fail one after another): the command exits 1 with one line on
    stderr saying what stopped, that the disk is full and what to do, and the run is FAILURE in
    the instance when the command has exited, not STARTED until the next command."""
    home = small_disk / "store"
    store = Store(home).ensure()
    pgn = tmp_path / "games.pgn"
    first_games(fics_search, 60, pgn)
    ingest_archive(store, store.add_archive(pgn), pgn, IngestConfig(workers=1))
    env = {**os.environ, "CHESS_PIPELINE_HOME": str(home)}
    for name in ("DAGSTER_HOME", "CHESS_PIPELINE_DEBUG"):
        env.pop(name, None)
    cmd = [sys.executable, "-m", "cli", "label", "--depth", "8", "--workers", "1"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    labels = home / "labels"
    deadline = time.monotonic() + 60
    while not any(labels.glob("*/part-*.parquet")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()  # still labelling when the disk fills
    filler = _fill(small_disk, leave_kb)
    out, err = proc.communicate(timeout=120)
    filler.unlink()
    with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
        runs = instance.get_runs(filters=dg.RunsFilter(tags={"chess-pipeline/command": "label"}))
        assert [r.status for r in runs] == [dg.DagsterRunStatus.FAILURE], err
    assert proc.returncode == 1, (out, err)
    assert "sqlalchemy" not in err.lower() and "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("chess-pipeline label: the run of labels stopped: no space left on "), lines[0]
    assert lines[0].endswith("free some space and run the command again"), lines[0]
