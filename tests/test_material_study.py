"""scripts/material_study.py: a variant trained by the training loop (train's `preset` hook),
scored against the majority class and the material rule on the same test rows."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipeline.datasets.datasets import dataset_dir
from pipeline.store.store import Store
from tests.training.synthetic import write_dataset

pytestmark = pytest.mark.slow  # a script run end to end (a study's or a benchmark's): the full suite's

ROOT = Path(__file__).parents[1]
SCRIPT = ROOT / "scripts" / "material_study.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    store = Store(tmp_path_factory.mktemp("study") / "store")
    write_dataset(store, "sabatelli_3class", games=30, seed=2)
    return dataset_dir(store, "sabatelli_3class")


def test_a_variant_runs_through_the_training_loop_and_prints_one_json_line(folder):
    done = _run("--data", str(folder), "--inputs", "bits", "--hidden", "16", "--residual", "--class-weight",
                "--lr-decay", "0.9", "--epochs", "2", "--patience", "2", "--batch", "64")  # fmt: skip
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()  # the training loop's log goes to stderr
    assert "epoch 0: train loss" in done.stderr
    out = json.loads(line)
    test = pq.read_table(folder / "test.parquet", columns=["target", "game_id"]).to_pydict()
    y = np.array(test["target"])
    assert out["test"]["rows"] == len(y) and out["test"]["games"] == len(set(test["game_id"]))
    train = pq.read_table(folder / "train.parquet", columns=["target"]).column(0).to_numpy().astype(np.int64)
    assert out["test"]["majority"] == pytest.approx(float((y == np.bincount(train).argmax()).mean()))  # train's
    assert out["test"]["material_lead"] == pytest.approx(out["test"]["accuracy"] - out["test"]["material"])
    assert out["test"]["lead_clusters"] == len(set(test["game_id"]))
    assert [h[0] for h in out["history"]] == list(range(len(out["history"]))) and 1 <= len(out["history"]) <= 2


def test_an_input_no_encoder_reads_is_refused_in_one_line(folder):
    done = _run("--data", str(folder), "--inputs", "counts+alg")
    assert done.returncode != 0 and done.stdout == ""
    expected = "--inputs must be one of bits, counts, bits+counts, alg, alg-onehot, got 'counts+alg'"
    assert done.stderr.strip().splitlines() == [expected]
