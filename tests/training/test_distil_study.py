"""scripts/distil_study.py: a student trained on a teacher's class probabilities, scored on the
same test rows, baselines and teacher as the training loop scores them; and its refusal of a
teacher trained on other splits (small synthetic sets: no Stockfish, no shared data)."""

import importlib.util
import json
from pathlib import Path

import pytest

from pipeline.store.store import Store
from tests.training.conftest import QUIET
from tests.training.synthetic import write_dataset
from training.train import TrainConfig, train

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/training/conftest.py

SCRIPT = Path(__file__).parents[2] / "scripts" / "distil_study.py"
_SPEC = importlib.util.spec_from_file_location("distil_study", SCRIPT)
script = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(script)


def _run(store: Store, model: str, encoder: str, out: Path):
    cfg = TrainConfig(
        store=str(store.root),
        dataset="sabatelli_3class",
        model=model,
        encoder=encoder,
        epochs=1,
        batch_size=64,
        threads=1,
        device="cpu",
        out=str(out),
    )
    return train(cfg, QUIET)


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    root = tmp_path_factory.mktemp("distil")
    store = Store(root / "store")
    write_dataset(store, "sabatelli_3class", games=20, seed=3)
    return store, _run(store, "mlp3_regularised", "bitmap768", root / "teacher"), root


def _study(capsys, store: Store, checkpoint, *extra) -> dict:
    args = ["--store", str(store.root), "--teacher", str(checkpoint), "--epochs", "2", "--batch", "64"]
    script.main(args + ["--threads", "1", *extra])
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_the_student_is_scored_on_the_loops_test_rows_against_the_same_material_rule(teacher, capsys):
    store, taught, root = teacher
    got = _study(capsys, store, taught.checkpoint, "--dropout", "0")
    # the same test rows and material rule as a training run of the student's own, and the
    # teacher's test accuracy as its own run reported it
    plain = _run(store, "mlp3_regularised", "algebraic", root / "plain")
    assert got["rows"] == plain.test["rows"]
    assert got["material_accuracy"] == pytest.approx(plain.test["material_baseline_accuracy"])
    assert got["teacher_test_accuracy"] == pytest.approx(taught.test["accuracy"])
    assert got["material_lead"] == pytest.approx(got["test_accuracy"] - got["material_accuracy"])
    assert 0 < got["material_lead_ci95"] < 1
    assert _study(capsys, store, taught.checkpoint, "--dropout", "0") == got  # same seed, same figures


def test_a_teacher_of_other_splits_is_refused_in_one_line(teacher, tmp_path, capsys):
    _, taught, _ = teacher
    other = Store(tmp_path / "other")
    write_dataset(other, "sabatelli_3class", games=20, seed=4)  # other games: its val and test differ
    with pytest.raises(SystemExit) as e:
        script.main(["--store", str(other.root), "--teacher", str(taught.checkpoint), "--epochs", "1"])
    assert str(e.value).startswith("distil_study: ") and "\n" not in str(e.value)
    assert "was not trained on" in str(e.value)
