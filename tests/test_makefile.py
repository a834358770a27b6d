"""`make clean` removes build output only; the store goes only with `make clean-store`."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tree(folder: Path) -> Path:
    """A copy of the Makefile beside a fake checkout: venv, build output, caches and a store."""
    shutil.copy(ROOT / "Makefile", folder / "Makefile")
    for d in (
        ".venv/bin",
        "build/lib",
        "chess_pipeline.egg-info",
        ".pytest_cache",
        "pipeline/__pycache__",
        "pipeline/ingest",
        "store/labels/engine=x",
        "store/models",
        "store/dagster",
    ):
        (folder / d).mkdir(parents=True)
    for f in (
        "pipeline/ingest/_replay.cpython-311-x86_64-linux-gnu.so",
        "pipeline/__pycache__/a.cpython-311.pyc",
        "store/labels/engine=x/data.parquet",
        "store/models/m.pt",
        "pipeline/keep.py",
    ):
        (folder / f).write_text("x")
    return folder


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_clean_keeps_the_store_and_clean_store_says_what_it_deletes(tmp_path):
    folder = _tree(tmp_path)
    subprocess.run(["make", "-s", "clean"], cwd=folder, check=True, capture_output=True, text=True, timeout=60)
    for gone in (
        ".venv",
        "build",
        "chess_pipeline.egg-info",
        ".pytest_cache",
        "pipeline/__pycache__",
        "pipeline/ingest/_replay.cpython-311-x86_64-linux-gnu.so",
    ):
        assert not (folder / gone).exists(), gone
    assert (folder / "store/labels/engine=x/data.parquet").exists() and (folder / "store/models/m.pt").exists()
    assert (folder / "pipeline/keep.py").exists()
    out = subprocess.run(
        ["make", "-s", "clean-store"],
        cwd=folder,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert not (folder / "store").exists()
    assert str(folder / "store") in out.stdout and "labels" in out.stdout
