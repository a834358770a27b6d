"""Every string choice of training/ is refused when misspelled, where it enters, with the valid
values in the message: ModelSpec (kind, activation, optimizer), build_model, the optimizer,
TrainConfig (dataset, model, encoder, device) and `python -m training.train`'s flags. No
engine, no store: these run in the fast tier."""

import dataclasses
from typing import get_args

import pytest
import torch
from torch import nn

from pipeline.datasets.datasets import DATASETS
from training.encoders import ENCODERS
from training.models import ACTIVATIONS, CNN, MLP, PRESETS, Activation, ModelKind, ModelSpec, OptimizerName, build_model
from training.train import TrainConfig, _optimizer, main, resolve_device

VALID = {
    "kind": ("mlp", "cnn", "piece_values", "siamese", "tapered"),
    "activation": ("relu", "elu"),
    "optimizer": ("adam", "sgd"),
}


def test_the_choice_types_hold_what_the_code_builds():
    assert (get_args(ModelKind), get_args(Activation), get_args(OptimizerName)) == tuple(VALID.values())
    assert tuple(ACTIVATIONS) == get_args(Activation)


def _listed(message: str, values) -> bool:
    return all(repr(v) in message or v in message for v in values)


@pytest.mark.parametrize("field,bad", [("kind", "mpl"), ("activation", "rleu"), ("optimizer", "sdg")])
def test_a_misspelled_model_spec_choice_is_refused_naming_the_valid_values(field, bad):
    with pytest.raises(ValueError) as e:
        ModelSpec(**{"kind": "mlp", field: bad})
    assert bad in str(e.value) and _listed(str(e.value), VALID[field])
    # dataclasses.replace (how a run overrides a preset's widths) checks again
    with pytest.raises(ValueError, match=bad):
        dataclasses.replace(PRESETS["mlp3"], **{field: bad})


def test_build_model_refuses_an_unknown_kind_instead_of_building_an_mlp():
    spec = ModelSpec("mlp", hidden=(4,))
    object.__setattr__(spec, "kind", "cnm")  # a spec that skipped its own check (e.g. unpickled)
    with pytest.raises(ValueError) as e:
        build_model(spec, (12, 8, 8), 3)
    assert "cnm" in str(e.value) and _listed(str(e.value), VALID["kind"])


def test_valid_kinds_build_the_same_modules_as_before():
    assert isinstance(build_model(PRESETS["mlp3"], (768,), 3), MLP)
    assert isinstance(build_model(PRESETS["cnn"], (12, 8, 8), 3), CNN)
    with pytest.raises(ValueError, match="board-shaped"):
        build_model(PRESETS["cnn"], (768,), 3)
    for name, spec in PRESETS.items():  # every preset passes its own checks
        assert dataclasses.replace(spec) == spec, name


def test_optimizer_refuses_an_unknown_name_instead_of_returning_adam():
    params = list(nn.Linear(2, 1).parameters())
    with pytest.raises(ValueError) as e:
        _optimizer("sgdd", params, 1e-3)
    assert "sgdd" in str(e.value) and _listed(str(e.value), VALID["optimizer"])
    assert type(_optimizer("adam", params, 1e-3)) is torch.optim.Adam
    sgd = _optimizer("sgd", params, 1e-3)
    assert type(sgd) is torch.optim.SGD and sgd.defaults["nesterov"] and sgd.defaults["momentum"] == 0.9


MISSPELLED = [
    ("dataset", "sabatelli_3clas", list(DATASETS)),
    ("model", "mlp4", list(PRESETS)),
    ("encoder", "bitmap786", list(ENCODERS)),
    ("device", "gpu", ["auto", "cpu", "cuda"]),
]
"""TrainConfig fields (and so `python -m training.train` flags), a misspelling, the valid values."""


@pytest.mark.parametrize("field,bad,valid", MISSPELLED)
def test_train_config_refuses_a_misspelled_choice_naming_the_valid_values(field, bad, valid):
    with pytest.raises(ValueError) as e:
        TrainConfig(**{field: bad})
    assert bad in str(e.value) and _listed(str(e.value), valid)
    TrainConfig(**{field: valid[-1]})  # every valid value is taken


@pytest.mark.parametrize("field,bad,valid", MISSPELLED)
def test_the_training_cli_refuses_a_misspelled_choice_naming_the_valid_values(field, bad, valid, capsys, tmp_path):
    with pytest.raises(SystemExit) as e:
        main(["--store", str(tmp_path / "store"), f"--{field}", bad])
    assert e.value.code == 2  # argparse's usage error, before anything is read
    err = capsys.readouterr().err
    assert f"invalid choice: {bad!r}" in err and _listed(err, valid)
    assert not (tmp_path / "store").exists()


def test_resolve_device_refuses_an_unknown_name_naming_the_valid_values():
    with pytest.raises(ValueError) as e:
        resolve_device("gpu")
    assert "gpu" in str(e.value) and _listed(str(e.value), ["auto", "cpu", "cuda"])
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto") == torch.device("cuda" if torch.cuda.is_available() else "cpu")


def test_each_reason_a_run_stops_is_one_typed_choice_with_its_own_words():
    from training.choices import EARLY_STOPPING, EPOCHS_DONE, TIME_BUDGET, Stop
    from training.train import TrainResult

    assert get_args(Stop) == (EPOCHS_DONE, EARLY_STOPPING, TIME_BUDGET) == ("epochs", "early stopping", "time budget")
    words = {
        EPOCHS_DONE: "every epoch asked for",
        EARLY_STOPPING: "stopped early (no better validation loss)",
        TIME_BUDGET: "stopped by the time budget (2 min)",
    }
    for stop, text in words.items():
        r = TrainResult("x", stopped_by=stop, epochs_asked=3, max_minutes=2.0)
        assert r.stop_text() == f"0 of 3 epoch(s), {text}"
        assert r.stop_metadata()["stopped_by_time_budget"] is (stop == TIME_BUDGET)
    assert TrainResult("x").stop_text() == "0 of 0 epoch(s), not run"


def test_an_accuracy_kept_run_says_so_and_a_regression_set_cannot_be_kept_by_accuracy():
    from training.train import TrainResult, train

    r = TrainResult("x", stopped_by="early stopping", epochs_asked=3, keep_by="accuracy")
    assert r.stop_text() == "0 of 3 epoch(s), stopped early (no better validation accuracy)"
    with pytest.raises(ValueError, match="keep_by must be one of loss, accuracy; got 'mse'"):
        ModelSpec("mlp", keep_by="mse")
    spec = dataclasses.replace(PRESETS["mlp_regression"], keep_by="accuracy")
    cfg = TrainConfig(dataset="sabatelli_regression", model="mlp_regression", encoder="bitmap768")
    with pytest.raises(ValueError, match="^sabatelli_regression has a regression target: keep its epochs by loss"):
        train(cfg, preset=spec)
