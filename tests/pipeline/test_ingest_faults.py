"""Ingest under faults: two writers of one partition, a failed archive (issues 12 and 13)."""

import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from pipeline.ingest.archive import ArchiveError
from pipeline.ingest.ingest import TABLES, IngestConfig, ingest_archive
from pipeline.store.store import Store

WRITER = """
import sys
from pathlib import Path
from pipeline.ingest.ingest import IngestConfig, ingest_archive
from pipeline.store.store import Store
store, key, path = Store(Path(sys.argv[1])), sys.argv[2], Path(sys.argv[3])
sys.stdin.readline()  # start when told: both interpreters are up before either writes
stats = ingest_archive(store, key, path, IngestConfig(workers=1),
                       on_wait=lambda msg: print("WAIT", msg, file=sys.stderr, flush=True))
print(stats.games, flush=True)
"""


def test_two_ingests_of_one_partition_at_once_both_finish_with_one_copy(tmp_path, fics_2022):
    store = Store(tmp_path / "store").ensure()
    key = store.add_archive(fics_2022)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(store.root), key, str(fics_2022)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    first, second = procs
    first.stdin.write("go\n")
    first.stdin.flush()
    # The second starts while the first has its temporary files open.
    positions = store.partition_dir("positions", key)
    deadline = time.monotonic() + 120
    while not list(positions.glob(".*.tmp")):
        assert first.poll() is None and time.monotonic() < deadline, "the first ingest ended too soon"
        time.sleep(0.005)
    second.stdin.write("go\n")
    second.stdin.flush()
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert out.split() == ["2229"]
    assert "is being written by another run" in outs[1][1]
    for t in TABLES:
        d = store.partition_dir(t, key)
        assert [p.name for p in d.iterdir()] == ["data.parquet"], t
    assert pq.read_metadata(store.partition_file("games", key)).num_rows == 2229
    assert pq.read_metadata(store.partition_file("positions", key)).num_rows == 166803 + 2229


def test_stale_temp_files_of_a_dead_run_go_when_the_partition_is_written(tmp_path, fics_search):
    store = Store(tmp_path / "store").ensure()
    key = store.add_archive(fics_search)
    stale = store.partition_dir("games", key) / ".data.parquet.dead1234.tmp"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"left by a killed run")
    ingest_archive(store, key, fics_search, IngestConfig(workers=1))
    assert [p.name for p in stale.parent.iterdir()] == ["data.parquet"]


def test_a_failed_archive_leaves_no_empty_partition_folders(tmp_path, fics_search):
    store = Store(tmp_path / "store").ensure()
    bad = tmp_path / "truncated.pgn.zst"
    data = fics_search.read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    key = store.add_archive(bad)
    with pytest.raises(ArchiveError):
        ingest_archive(store, key, bad, IngestConfig(workers=1))
    for t in TABLES:
        assert not store.partition_dir(t, key).exists(), t
