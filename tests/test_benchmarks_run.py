"""Every benchmark `make bench` runs, run at a tiny size, so a README command cannot break
silently (issue 36: benchmarks/loader.py raised on pieces837's PieceRows and the benchmarks
after it never ran). Scripts with a test module of their own (tests/test_bench_<name>.py) are
run there; the rest here. The Makefile's bench target must list exactly the scripts covered."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.store.store import Store
from tests.training.synthetic import write_dataset
from training.encoders import ENCODERS

pytestmark = pytest.mark.slow  # a script run end to end (a study's or a benchmark's): the full suite's

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
RUN_HERE = ("ingest.py", "labels.py", "loader.py", "explorer.py", "storage_s3.py")
"""Benchmarks this module runs (the last two are documented commands outside the bench target);
every other file of benchmarks/ has tests/test_bench_<name>.py."""


def _run(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(BENCH / script), *args], capture_output=True, text=True, timeout=300, cwd=ROOT
    )


def _bench_target() -> list[str]:
    """The scripts of the Makefile's bench recipe, in order."""
    text = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^bench:.*\n((?:\t.*\n|\n)*)", text, re.M).group(1)
    return re.findall(r"benchmarks/(\w+\.py)", recipe)


def test_the_bench_target_lists_exactly_the_benchmarks_that_are_tested():
    listed = _bench_target()
    assert len(listed) == len(set(listed)) and "loader.py" in listed
    own_tests = {p.name.removeprefix("test_bench_") for p in (ROOT / "tests").glob("test_bench_*.py")}
    covered = set(RUN_HERE) | {s for s in listed if s in own_tests}
    assert set(listed) <= covered, f"bench target {listed}, run by tests {sorted(covered)}"
    assert {"ingest.py", "labels.py", "loader.py"} <= set(listed)


def test_every_benchmark_file_is_run_by_a_test():
    # A benchmark outside the bench target is still a documented command (docs/): run it too.
    scripts = {p.name for p in BENCH.iterdir() if p.suffix in (".py", ".sh")}
    own = {p.name.removeprefix("test_bench_").removesuffix(".py") for p in (ROOT / "tests").glob("test_bench_*.py")}
    untested = sorted(s for s in scripts if s not in RUN_HERE and s.rsplit(".", 1)[0] not in own)
    assert not untested, f"benchmarks no test runs: {untested}"


def test_the_loader_benchmark_times_every_encoder_and_holds_its_floor(tmp_path):
    store = Store(tmp_path / "store")
    write_dataset(store, "sabatelli_3class", games=20, seed=1)
    r = _run("loader.py", "--home", str(store.root), "--batches", "4", "--steps", "3")
    assert "Traceback" not in r.stderr, r.stderr
    rows = {line.split()[0]: line for line in r.stdout.splitlines() if line.split()[:1] in ([n] for n in ENCODERS)}
    assert set(rows) == set(ENCODERS), r.stdout  # every encoder, the ones after pieces837 too
    assert "(no MLP)" in rows["pieces837"]
    below = re.findall(
        r"^loader below the floor: (\w+) delivers ([\d.]+)x the MLP step rate \(floor 5x\)$", r.stderr, re.M
    )
    # A tiny, noisy run may fall below the floor; then it exits 1 naming each such encoder, and nothing else.
    assert r.returncode == (1 if below else 0), (r.returncode, r.stderr)
    assert len(below) == len(r.stderr.strip().splitlines()) if below else not r.stderr.strip()


def test_the_loader_benchmark_names_a_missing_dataset_in_one_line(tmp_path):
    r = _run("loader.py", "--home", str(tmp_path), "--batches", "1")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().endswith("not found: materialise it first (chess-pipeline datasets sabatelli_3class)")


def test_the_ingest_benchmark_on_one_small_archive(fics_search, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / fics_search.name).symlink_to(fics_search)
    r = _run("ingest.py", "--data", str(data))
    assert r.returncode == 0, r.stderr
    assert "bytes/position on disk" in r.stdout


def test_the_labels_benchmark_on_a_few_positions(stockfish, shared_data):
    r = _run("labels.py", "--data", str(shared_data / "pgn"), "--positions", "40", "--depth", "1")
    assert r.returncode == 0, r.stderr
    assert "reproducible:" in r.stdout and "hash kept:" in r.stdout


def test_the_explorer_benchmark_on_a_small_store(fics_search, tmp_path):
    from tests.stores import add_pgn, first_games

    store = Store(tmp_path / "store").ensure()
    add_pgn(store, tmp_path, "games.pgn", first_games(fics_search, 30, tmp_path / "src.pgn"))
    r = _run("explorer.py", "--home", str(store.root), "--repeat", "1")
    assert r.returncode == 0, r.stderr
    assert "/api/position start position" in r.stdout and "30 games" in r.stdout
    assert "baseline: bare key scan" in r.stdout


def test_the_s3_storage_benchmark_on_two_games(stockfish, fics_2022):
    r = _run("storage_s3.py", "--archive", str(fics_2022), "--games", "2", "--depth", "1")
    assert r.returncode == 0, r.stderr
    steps = [line.split("  ")[0] for line in r.stdout.splitlines() if re.search(r"\d+\.\dx$", line)]
    assert steps[0] == "add + ingest" and steps[-1] == "label again, none pending" and len(steps) == 5, r.stdout


@pytest.mark.parametrize("script", sorted(set(_bench_target()) - set(RUN_HERE)))
def test_the_other_benchmarks_have_their_own_test(script):
    assert (ROOT / "tests" / f"test_bench_{script}").is_file()
