"""What `chess-pipeline reproduce` keeps is decided from the store itself, and a killed model run
resumes its own run folder.

- An S3 store (a real S3-compatible server on loopback, moto's server mode) reproduced on one
  machine (a local cache folder and Dagster instance of its own), then the same command on a
  second machine (a fresh cache and instance, the same S3 store): every finished step is kept,
  no archive is ingested again, nothing is labelled twice and no model is trained again; the
  second machine's report is the first's (but for what each machine's own runs legitimately
  change: _comparable), and an evaluation redone there finds the checkpoint the first trained.
- A local store whose command is SIGKILLed once the model's first checkpoint is written: the
  same command run again trains on in the same run folder, from that checkpoint's epoch.
"""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
import torch

from assets.evaluation import SuitesConfig, suites_asset
from assets.resources import StockfishResource, StoreResource
from assets.shared import checkpoint_of
from pipeline.store import storage
from pipeline.store.storage_paths import ObjectPath
from tests.pipeline.test_storage_s3 import bucket, endpoint  # noqa: F401  (fixtures)
from tests.stores import first_games

pytestmark = pytest.mark.slow  # Stockfish, shared data, reproduce run twice

CLI = Path(sys.executable).parent / "chess-pipeline"
MODEL = "mlp_bitmap_3class"
SOURCE = "ficsgamesdb_202401_standard2000_nomovetimes_397466.pgn.zst"


def _inputs(tmp: Path, shared_data: Path, games: int) -> list[str]:
    """The data and suites folders (the first `games` games, five positions a suite); their flags."""
    (tmp / "data").mkdir()
    first_games(shared_data / "pgn" / SOURCE, games, tmp / "data" / f"fics2024-{games}.pgn")
    (tmp / "suites").mkdir()
    for suite in ("kaufman.epd", "STS1-STS15_LAN_v3.epd"):
        lines = (shared_data / "epd" / suite).read_text().splitlines()[:5]
        (tmp / "suites" / suite).write_text("\n".join(lines) + "\n")
    return ["--data", str(tmp / "data"), "--suites", str(tmp / "suites")]


def _machine(tmp: Path, name: str) -> dict:
    """The environment of one machine: its own cache folder and Dagster instance."""
    env = {k: v for k, v in os.environ.items() if k not in ("CHESS_PIPELINE_HOME", "CHESS_PIPELINE_DEBUG")}
    env["DAGSTER_HOME"] = str(tmp / name / "dagster")
    env["CHESS_PIPELINE_CACHE"] = str(tmp / name / "cache")
    return env


def _steps(stdout: str) -> dict[str, str]:
    """{step: what the command did with it} from its '[i/n] step: ...' lines (the last said)."""
    out = {}
    for m in re.finditer(r"^\[\d+/\d+\] (\S+): (kept|done|running|failed|skipped)", stdout, re.M):
        if m.group(2) != "running":
            out[m.group(1)] = m.group(2)
    return out


def test_a_second_machine_on_the_same_s3_store_keeps_every_finished_step(bucket, shared_data, stockfish, tmp_path):  # noqa: F811
    home = f"s3://{bucket}/store"
    argv = [str(CLI), "--home", home, "reproduce", MODEL, "--profile", "quick", "--static", "--quick-eval",
            "--max-epochs", "1", "--openings", "1", *_inputs(tmp_path, shared_data, 40)]  # fmt: skip
    first = subprocess.run(argv, env=_machine(tmp_path, "a"), cwd=tmp_path, capture_output=True, text=True,
                           timeout=900)  # fmt: skip
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    done = _steps(first.stdout)
    assert done and set(done.values()) == {"done"}, first.stdout
    models = ObjectPath(bucket, "store/models")
    trained = sorted(o["Key"] for o in storage.list_objects(models))
    assert any(f"/{MODEL}/" in k for k in trained), trained
    report = ObjectPath(bucket, "store/reports/reproduction.md")
    report_a = storage.read_bytes(report).decode()
    assert f"![{MODEL}: learning curves]" in report_a and "Kaufman test, per position" in report_a, report_a

    second = subprocess.run(argv, env=_machine(tmp_path, "b"), cwd=tmp_path, capture_output=True, text=True,
                            timeout=900)  # fmt: skip
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    again = _steps(second.stdout)
    assert set(again) == set(done), second.stdout
    redone = {n: s for n, s in again.items() if s != "kept" and n != "reproduction_report"}
    assert not redone, second.stdout  # every finished step kept, on a machine whose instance is new
    assert again["reproduction_report"] == "done"
    assert "ingest: 1 of 1 archives already ingested; 0 to ingest" in second.stdout
    assert re.search(r"labels .*: 0 labelled", second.stdout), second.stdout
    assert sorted(o["Key"] for o in storage.list_objects(models)) == trained  # no model trained again
    assert _comparable(storage.read_bytes(report).decode()) == _comparable(report_a)

    # Machine B redoes an evaluation of the model it kept (as when the evaluation's settings change):
    # its instance never made the model, the store's record names the run folder A trained in.
    (checkpoint,) = [k for k in trained if k.startswith(f"store/models/{MODEL}/") and k.endswith("/checkpoint.pt")]
    instance_b = dg.DagsterInstance.local_temp(tempdir=str(tmp_path / "b" / "dagster"))
    resources = {"store": StoreResource(root=home), "stockfish": StockfishResource(workers=1)}
    with dg.build_asset_context(instance=instance_b, resources={"store": resources["store"]}) as context:
        assert str(checkpoint_of(context, MODEL)) == f"s3://{bucket}/{checkpoint}"
    config = SuitesConfig(suites_dir=str(tmp_path / "suites"), depths=[1], kaufman_depth=4, max_positions=2)
    redone = dg.materialize([suites_asset(MODEL)], instance=instance_b, resources=resources,
                            run_config=dg.RunConfig(ops={f"eval_suites_{MODEL}": config}))  # fmt: skip
    assert redone.success


def _comparable(report: str) -> str:
    """The report less what each machine's own runs make differ: each step's status (done on the
    first machine, kept on the second) and the ingest and labels rows (the runs of them each
    machine's instance holds: the second checks and labels nothing, but runs them), so the total."""
    out = []
    for line in report.splitlines():
        cells = line.split(" | ")
        if line.startswith(("| archive_tables |", "| labels |", "| total |")):
            continue
        if len(cells) == 4 and cells[1] in ("done", "kept"):  # | step | status | wall time | detail |
            cells[1] = "done or kept"
        out.append(" | ".join(cells))
    return "\n".join(out)


def _checkpoints(store: Path) -> list[Path]:
    return sorted((store / "models" / MODEL).glob("*/checkpoint.pt"))


def test_a_model_run_killed_mid_training_resumes_its_own_run_folder(shared_data, stockfish, tmp_path):
    store = tmp_path / "store"
    argv = [str(CLI), "--home", str(store), "reproduce", MODEL, "--profile", "quick", "--static", "--quick-eval",
            "--openings", "1", *_inputs(tmp_path, shared_data, 400)]  # fmt: skip
    env = _machine(tmp_path, "a")
    first = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 600
    try:
        while not _checkpoints(store):  # the model's first epoch written: killed at once
            assert first.poll() is None and time.monotonic() < deadline, "the command ended before the model trained"
            time.sleep(0.01)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=60)
    (folder,) = [p.parent for p in _checkpoints(store)]
    ck = torch.load(folder / "checkpoint.pt", map_location="cpu", weights_only=False)
    epochs = ck["config"]["epochs"]
    assert ck["epoch"] < epochs - 1 and not ck.get("stopped_early"), "the kill landed after the model's training"
    kept = [row["positions_per_second"] for row in ck["history"]]  # measured, so a run trained again differs

    second = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert [p.parent for p in _checkpoints(store)] == [folder]  # its own run folder, no new one
    after = torch.load(folder / "checkpoint.pt", map_location="cpu", weights_only=False)
    assert [row["positions_per_second"] for row in after["history"][: len(kept)]] == kept  # resumed, not redone
    assert after["epoch"] > ck["epoch"] or after.get("stopped_early")
